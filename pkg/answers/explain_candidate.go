package answers

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// namespaceNotFound is the error of a question about a namespace that does
// not exist, as kube-apiserver's for an object in it.
func namespaceNotFound(namespace string) error {
	return apierrors.NewNotFound(corev1.Resource("namespaces"), namespace)
}

// candidateSummary says what name is when it names a candidate of the
// namespace's lineage (global included) that is not an item of the view: it
// stages its stable source, and is seen under that name in the namespaces
// its selector picks. ok is false when name is no such candidate.
func candidateSummary(r watchmux.Reader, resource, name, namespace string, l merge.Lineage) (string, bool) {
	scopes := make([]string, 0, len(l.Ancestors)+2)
	if l.Namespace != nil {
		scopes = append(scopes, l.Namespace.Name)
	}
	for _, a := range l.Ancestors {
		scopes = append(scopes, a.Name)
	}
	scopes = append(scopes, r.GlobalNamespace(resource))
	for _, ns := range scopes {
		it, ok := r.Source(resource, ns, name)
		if !ok || it.Candidate == nil {
			continue
		}
		c := it.Candidate
		return fmt.Sprintf("%s/%s is not an item of the view of %s: the source %s/%s is a candidate for %s/%s (canary selector %q), which the namespaces whose stage it selects see as %s; ask about that item (kubectl implicit why %s %s -n %s, or kubectl implicit rollout status %s %s -n %s)",
			resource, name, namespace, ns, name, ns, c.For, c.Selector.String(), c.For,
			resource, c.For, namespace, resource, c.For, ns), true
	}
	return "", false
}
