package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// Index is what the guards read of the sources: *MuxIndex.
type Index interface {
	// Reach counts the namespaces whose view of resource changes if the
	// source namespace/name becomes obj (nil: deleted).
	Reach(resource, namespace, name string, obj runtime.Object) (int, error)
	// InheritedReach is Reach without the source's own namespace: the
	// namespaces that inherit the source, as every reach is counted.
	InheritedReach(resource, namespace, name string, obj runtime.Object) (int, error)
	// DeletionLosers lists the namespaces whose views hold items of
	// namespace or of its ancestors that deleting namespace takes away.
	DeletionLosers(namespace string) ([]string, error)
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
	// ParentCycleAssuming is the cycle a new parent would close, or nil,
	// with the changes the guards admitted assumed.
	ParentCycleAssuming(namespace, parent string, assumed Assumed) []string
	// LockedLoss lists the locked items that would leave the views of
	// namespace and its subtree if its labels and annotations became next.
	// pending are the source writes admitted a moment ago.
	LockedLossPending(namespace string, next NamespaceMeta, assumed Assumed, pending Pending) ([]LockedItem, error)
	// LockedStandIns lists, for resources, the locked items namespace or
	// its subtree would newly inherit under a name it holds an object of.
	LockedStandIns(namespace string, next NamespaceMeta, assumed Assumed, resources []string, pending Pending) ([]LockedItem, error)
	// ObjectsUnderLock lists the namespaces that would inherit the source
	// namespace/name, locked as obj, while holding an object of that name.
	// holders are namespaces known to hold one that the mirror may not
	// show yet.
	ObjectsUnderLock(resource, namespace, name string, obj *unstructured.Unstructured, holders []string) ([]string, error)
	// LockedUnderLock lists the locked sources of other namespaces that the
	// source namespace/name, locked as obj, would displace.
	LockedUnderLock(resource, namespace, name string, obj *unstructured.Unstructured, pending Pending) ([]LockedItem, error)
	// DeletionLoss lists the locked items that would leave other
	// namespaces' views if namespace were deleted.
	DeletionLoss(namespace string, assumed Assumed) ([]LockedItem, error)
	// NamespaceMeta is the labels and annotations the mirror holds of
	// namespace (found: it holds the namespace).
	NamespaceMeta(namespace string) (meta NamespaceMeta, found bool)
	// InheritedAssuming is Inherited with assumed applied; a namespace
	// nobody knows yet is taken as a new tenant with no labels.
	InheritedAssuming(resource, namespace, name string, assumed Assumed, pending Pending) (merge.Result, bool, error)
	// SourceLocked reports whether the source namespace/name is locked.
	SourceLocked(resource, namespace, name string) (bool, error)
	// Terminating reports whether namespace is being deleted.
	Terminating(namespace string) bool
	// Candidates lists the candidates among namespace's sources of
	// resource, sorted by name.
	Candidates(resource, namespace string) ([]CandidateSource, error)
	// SourceObject is the object of the source namespace/name.
	SourceObject(resource, namespace, name string) (any, bool, error)
	// CandidateReach counts the namespaces that would inherit c's stable
	// name from namespace with the candidate obj standing in for it (of),
	// and those of them whose implicit.dev/stage c's selector matches
	// (reached).
	CandidateReach(resource, namespace string, obj *unstructured.Unstructured, c *merge.Candidate) (reached, of int, err error)
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

	// namespaces looks parents up for their uid (parent.go); trusted are
	// the users whose parent-uid annotations are taken as they are.
	namespaces NamespaceGetter
	trusted    map[string]bool

	// hierarchy serializes the parent guard's decisions and holds the
	// changes it admitted that the index may not show yet (hierarchy.go).
	hierarchy assumptions
	// recent holds the locks and candidates the source guards admitted
	// that the mirror may not show yet (recent.go).
	recent *recent

	// identity is the server's own user, the writer of materialized
	// copies; materialized the view resources delivered as copies
	// (materialized.go). mu guards both.
	identity     string
	materialized map[string]bool
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
	g := &Guards{
		index: index, authz: authz,
		served: map[schema.GroupResource]string{}, globals: map[string]bool{globalNamespace: true},
		trusted:      map[string]bool{},
		materialized: map[string]bool{},
		hierarchy:    assumptions{clock: clock.RealClock{}, ttl: assumeFor, byName: map[string]assumption{}},
		recent:       newRecent(),
	}
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
	// patch is a JSON patch of the object, from a mutating guard.
	patch []byte
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
	// subresource is the request's: for status the objects are the
	// source's, for scale they are autoscaling Scales.
	subresource string
	old, obj    *unstructured.Unstructured // nil when absent
}

