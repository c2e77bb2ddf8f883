package admission

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// InheritanceIndex is what the shadows guard asks of the mirror (and the
// own-copy and exclusion checks): the item a namespace inherits under a
// name, as the mirror has it or with the guards' admissions assumed, and
// whether an object would overlay it.
type InheritanceIndex interface {
	// Inherited is the item namespace's view would show for name without
	// an object of its own.
	Inherited(resource, namespace, name string) (merge.Result, bool, error)
	// InheritedAssuming is Inherited with assumed applied; a namespace
	// nobody knows yet is taken as a new tenant with no labels.
	InheritedAssuming(resource, namespace, name string, assumed whatif.Assumed, pending whatif.Pending) (merge.Result, bool, error)
	// Overlays reports whether an object with annotations would be merged
	// onto the inherited item as an overlay rather than shadow it.
	Overlays(resource string, inherited merge.Result, annotations map[string]string) bool
}

// Shadows: creating an object whose name would shadow a locked inherited
// item is denied. The inherited item is looked up in the mirror, and again
// with the namespace changes the parent guard admitted applied and a
// namespace nobody knows yet taken as a new tenant (a namespace and an
// object created back to back); either finding a lock is enough.
//
// An overlay may add fields to a locked item, except of a materialized
// kind: there the object itself, not the merged item, would be the real
// object engines read.
func (g *Guards) Shadows(_ context.Context, req *admissionv1.AdmissionRequest) decision {
	s, ok, err := g.source(req)
	if !ok || req.Operation != admissionv1.Create {
		return allow()
	}
	if err != nil {
		return deny("%v", err)
	}
	if copyTouched(s) {
		return allow() // a copy is no source: Materialized guards it
	}
	inh, found, err := g.lockedInherited(s)
	if err != nil {
		return unavailable(err)
	}
	if !found {
		// An object named like a locked item, created a moment ago: until
		// the mirror shows it, the parents and lock guards must know it is
		// there.
		if s.obj != nil && (req.DryRun == nil || !*req.DryRun) {
			g.recent.adopt(recentKey{s.resource, s.namespace, s.name}, s.obj)
		}
		return allow()
	}
	var annotations map[string]string
	if s.obj != nil {
		annotations = s.obj.GetAnnotations()
	}
	if g.mirror.Inheritance.Overlays(s.resource, inh, annotations) && !g.isMaterialized(s.resource) {
		// An overlay may add fields to a locked item: the merge keeps
		// every field a locked layer sets, and the view names what it kept.
		return allow(fmt.Sprintf("implicit.dev: %s overlays the locked %s source %s/%s: the fields it sets stay as they are; the view's %s names what this object can't change",
			s, inh.Scope, inh.Item.Namespace, inh.Item.Name, v1alpha1.AnnotationConflict))
	}
	return deny("%s would shadow the locked %s source %s/%s, which namespace %s inherits: a locked item can't be shadowed from below; its owners can unlock or change it",
		s, inh.Scope, inh.Item.Namespace, inh.Item.Name, s.namespace)
}

// lockedInherited returns the locked item s's namespace inherits under s's
// name, from the mirror or with the parent guard's assumptions applied.
func (g *Guards) lockedInherited(s source) (merge.Result, bool, error) {
	inh, found, err := g.mirror.Inheritance.Inherited(s.resource, s.namespace, s.name)
	if err != nil || found && inh.Locked() {
		return inh, found, err
	}
	assumed, undeleted := g.assumedWays()
	// Both ways: an assumption may only add a lock found, never hide one
	// (a deletion admitted a moment ago may be refused by another webhook:
	// judged with it taken back too, assumedWays).
	// The mirror alone knows nothing of a namespace created a moment ago:
	// there the creation the parents guard admitted is all there is.
	unknown := whatif.Assumed{}
	if a, ok := assumed[s.namespace]; ok {
		if _, inMirror := g.mirror.Namespaces.NamespaceMeta(s.namespace); !inMirror {
			unknown[s.namespace] = a
		}
	}
	for _, a := range []whatif.Assumed{unknown, assumed, undeleted} {
		var pending whatif.Pending
		if a != nil {
			pending = g.recent.pending()
		}
		inh, found, err = g.mirror.Inheritance.InheritedAssuming(s.resource, s.namespace, s.name, a, pending)
		if err != nil {
			return merge.Result{}, false, err
		}
		if found && inh.Locked() {
			return inh, true, nil
		}
	}
	return merge.Result{}, false, nil
}
