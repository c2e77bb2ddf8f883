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
// ahead of this replica, 504; lists that fail for a passing reason, or
// outlast pastWait (they go on for the next request), 429.
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
	if err := m.reachRLocked(ctx, version, want); err != nil {
		return nil, err
	}
	if want.Mid == nil && m.pos.sameStateLocked(want.Vector) {
		// The version names the current state: no list needed.
		out := m.currentResultsLocked(resource, namespace, name)
		m.mu.RUnlock()
		return out, nil
	}
	c := m.pastConfigLocked()
	m.mu.RUnlock()
	p, err := m.pastInTurn(ctx, c, want, resource, namespace, version)
	var refused *pastRefused
	if errors.As(err, &refused) {
		return nil, refused.err
	}
	if err != nil {
		if errors.Is(err, errNoLister) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			resumeFailures.Inc()
			return nil, gone(version, fmt.Sprintf("can't be served (%v): list again", err))
		}
		if passing(err) {
			// Within the window: the client lists again after
			// Retry-After (client-go's rest client does by itself), and
			// finds the lists done by then, or still under way.
			return nil, apierrors.NewTooManyRequests(fmt.Sprintf("resourceVersion %s can't be served now (%v): list again", version, err), 1)
		}
		return nil, apierrors.NewInternalError(fmt.Errorf("listing the sources at resourceVersion %s: %w", version, err))
	}
	if err := m.sameNamespace(p, version, namespace); err != nil {
		return nil, err
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

// currentResultsLocked is the current views of resource in namespace (""
// for every namespace), of item name only when set. Called with mu held.
func (m *Mux) currentResultsLocked(resource, namespace, name string) []NamespaceResults {
	namespaces := []string{namespace}
	if namespace == "" {
		namespaces = m.st.namespaceNames()
	}
	var out []NamespaceResults
	for _, ns := range namespaces {
		if res := m.st.results(resource, ns, name); len(res) > 0 {
			out = append(out, NamespaceResults{Namespace: ns, Results: res})
		}
	}
	return out
}

// sameNamespace answers 410 Gone when the past state p holds namespace
// (not "") as another namespace than the one of that name now: deleted
// and created again, by someone else perhaps. A past view is served only
// for the namespace as it is now, as its readers are those of today. (One
// deleted since has no readers but those of every namespace: its
// difference, deletions, is served.)
func (m *Mux) sameNamespace(p *pastState, version, namespace string) error {
	if namespace == "" {
		return nil
	}
	m.mu.RLock()
	cur, ok := m.st.namespaces[namespace]
	m.mu.RUnlock()
	for _, st := range []*state{p.after, p.before} {
		if st == nil {
			continue
		}
		past, existed := st.namespaces[namespace]
		if existed && ok && past.UID != cur.UID {
			pastStates.WithLabelValues("other_namespace").Inc()
			return gone(version, fmt.Sprintf("names namespace %s as it was before it was deleted: list again", namespace))
		}
	}
	return nil
}