// Subresources through which a guarded source changes: status (which the
// view shows) and scale (which writes spec.replicas).
const (
	subresourceStatus = "status"
	subresourceScale  = "scale"
)

// guardedSubresources are the subresources the lock guard sees UPDATEs of.
var guardedSubresources = []string{subresourceStatus, subresourceScale}

// source decodes req's source object; false when req is not of a served
// resource or is of a subresource other than those in subresources.
func (g *Guards) source(req *admissionv1.AdmissionRequest, subresources ...string) (source, bool, error) {
	gr := schema.GroupResource{Group: req.Resource.Group, Resource: req.Resource.Resource}
	g.mu.RLock()
	resource, ok := g.served[gr]
	g.mu.RUnlock()
	if !ok || (req.SubResource != "" && !slices.Contains(subresources, req.SubResource)) {
		return source{}, false, nil
	}
	s := source{gr: gr, resource: resource, namespace: req.Namespace, name: req.Name, subresource: req.SubResource}
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

// locked reports whether the request's source was or will be locked. A
// subresource request is judged by the source as the index has it too: a
// Scale carries none of the source's annotations, and a status update may
// drop them from what it sends.
func (g *Guards) locked(s source) (wasLocked, isLocked bool, err error) {
	if s.subresource == subresourceScale {
		wasLocked, err = g.index.SourceLocked(s.resource, s.namespace, s.name)
		return wasLocked, wasLocked, err
	}
	wasLocked, isLocked = locked(s.old), locked(s.obj)
	if s.subresource != "" && !wasLocked {
		wasLocked, err = g.index.SourceLocked(s.resource, s.namespace, s.name)
	}
	return wasLocked, isLocked, err
}

// Locks: creating, changing or deleting a locked source, locking or
// unlocking one, needs the unlock verb on it.
//
// An UPDATE through the status or scale subresource changes the source as
// an update of the object does (the view shows its status; scale writes
// spec.replicas), so it needs unlock alike.
func (g *Guards) Locks(ctx context.Context, req *admissionv1.AdmissionRequest) decision {
	s, ok, err := g.source(req, guardedSubresources...)
	if !ok || (s.subresource != "" && req.Operation != admissionv1.Update) {
		return allow()
	}
	if err != nil {
		return deny("%v", err)
	}
	switch {
	case materialized(s.obj) || s.obj == nil && materialized(s.old):
		return allow() // a copy is no source: Materialized guards it
	case materialized(s.old):
		// A copy made the writer's own (OwnCopy removed its label): a
		// source from now on, judged as one created as written.
		s.old = nil
	}
	wasLocked, isLocked, err := g.locked(s)
	if err != nil {
		return unavailable(fmt.Errorf("reading whether %s is locked: %w", s, err))
	}
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
		// Who may lock is told why a lock can't be set now.
		if isLocked && !wasLocked && req.Operation != admissionv1.Delete && s.subresource == "" && !candidateTouched(s) {
			if d := g.openCandidate(s); !d.allowed {
				return d
			}
		}
		// A lock newly set, or a locked candidate that stands in for
		// another name than before.
		if isLocked && req.Operation != admissionv1.Delete && s.subresource == "" && (!wasLocked || standsFor(s.old) != standsFor(s.obj)) {
			if d := g.lockOverObjects(s); !d.allowed {
				return d
			}
			if d := g.lockOverLocks(ctx, req, s); !d.allowed {
				return d
			}
		}
		if isLocked && req.Operation != admissionv1.Delete && (req.DryRun == nil || !*req.DryRun) {
			g.recent.lock(recentKey{s.resource, s.namespace, s.name}, s.obj)
		}
		return allow()
	}
	what := "changing it or removing the lock"
	switch {
	case s.subresource != "":
		what = fmt.Sprintf("updating its %s subresource", s.subresource)
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

// lockOverObjects refuses to make a source of a materialized kind a locked
// item of namespaces that hold an object of their own under its name (a
// candidate: under its stable name): there that object, not the locked
// item, would be the real object engines enforce (DESIGN.md's third
// invariant). Nobody may: those objects must go first.
func (g *Guards) lockOverObjects(s source) decision {
	if !g.isMaterialized(s.resource) || s.obj == nil {
		return allow()
	}
	name := s.name
	if c, _ := candidateOf(s.obj); c != nil {
		if c.For == "" || strings.Contains(c.For, "/") {
			return allow() // malformed: the candidates guard refuses it
		}
		name = c.For
	}
	holders, err := g.index.ObjectsUnderLock(s.resource, s.namespace, name, s.obj, g.recent.adopters(s.resource, name))
	if err != nil {
		return unavailable(fmt.Errorf("reading which namespaces hold objects named %s: %w", name, err))
	}
	if len(holders) == 0 {
		return allow()
	}
	return deny("%s would lock %q in namespaces that hold an object of their own under that name: %s. This kind is delivered as real objects (delivery: Materialize), so those objects, not the locked item, would be what is enforced there: delete or rename them first",
		s, name, viewers(holders))
}

// lockOverLocks checks that whoever locks s may unlock the locked sources
// of other namespaces it would displace below it (a namespace's own locked
// item under the same name becomes an overlay of s, and s takes the fields
// both set).
func (g *Guards) lockOverLocks(ctx context.Context, req *admissionv1.AdmissionRequest, s source) decision {
	if s.obj == nil {
		return allow()
	}
	name := standsFor(s.obj)
	if name == "" || strings.Contains(name, "/") {
		return allow()
	}
	var lost []LockedItem
	for _, p := range []Pending{{}, g.recent.pending()} {
		l, err := g.index.LockedUnderLock(s.resource, s.namespace, name, s.obj, p)
		if err != nil {
			return unavailable(fmt.Errorf("reading the locked items %s would displace: %w", s, err))
		}
		lost = unionLocked(lost, l)
	}
	if len(lost) == 0 {
		return allow()
	}
	return g.mayUnlockAll(ctx, req, fmt.Sprintf("locking %s", s), lost, map[lockedKey]bool{})
}

// standsFor is the name u shows under in views: its stable name when it is
// a candidate, its own otherwise ("" for nil).
func standsFor(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	if c, _ := candidateOf(u); c != nil {
		return c.For
	}
	return u.GetName()
}

// openCandidate refuses to lock the source s while it has an open
// candidate that is not locked itself, in the mirror or admitted a moment
// ago: the candidate was written without unlock, when the source was not
// locked, and would stand in for the locked source in its canaries. Whoever
// holds unlock promotes or aborts it first. A locked candidate (a staged
// creation of a locked source, which needed unlock to write) may be
// promoted.
func (g *Guards) openCandidate(s source) decision {
	var open []string
	others, err := g.index.Candidates(s.resource, s.namespace)
	if err != nil {
		return unavailable(fmt.Errorf("reading the candidates of namespace %s: %w", s.namespace, err))
	}
	inMirror := func(name string) bool {
		return slices.ContainsFunc(others, func(o CandidateSource) bool { return o.Name == name && o.For == s.name })
	}
	if c, found := g.recent.observe(recentKey{s.resource, s.namespace, s.name}, inMirror); found && !c.locked && !inMirror(c.name) {
		open = append(open, c.name)
	}
	for _, o := range others {
		if o.For == s.name && !o.Locked && !slices.Contains(open, o.Name) {
			open = append(open, o.Name)
		}
	}
	if len(open) == 0 {
		return allow()
	}
	name := open[0]
	return deny("%s has the open candidate %q: locking a source that has a candidate is refused, as the candidate was written without the lock; promote it (kubectl implicit rollout promote) or abort it (delete %q) first",
		s, name, name)
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
	if g.index.Overlays(s.resource, inh, annotations) && !g.isMaterialized(s.resource) {
		// An overlay may add fields to a locked item: the merge keeps
		// every field a locked layer sets, and the view names what it kept.
		return allow(fmt.Sprintf("implicit.dev: %s overlays the locked %s source %s/%s: the fields it sets stay as they are; the view's %s names what this object can't change",
			s, inh.Scope, inh.Item.Namespace, inh.Item.Name, merge.AnnotationConflict))
	}
	return deny("%s would shadow the locked %s source %s/%s, which namespace %s inherits: a locked item can't be shadowed from below; its owners can unlock or change it",
		s, inh.Scope, inh.Item.Namespace, inh.Item.Name, s.namespace)
}

// lockedInherited returns the locked item s's namespace inherits under s's
// name, from the mirror or with the parent guard's assumptions applied.
func (g *Guards) lockedInherited(s source) (merge.Result, bool, error) {
	inh, found, err := g.index.Inherited(s.resource, s.namespace, s.name)
	if err != nil || found && inh.Locked() {
		return inh, found, err
	}
	g.hierarchy.mu.Lock()
	assumed := g.hierarchy.currentLocked(g.index)
	g.hierarchy.mu.Unlock()
	// Both ways: an assumption may only add a lock found, never hide one.
	// The mirror alone knows nothing of a namespace created a moment ago:
	// there the creation the parents guard admitted is all there is.
	unknown := Assumed{}
	if a, ok := assumed[s.namespace]; ok {
		if _, inMirror := g.index.NamespaceMeta(s.namespace); !inMirror {
			unknown[s.namespace] = a
		}
	}
	for _, a := range []Assumed{unknown, assumed} {
		var pending Pending
		if a != nil {
			pending = g.recent.pending()
		}
		inh, found, err = g.index.InheritedAssuming(s.resource, s.namespace, s.name, a, pending)
		if err != nil {
			return merge.Result{}, false, err
		}
		if found && inh.Locked() {
			return inh, true, nil
		}
	}
	return merge.Result{}, false, nil
}

// Fanout warns of every create, update or delete of an inherited source:
// how many namespaces that inherit it see their view change (its own
// namespace is not counted). Its handler drops the warning of a request
// another guard denies (unlessDenied).
func (g *Guards) Fanout(_ context.Context, req *admissionv1.AdmissionRequest) decision {
	s, ok, err := g.source(req)
	if !ok || err != nil || copyTouched(s) {
		return allow()
	}
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update, admissionv1.Delete:
	default:
		return allow()
	}
	// A candidate never shows under its own name: the candidates guard
	// warns of the namespaces it reaches instead. An ordinary source that
	// becomes a candidate leaves every view under its name, and a candidate
	// that becomes an ordinary source enters them: both warn here.
	oldC, _ := candidateOf(s.old)
	newC, _ := candidateOf(s.obj)
	if oldC != nil && newC != nil || req.Operation == admissionv1.Delete && oldC != nil {
		return allow()
	}
	if !g.isGlobal(s.namespace) && !g.index.HasDescendants(s.namespace) {
		return allow()
	}
	if req.Operation == admissionv1.Create && newC != nil {
		return allow() // the candidates guard warns of its reach
	}
	var next runtime.Object
	if req.Operation != admissionv1.Delete && s.obj != nil && newC == nil {
		next = s.obj
	}
	n, err := g.index.InheritedReach(s.resource, s.namespace, s.name, next)
	if err != nil {
		// A warning is never worth failing a write for.
		return allow()
	}
	if g.isMaterialized(s.resource) {
		return allow(materializedWarning(n))
	}
	return allow(warning(n))
}

// warning is the fan-out warning kubectl prints.
func warning(namespaces int) string {
	return fmt.Sprintf("implicit.dev: this change reaches %d namespaces", namespaces)
}

// materializedWarning is the fan-out warning of a materialized kind's
// source: each namespace whose view changes gets its copy written (applied
// or deleted), one real write each.
func materializedWarning(namespaces int) string {
	return fmt.Sprintf("%s and makes %d real writes (materialized copies, delivery: Materialize)", warning(namespaces), namespaces)
}

// sourceGuards are the guards of source objects that may deny a request
// another one warns of, by path.
func (g *Guards) sourceGuards() map[string]func(context.Context, *admissionv1.AdmissionRequest) decision {
	return map[string]func(context.Context, *admissionv1.AdmissionRequest) decision{
		pathLocks: g.Locks, pathShadows: g.Shadows, pathMaterialized: g.Materialized, pathCandidates: g.Candidates,
	}
}

// unlessDenied drops d's warnings when another guard of this project
// (other than the one at path) denies the request: kube-apiserver prints
// the warnings of every webhook that allowed, even when another denied, and
// a warning that "this change reaches N namespaces" beside a refusal says
// something that does not happen. The others are asked as of a dry run, so
// that they remember nothing of a request they are not answering; one that
// can't decide takes nothing away.
func (g *Guards) unlessDenied(ctx context.Context, req *admissionv1.AdmissionRequest, path string, d decision) decision {
	if !d.allowed || len(d.warnings) == 0 || !g.otherDenies(ctx, req, path) {
		return d
	}
	d.warnings = nil
	return d
}

// otherDenies reports whether a source guard other than the one at path
// denies req.
func (g *Guards) otherDenies(ctx context.Context, req *admissionv1.AdmissionRequest, path string) bool {
	dry := req.DeepCopy()
	dry.DryRun = ptr.To(true)
	for p, guard := range g.sourceGuards() {
		if p == path {
			continue
		}
		if o := guard(ctx, dry); !o.allowed && o.unavailable == nil {
			return true
		}
	}
	return false
}
