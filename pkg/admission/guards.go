package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// Index is what the guards read of the sources: *watchmux.Mux.
type Index interface {
	// Reach counts the namespaces whose view of resource changes if the
	// source namespace/name becomes obj (nil: deleted).
	Reach(resource, namespace, name string, obj runtime.Object) (int, error)
	// Inherited is the item namespace's view would show for name without an
	// object of its own.
	Inherited(resource, namespace, name string) (merge.Result, bool, error)
	// Overlays reports whether an object with annotations would be merged
	// onto the inherited item as an overlay rather than shadow it.
	Overlays(resource string, inherited merge.Result, annotations map[string]string) bool
	// HasDescendants reports whether a namespace names namespace as parent.
	HasDescendants(namespace string) bool
	// Exists reports whether namespace exists; IsTenant whether it exists
	// and is a tenant.
	Exists(namespace string) bool
	IsTenant(namespace string) bool
	// ParentCycle is the cycle a new parent would close, or nil.
	ParentCycle(namespace, parent string) []string
	// Terminating reports whether namespace is being deleted.
	Terminating(namespace string) bool
}

// Authorizer asks the host cluster whether user may do attrs.
type Authorizer interface {
	Allowed(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, string, error)
}

// UnlockVerb is the custom RBAC verb that allows changing a locked source.
const UnlockVerb = "unlock"

// Guards decide admission requests.
type Guards struct {
	index Index
	authz Authorizer
	// served maps a source group/resource to its view resource name; mu
	// guards it, as kinds are served at run time (Serve).
	mu     sync.RWMutex
	served map[schema.GroupResource]string
	// globals are the namespaces of global sources: the policy's, and those
	// of kinds configured with their own.
	globals map[string]bool
}

// AddGlobalNamespace records the global namespace of a kind configured with
// its own: its sources' changes are inherited ones.
func (g *Guards) AddGlobalNamespace(namespace string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.globals[namespace] = true
}

func (g *Guards) isGlobal(namespace string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.globals[namespace]
}

// Serve guards the sources of gr from now on.
func (g *Guards) Serve(gr schema.GroupResource) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.served[gr] = gr.Resource
}

// NewGuards returns the guards of the served source group/resources.
func NewGuards(index Index, authz Authorizer, served []schema.GroupResource, globalNamespace string) *Guards {
	g := &Guards{index: index, authz: authz, served: map[schema.GroupResource]string{}, globals: map[string]bool{globalNamespace: true}}
	for _, gr := range served {
		g.served[gr] = gr.Resource
	}
	return g
}

// decision is a guard's answer: allowed or a denial, and warnings.
type decision struct {
	allowed  bool
	code     int32
	message  string
	warnings []string
	// unavailable: the guard can't decide yet (answer 503: the webhook's
	// failure policy applies).
	unavailable error
}

func allow(warnings ...string) decision { return decision{allowed: true, warnings: warnings} }

func deny(format string, args ...any) decision {
	return decision{code: http.StatusForbidden, message: fmt.Sprintf(format, args...)}
}

func unavailable(err error) decision { return decision{unavailable: err} }

// source is the object of a request, decoded as far as the guards need.
type source struct {
	gr        schema.GroupResource
	resource  string // the view's resource
	namespace string
	name      string
	old, obj  *unstructured.Unstructured // nil when absent
}

func (g *Guards) source(req *admissionv1.AdmissionRequest) (source, bool, error) {
	gr := schema.GroupResource{Group: req.Resource.Group, Resource: req.Resource.Resource}
	g.mu.RLock()
	resource, ok := g.served[gr]
	g.mu.RUnlock()
	if !ok || req.SubResource != "" {
		return source{}, false, nil
	}
	s := source{gr: gr, resource: resource, namespace: req.Namespace, name: req.Name}
	var err error
	if s.old, err = decode(req.OldObject); err != nil {
		return s, true, fmt.Errorf("decoding the old object: %w", err)
	}
	if s.obj, err = decode(req.Object); err != nil {
		return s, true, fmt.Errorf("decoding the object: %w", err)
	}
	// A deletecollection admits each item with an empty request name.
	switch {
	case s.name != "":
	case s.obj != nil:
		s.name = s.obj.GetName()
	case s.old != nil:
		s.name = s.old.GetName()
	}
	return s, true, nil
}

