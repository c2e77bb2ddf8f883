package admission

import (
	"fmt"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// exceptionSpecs judges implicit.dev/exceptions when the request sets or
// changes it: a malformed value is refused, and so is each exception added
// or changed (a new name, or another digest than the old object's of that
// name) that exceptionSpec refuses. Unchanged exceptions are not judged
// again: a source's rules that changed since bind only new versions.
func (g *Guards) exceptionSpecs(req *admissionv1.AdmissionRequest, old, obj *unstructured.Unstructured, inh *inheritedItems) decision {
	key := v1alpha1.AnnotationExceptions
	value, ok := annotation(obj, key)
	if !ok || !annotationChanged(old, obj, key) {
		return allow()
	}
	specs, err := merge.ParseExceptions(value)
	if err != nil {
		return deny("namespace %s: %v", obj.GetName(), err)
	}
	before := map[string]string{}
	if prev, had := annotation(old, key); had {
		olds, _ := merge.ParseExceptions(prev)
		for _, s := range olds {
			if _, seen := before[s.Name]; !seen {
				before[s.Name] = merge.ExceptionDigest(s)
			}
		}
	}
	now := g.clock.Now()
	seen := map[string]bool{}
	for _, s := range specs {
		if seen[s.Name] {
			return deny("namespace %s: exception %q is declared twice in %s: names are unique", obj.GetName(), s.Name, key)
		}
		seen[s.Name] = true
		if d, had := before[s.Name]; had && d == merge.ExceptionDigest(s) {
			continue
		}
		if d := g.exceptionSpec(req, obj.GetName(), s, now, inh); !d.allowed {
			return d
		}
	}
	return allow()
}

// exceptionSpec judges one exception added or changed: it is well formed
// (merge.ValidateException), its requester is the user writing it, each
// entry names a served view, its end is in the future, and no item it names
// is locked or has a source whose maximum its end passes (or that requires
// an end it lacks).
func (g *Guards) exceptionSpec(req *admissionv1.AdmissionRequest, namespace string, s v1alpha1.ExceptionSpec, now time.Time, inh *inheritedItems) decision {
	if problems := merge.ValidateException(s); len(problems) > 0 {
		return deny("namespace %s: %s", namespace, strings.Join(firstOf(problems), "; "))
	}
	if user := req.UserInfo.Username; s.RequestedBy != user {
		return deny("namespace %s: exception %q: requestedBy must be the user writing it (%s), not %q", namespace, s.Name, user, s.RequestedBy)
	}
	if s.ExpiresAt != nil && !s.ExpiresAt.After(now) {
		return deny("namespace %s: exception %q: expiresAt %s must be in the future", namespace, s.Name, s.ExpiresAt.UTC().Format(time.RFC3339))
	}
	views := g.views()
	for _, entry := range s.Exclude {
		ex, _ := merge.ParseExclusions(entry) // ValidateException parsed it
		if !slices.Contains(views, ex[0].Resource) {
			return deny("namespace %s: exception %q: implicit.dev serves no view %q%s (served: %s)", namespace, s.Name, ex[0].Resource, meant(ex[0], views), strings.Join(views, ", "))
		}
		items, err := inh.named(ex[0])
		if err != nil {
			return unavailable(fmt.Errorf("reading what namespace %s inherits: %w", namespace, err))
		}
		for _, r := range items {
			if d := exceptionOf(namespace, s, ex[0].Resource, r, now); !d.allowed {
				return d
			}
		}
	}
	return allow()
}

// exceptionOf judges exception s of inherited item r: never of a locked
// item; within its source's maximum duration, when it sets one.
func exceptionOf(namespace string, s v1alpha1.ExceptionSpec, resource string, r merge.Result, now time.Time) decision {
	item := describeItem(resource, r)
	rules := r.Item.Exceptions
	switch {
	case r.Locked():
		return deny("namespace %s: exception %q: %s is locked: an exception of a locked item is refused, approved or not; its owners can unlock it", namespace, s.Name, item)
	case !rules.NeedsEnd():
		return allow()
	case rules.MaxDuration < 0:
		return deny("namespace %s: exception %q: the source of %s requires an end, but its %s is not a positive duration: no end can be judged; its owners must set one (e.g. \"720h\")",
			namespace, s.Name, item, v1alpha1.AnnotationExceptionMaxDuration)
	case s.ExpiresAt == nil:
		return deny("namespace %s: exception %q: the source of %s requires an end: set expiresAt, at most %s from now (%s)",
			namespace, s.Name, item, rules.MaxDuration, v1alpha1.AnnotationExceptionMaxDuration)
	case s.ExpiresAt.After(now.Add(rules.MaxDuration)):
		return deny("namespace %s: exception %q: expiresAt %s is past the maximum the source %s/%s allows: %s from now (%s), until %s",
			namespace, s.Name, s.ExpiresAt.UTC().Format(time.RFC3339), r.Item.Namespace, r.Item.Name, rules.MaxDuration,
			v1alpha1.AnnotationExceptionMaxDuration, now.Add(rules.MaxDuration).UTC().Format(time.RFC3339))
	}
	return allow()
}
