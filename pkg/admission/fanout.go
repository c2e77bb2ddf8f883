package admission

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/fleethub"
)

// ReachIndex is what the fan-out guard asks of the mirror: whether others
// inherit from a namespace, and how many views a source's change reaches.
type ReachIndex interface {
	// HasDescendants reports whether a namespace names namespace as parent.
	HasDescendants(namespace string) bool
	// InheritedReach counts the namespaces, other than the source's own,
	// whose view of resource changes if the source namespace/name becomes
	// obj (nil: deleted).
	InheritedReach(resource, namespace, name string, obj runtime.Object) (int, error)
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
	if req.Operation == admissionv1.Update && unchanged(s.old, s.obj) {
		// kube-apiserver writes nothing (kubectl diff of an unchanged file,
		// a patch of {}): no view changes, no copy is written.
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
	if !g.isGlobal(s.namespace) && !g.mirror.Reach.HasDescendants(s.namespace) {
		return allow()
	}
	if req.Operation == admissionv1.Create && newC != nil {
		return allow() // the candidates guard warns of its reach
	}
	var next runtime.Object
	if req.Operation != admissionv1.Delete && s.obj != nil && newC == nil {
		next = s.obj
	}
	n, err := g.mirror.Reach.InheritedReach(s.resource, s.namespace, s.name, next)
	if err != nil {
		// A warning is never worth failing a write for.
		return allow()
	}
	if g.fleet != nil && g.isGlobal(s.namespace) {
		// On a hub (--fleet-hub): the members' namespaces too, by their
		// last reports, summed on their informer's events.
		r := g.fleet.Reach(s.gr.String(), s.name, req.Operation == admissionv1.Delete)
		w := fleetWarning(n, r)
		if g.isMaterialized(s.resource) {
			// The hub's copies; a member writes its own, as it is configured.
			w += fmt.Sprintf(" and makes %d real writes here (materialized copies, delivery: Materialize)", n)
		}
		return allow(w)
	}
	if g.isMaterialized(s.resource) {
		return allow(materializedWarning(n))
	}
	return allow(warning(n))
}

// unchanged reports whether an update leaves the object as it was, as
// kube-apiserver decides it writes nothing: equal but for the
// resourceVersion the request carries (managedFields count: a new manager
// entry is written).
func unchanged(old, obj *unstructured.Unstructured) bool {
	if old == nil || obj == nil {
		return false
	}
	a, b := old.DeepCopy(), obj.DeepCopy()
	a.SetResourceVersion("")
	b.SetResourceVersion("")
	return equality.Semantic.DeepEqual(a.Object, b.Object)
}

// FleetIndex is what the fan-out guard asks of a hub's fleet: the members'
// share of a change to a hub source (resource is "resource.group").
type FleetIndex interface {
	Reach(resource, name string, deletion bool) fleethub.Reach
}

// fleetWarning is the fan-out warning on a hub: the hub's own namespaces
// and the members', in the hub and the members that reported.
func fleetWarning(hub int, r fleethub.Reach) string {
	clusters := "clusters"
	if r.Members == 0 {
		clusters = "cluster"
	}
	w := fmt.Sprintf("implicit.dev: this change reaches %d namespaces in %d %s", hub+r.Namespaces, 1+r.Members, clusters)
	if r.Old > 0 {
		w += fmt.Sprintf(" (%d members' counts older than %s)", r.Old, shortDuration(r.OldAfter))
	}
	if r.Unreported > 0 {
		w += fmt.Sprintf(" (%d members not reported yet)", r.Unreported)
	}
	return w
}

// shortDuration prints d as 2m or 90s rather than 2m0s.
func shortDuration(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
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
		webhookconfig.PathLocks: g.Locks, webhookconfig.PathShadows: g.Shadows, webhookconfig.PathMaterialized: g.Materialized, webhookconfig.PathCandidates: g.Candidates,
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