func decode(raw runtime.RawExtension) (*unstructured.Unstructured, error) {
	if len(raw.Raw) == 0 {
		return nil, nil
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(raw.Raw, &u.Object); err != nil {
		return nil, err
	}
	return u, nil
}

func locked(u *unstructured.Unstructured) bool {
	return u != nil && merge.IsLocked(u.GetAnnotations())
}

func (s source) String() string {
	return fmt.Sprintf("%s %q in namespace %q", s.gr, s.name, s.namespace)
}

// Locks: creating, changing or deleting a locked source, locking or
// unlocking one, needs the unlock verb on it.
func (g *Guards) Locks(ctx context.Context, req *admissionv1.AdmissionRequest) decision {
	s, ok, err := g.source(req)
	if !ok {
		return allow()
	}
	if err != nil {
		return deny("%v", err)
	}
	wasLocked, isLocked := locked(s.old), locked(s.obj)
	if !wasLocked && !isLocked {
		return allow()
	}
	// A locked object goes with its namespace: whoever may delete the
	// namespace may delete what is in it, and the namespace controller,
	// which empties it, must not be stopped by a lock.
	if req.Operation == admissionv1.Delete && g.index.Terminating(s.namespace) {
		return allow()
	}
	allowed, reason, err := g.authz.Allowed(ctx, req.UserInfo, authorizationv1.ResourceAttributes{
		Verb: UnlockVerb, Group: s.gr.Group, Resource: s.gr.Resource, Namespace: s.namespace, Name: s.name,
	})
	if err != nil {
		return unavailable(fmt.Errorf("checking the unlock permission: %w", err))
	}
	if allowed {
		return allow()
	}
	what := "changing it or removing the lock"
	switch {
	case req.Operation == admissionv1.Create:
		what = "creating it locked"
	case req.Operation == admissionv1.Delete:
		what = "deleting it"
	case !wasLocked:
		what = "locking it"
	}
	msg := s.String()
	if wasLocked {
		msg += fmt.Sprintf(" is locked (%s: \"true\")", merge.AnnotationLocked)
	}
	msg += fmt.Sprintf(": %s needs the %q permission on it (RBAC verb %q on %s, resourceNames [%s], in namespace %s)",
		what, UnlockVerb, UnlockVerb, s.gr, s.name, s.namespace)
	if reason != "" {
		msg += ": " + reason
	}
	return deny("%s", msg)
}

// Shadows: creating an object whose name would shadow a locked inherited
// item is denied.
func (g *Guards) Shadows(_ context.Context, req *admissionv1.AdmissionRequest) decision {
	s, ok, err := g.source(req)
	if !ok || req.Operation != admissionv1.Create {
		return allow()
	}
	if err != nil {
		return deny("%v", err)
	}
	inh, found, err := g.index.Inherited(s.resource, s.namespace, s.name)
	if err != nil {
		return unavailable(err)
	}
	if !found || !inh.Locked() {
		return allow()
	}
	var annotations map[string]string
	if s.obj != nil {
		annotations = s.obj.GetAnnotations()
	}
	if g.index.Overlays(s.resource, inh, annotations) {
		// An overlay may add fields to a locked item: the merge keeps
		// every field a locked layer sets, and the view names what it kept.
		return allow(fmt.Sprintf("implicit.dev: %s overlays the locked %s source %s/%s: the fields it sets stay as they are; the view's %s names what this object can't change",
			s, inh.Scope, inh.Item.Namespace, inh.Item.Name, merge.AnnotationConflict))
	}
	return deny("%s would shadow the locked %s source %s/%s, which namespace %s inherits: a locked item can't be shadowed from below; its owners can unlock or change it",
		s, inh.Scope, inh.Item.Namespace, inh.Item.Name, s.namespace)
}

// Fanout warns of every update or delete of an inherited source: how many
// namespaces' views it changes.
func (g *Guards) Fanout(_ context.Context, req *admissionv1.AdmissionRequest) decision {
	s, ok, err := g.source(req)
	if !ok || err != nil || (req.Operation != admissionv1.Update && req.Operation != admissionv1.Delete) {
		return allow()
	}
	if !g.isGlobal(s.namespace) && !g.index.HasDescendants(s.namespace) {
		return allow()
	}
	var next runtime.Object
	if req.Operation == admissionv1.Update && s.obj != nil {
		next = s.obj
	}
	n, err := g.index.Reach(s.resource, s.namespace, s.name, next)
	if err != nil {
		// A warning is never worth failing a write for.
		return allow()
	}
	return allow(Warning(n))
}

// Warning is the fan-out warning kubectl prints.
func Warning(namespaces int) string {
	return fmt.Sprintf("implicit.dev: this change reaches %d namespaces", namespaces)
}

// Parents: setting or changing implicit.dev/parent on a namespace to P needs
// update on P, P must be a tenant, and no cycle may result.
func (g *Guards) Parents(ctx context.Context, req *admissionv1.AdmissionRequest) decision {
	// Labels reach a namespace through its status and finalize
	// subresources too: all three are guarded alike.
	if req.Resource.Group != "" || req.Resource.Resource != "namespaces" ||
		(req.SubResource != "" && req.SubResource != "status" && req.SubResource != "finalize") {
		return allow()
	}
	old, err := decode(req.OldObject)
	if err != nil {
		return deny("decoding the old namespace: %v", err)
	}
	obj, err := decode(req.Object)
	if err != nil || obj == nil {
		return allow()
	}
	name := obj.GetName()
	parent := obj.GetLabels()[merge.LabelParent]
	if parent == "" || (old != nil && old.GetLabels()[merge.LabelParent] == parent) {
		return allow()
	}
	if parent == name {
		return deny("namespace %q can't be its own parent (%s)", name, merge.LabelParent)
	}
	// As kube-apiserver authorizes PUT /api/v1/namespaces/<parent>: with the
	// namespace set, so bindings inside the parent count too.
	allowed, reason, err := g.authz.Allowed(ctx, req.UserInfo, authorizationv1.ResourceAttributes{
		Verb: "update", Resource: "namespaces", Namespace: parent, Name: parent,
	})
	if err != nil {
		return unavailable(fmt.Errorf("checking update on namespace %s: %w", parent, err))
	}
	if !allowed {
		msg := fmt.Sprintf("setting %s: %s on namespace %q needs permission to update namespace %q: a namespace inherits its parent's objects, so only who controls the parent may adopt it", merge.LabelParent, parent, name, parent)
		if reason != "" {
			msg += " (" + reason + ")"
		}
		return deny("%s", msg)
	}
	if g.isGlobal(parent) || g.index.Exists(parent) && !g.index.IsTenant(parent) {
		return deny("namespace %q can't be a parent: it is the global namespace, excluded, or labeled %s: \"false\"", parent, merge.LabelInherit)
	}
	if cycle := g.index.ParentCycle(name, parent); cycle != nil {
		return deny("setting %s: %s on namespace %q would close the cycle %s", merge.LabelParent, parent, name, strings.Join(cycle, " -> "))
	}
	return allow()
}
