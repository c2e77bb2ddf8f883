package exceptions

import (
	"encoding/json"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// marking is what the server writes of one namespace's expiry marks.
type marking struct {
	// marks is the new value of implicit.dev/exceptions-expired (exception
	// name to digest); empty: remove the annotation.
	marks map[string]string
	// expired are the exceptions this write marks.
	expired []merge.Exception
	// dropped names the marks of exceptions that no longer exist.
	dropped []string
}

// changes reports whether the namespace's annotation must be written.
func (m marking) changes() bool { return len(m.expired) > 0 || len(m.dropped) > 0 }

// markingOf computes ns's marks at now: every exception whose end has
// passed and whose version is not yet marked is marked with its digest;
// the marks of exceptions that are no longer declared are dropped (while
// the exceptions annotation does not parse, none is dropped: a tenant's
// typo must not revive an ended exception). Other marks are kept.
func markingOf(ns *corev1.Namespace, now time.Time) marking {
	m := marking{marks: map[string]string{}}
	if v, ok := ns.Annotations[v1alpha1.AnnotationExceptionsExpired]; ok {
		if cur, err := merge.ParseExceptionsExpired(v); err == nil {
			m.marks = cur
		}
	}
	declared := map[string]bool{}
	parsed := true
	if v, ok := ns.Annotations[v1alpha1.AnnotationExceptions]; ok {
		specs, err := merge.ParseExceptions(v)
		parsed = err == nil
		for _, s := range specs {
			declared[s.Name] = true
		}
	}
	if parsed {
		for name := range m.marks {
			if !declared[name] {
				delete(m.marks, name)
				m.dropped = append(m.dropped, name)
			}
		}
		sort.Strings(m.dropped)
	}
	for _, e := range merge.ExpiredBy(merge.NamespaceOf(ns), now) {
		m.marks[e.Name] = e.Digest
		m.expired = append(m.expired, e)
	}
	return m
}

// patch is the JSON merge patch that writes m on the namespace at
// resourceVersion: kube-apiserver refuses it with a Conflict if the
// namespace changed since (another replica's mark, a tenant's edit).
func (m marking) patch(resourceVersion string) ([]byte, error) {
	var value any // null removes the annotation
	if len(m.marks) > 0 {
		b, err := json.Marshal(m.marks) // map keys sorted: one text per state
		if err != nil {
			return nil, err
		}
		value = string(b)
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": resourceVersion,
			"annotations":     map[string]any{v1alpha1.AnnotationExceptionsExpired: value},
		},
	})
}
