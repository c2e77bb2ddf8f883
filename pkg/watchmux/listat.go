package watchmux

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// NamespaceResults are one namespace's view items.
type NamespaceResults struct {
	Namespace string
	Results   []merge.Result
}

// ResultsAt merges the views of resource in namespace ("" for every
// namespace), of item name only when set, as a client at version holds
// them: an exact list (resourceVersionMatch=Exact) of a past version, or a
// continuation of a list whose snapshot is gone. The state is the sources
// listed from kube-apiserver at the version's revisions, as for a resume
// (one namespace's lineage, or every source for all namespaces), whichever
// replica issued the version. Another fingerprint, a version that is not
// one, or revisions kube-apiserver has compacted answer 410 Gone; a version
// ahead of this replica, 504.
func (m *Mux) ResultsAt(ctx context.Context, version, resource, namespace, name string) ([]NamespaceResults, error) {
	want, err := rv.Parse(version)
	if err != nil {
		return nil, gone(version, "is not a version of this server: list again")
	}
	m.mu.RLock()
	if !m.synced {
		m.mu.RUnlock()
		return nil, errNotSynced
	}
	if err := m.sameConfigurationLocked(version, want); err != nil {
		m.mu.RUnlock()
		return nil, err
	}
	if !rv.AtLeast(m.pos.vector(), want.Vector) {
		current := m.currentTextLocked()
		m.mu.RUnlock()
		return nil, apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %s, current: %s", version, current), 1)
	}
	c := m.pastConfigLocked()
	m.mu.RUnlock()
	p, err := m.pastFor(ctx, c, want, resource, namespace)
	if err != nil {
		if errors.Is(err, errNoLister) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			resumeFailures.Inc()
			return nil, gone(version, fmt.Sprintf("can't be served (%v): list again", err))
		}
		return nil, apierrors.NewInternalError(fmt.Errorf("listing the sources at resourceVersion %s: %w", version, err))
	}
	namespaces := []string{namespace}
	if namespace == "" {
		namespaces = p.namespaces()
	}
	var out []NamespaceResults
	for _, ns := range namespaces {
		if res := p.view(want, resource, ns, name); len(res) > 0 {
			out = append(out, NamespaceResults{Namespace: ns, Results: res})
		}
	}
	return out, nil
}
