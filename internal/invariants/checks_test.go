package invariants

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// The invariants, judged on the truth: the views of what etcd holds.
const (
	invLocks        = "locks"
	invGrants       = "grants"
	invMaterialized = "materialized"
	invMemory       = "guard memory"
	// invCopies: an admitted write to a materialized copy is not silently
	// undone (issue 24 item 8's decision).
	invCopies  = "copies"
	invHarness = "harness"
)

// violation is a broken invariant, and the open item of issue 24 it is an
// instance of ("" when it is none of the known ones).
type violation struct {
	invariant, item, message string
}

func (v violation) String() string {
	item := "no known item"
	switch {
	case strings.HasPrefix(v.item, "39/"):
		item = "issue 39 item 1, " + strings.TrimPrefix(v.item, "39/")
	case v.item != "":
		item = "issue 24 item " + v.item
	}
	return fmt.Sprintf("invariant %q broken (%s): %s", v.invariant, item, v.message)
}

func (h *harness) violate(invariant, item, format string, args ...any) {
	h.violations = append(h.violations, violation{invariant: invariant, item: item, message: fmt.Sprintf(format, args...)})
}

// violateState reports a bad state of subject once: a state that stays bad
// is the op that made it so's violation, not every later op's.
func (h *harness) violateState(subject, invariant, item, format string, args ...any) {
	h.badNow[subject] = true
	if h.badBefore[subject] {
		return
	}
	h.violate(invariant, item, format, args...)
}

// lockedLayer is a locked layer of a view item: the winner or an overlay.
type lockedLayer struct {
	viewer, resource, name string
	// src is the source the layer is (for a candidate standing in for its
	// stable source, the stable one); uid its uid.
	src       key
	uid       types.UID
	candidate string
	// object is the layer's own object, view the merged item's.
	object, view any
}

type viewKey struct{ viewer, resource, name string }

// snapshot returns every locked layer of every view of the truth.
func (h *harness) snapshot() map[viewKey][]lockedLayer {
	out := map[viewKey][]lockedLayer{}
	h.readTruth(func(r watchmux.Reader) {
		for _, ns := range r.Namespaces() {
			for _, res := range resources {
				for _, v := range r.Results(res, ns, "") {
					view := viewObject(v)
					for _, it := range append([]merge.Item{v.Item}, v.Overlays...) {
						if !it.Locked {
							continue
						}
						k := viewKey{ns, res, v.Item.Name}
						out[k] = append(out[k], lockedLayer{
							viewer: ns, resource: res, name: v.Item.Name,
							src: key{res, it.Namespace, it.Name}, uid: it.UID, candidate: it.FromCandidate,
							object: it.Object, view: view,
						})
					}
				}
			}
		}
	})
	return out
}

func (h *harness) readTruth(f func(r watchmux.Reader)) {
	if _, err := h.truth.Read(f); err != nil {
		h.violate(invHarness, "", "reading the truth: %v", err)
	}
}

func viewObject(r merge.Result) any {
	if r.Object != nil {
		return r.Object
	}
	return r.Item.Object
}

// content is an object's content without what describes the stored object.
func content(o any) map[string]any {
	ro, ok := o.(runtime.Object)
	if !ok {
		return nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ro)
	if err != nil {
		return nil
	}
	for _, k := range []string{"metadata", "status", "apiVersion", "kind"} {
		delete(m, k)
	}
	return m
}

// project returns of v the fields that shape sets (maps recursively,
// anything else whole).
func project(v, shape map[string]any) map[string]any {
	out := map[string]any{}
	for k, s := range shape {
		x, ok := v[k]
		if !ok {
			continue
		}
		sm, sIsMap := s.(map[string]any)
		xm, xIsMap := x.(map[string]any)
		if sIsMap && xIsMap {
			out[k] = project(xm, sm)
			continue
		}
		out[k] = x
	}
	return out
}

// checkLocks: the admitted op o, by an actor without unlock on a locked
// source, took no locked layer out of a view where it was, nor changed a
// field it set there.
func (h *harness) checkLocks(o op, before map[viewKey][]lockedLayer) {
	after := h.snapshot()
	keys := make([]viewKey, 0, len(before))
	for k := range before {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
	for _, k := range keys {
		if ns, exists := h.w.namespaces[k.viewer]; !exists || ns.DeletionTimestamp != nil {
			continue // a namespace going away has no view to lose anything from
		}
		for _, l := range before[k] {
			if h.oracle.unlocks(o.actor, l.src) {
				continue
			}
			var found *lockedLayer
			for i, a := range after[k] {
				if a.src == l.src && a.uid == l.uid {
					found = &after[k][i]
					break
				}
			}
			if found == nil && l.candidate != "" && !h.sourceLocked(l.src) {
				// A locked candidate of a source that is not locked (or
				// of none: a staged creation) locks the version it
				// stages: a namespace that sees the stable version (or
				// none) instead, by a stage change, loses nothing locked.
				continue
			}
			if found == nil {
				item := h.lockItem(o, k.viewer, l.src)
				if _, exists := h.w.objs[l.src]; item == "" && exists && l.src.namespace == k.viewer {
					// not in issue 24's list: the viewer's own locked
					// object is displaced by a locked item it now inherits
					item = "new/local-lock-displaced"
				}
				h.violate(invLocks, item, "the locked %s (uid %s) left the view of namespace %s (item %s), though %s may not unlock it",
					l.src, l.uid, k.viewer, k.name, o.actor)
				continue
			}
			if l.candidate != "" || found.candidate != "" {
				continue // which approved version a namespace sees: checkApproved
			}
			if l.view == found.view {
				continue // the same object: nothing changed
			}
			fields := content(l.object)
			if b, a := project(content(l.view), fields), project(content(found.view), fields); !reflect.DeepEqual(b, a) {
				h.violate(invLocks, h.lockItem(o, k.viewer, l.src), "the fields the locked %s sets changed in the view of namespace %s, though %s may not unlock it: %v -> %v",
					l.src, k.viewer, o.actor, b, a)
			}
		}
	}
}

// sourceLocked reports whether the source k is locked in the world.
func (h *harness) sourceLocked(k key) bool {
	st, ok := h.w.objs[k]
	return ok && merge.IsLocked(metaOf(st.obj).GetAnnotations())
}

// lockItem names the open item a lock violation in viewer's view is an
// instance of.
func (h *harness) lockItem(o op, viewer string, src key) string {
	cycle := false
	h.readTruth(func(r watchmux.Reader) {
		l := r.Lineage(viewer)
		cycle = l.Problem != nil && l.Problem.Reason == merge.ProblemCycle
	})
	switch {
	case cycle || h.memoryBroken:
		// the guards admitted it on an assumption left by a refused
		// request (or closed a cycle that way)
		return "1"
	case (o.kind == opNSFinish || o.kind == opNSContent) && h.finishing != nil && !h.finishing.subtree[viewer]:
		// issue 39: the viewer came below a namespace whose deletion had
		// begun, which then took what came through it, unjudged
		return "39/terminating-parent"
	case (o.kind == opNSFinish || o.kind == opNSContent) && h.finishing != nil && !h.finishing.locked[viewedLayer{viewer, src}]:
		// the item was locked (or came) after the deletion began, by
		// someone who may unlock it: docs/security.md, "Held in
		// Terminating"
		return "39/locked-after-deletion-began"
	case o.kind == opNSFinish || o.kind == opNSContent:
		// the end of a deletion judged at its first DELETE (or not sent to
		// the guard: ConditionSync's interval), as a deletion at once
		return "new/ns-delete-middle"
	case o.kind == opNSDelete && src.namespace == o.name:
		// "deleting a namespace that holds locked sources inherited
		// elsewhere needs unlock on them"
		return "1/ns-delete"
	case o.kind == opNSDelete:
		// not in issue 24's list: a namespace between the source and the
		// viewer is deleted, and the viewer's parent is gone
		return "new/ns-delete-middle"
	}
	return ""
}

// checkApproved: a candidate that stands in for a locked source in some
// view was written by someone who may unlock that source (or, staging a
// source that is not locked, the locked candidate itself).
func (h *harness) checkApproved() {
	seen := map[key]bool{}
	h.readTruth(func(r watchmux.Reader) {
		for _, ns := range r.Namespaces() {
			for _, res := range resources {
				for _, v := range r.Results(res, ns, "") {
					for _, it := range append([]merge.Item{v.Item}, v.Overlays...) {
						if it.FromCandidate == "" || !it.Locked {
							continue
						}
						c := key{res, it.Namespace, it.FromCandidate}
						if seen[c] {
							continue
						}
						seen[c] = true
						st, ok := h.w.objs[c]
						if !ok {
							continue
						}
						stable := key{res, it.Namespace, it.Name}
						stableLocked := false
						if s, ok := r.Source(res, it.Namespace, it.Name); ok {
							stableLocked = s.Locked
						}
						if h.oracle.unlocks(st.writer, stable) || !stableLocked && h.oracle.unlocks(st.writer, c) {
							continue
						}
						item := "4"
						if st.stableLocked {
							// not in issue 24's list: the stable source was
							// locked already, but the candidates guard read
							// a mirror that did not show the lock yet
							item = "new/candidate-of-lock-not-yet-mirrored"
						}
						h.violateState("approved "+c.String(), invLocks, item, "the candidate %s, last written by %s who may not unlock %s, stands in for the locked %s in the view of namespace %s",
							c, st.writer, stable, stable, ns)
					}
				}
			}
		}
	})
}

// materialize plays the materializer, simply: in every tenant namespace it
// writes a copy of each inherited item where no object holds its name,
// rewrites copies that differ, and deletes copies whose item left the view;
// a tenant's object under the name stays the tenant's. A copy it rewrites
// or deletes that someone else wrote last is an admitted write silently
// undone.
func (h *harness) materialize() {
	type want struct {
		spec          networkingv1.NetworkPolicySpec
		scope, source string
	}
	wants := map[string]map[string]want{}
	h.readTruth(func(r watchmux.Reader) {
		for _, ns := range r.Namespaces() {
			if r.Terminating(ns) {
				continue
			}
			wants[ns] = map[string]want{}
			for _, v := range r.Results(netpols, ns, "") {
				if v.Item.Namespace == ns {
					continue
				}
				np, ok := viewObject(v).(*networkingv1.NetworkPolicy)
				if !ok {
					continue
				}
				wants[ns][v.Item.Name] = want{spec: *np.Spec.DeepCopy(), scope: string(v.Scope), source: v.Item.Namespace}
			}
		}
	})
	for _, k := range h.w.keys(netpols) {
		st := h.w.objs[k]
		ws, live := wants[k.namespace]
		if !isCopy(st.obj) || !live {
			continue
		}
		if _, ok := ws[k.name]; ok {
			continue
		}
		if st.writer != server {
			h.violate(invCopies, "8", "the materializer deleted the copy %s that %s wrote last: an admitted write silently undone", k, st.writer)
		}
		h.store(server, st.obj, nil)
	}
	for _, ns := range h.w.namespaceNames() {
		ws := wants[ns]
		names := make([]string, 0, len(ws))
		for n := range ws {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, name := range names {
			w := ws[name]
			k := key{netpols, ns, name}
			c := &networkingv1.NetworkPolicy{
				TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
					v1alpha1.LabelMaterialized: "true", v1alpha1.LabelScope: w.scope, v1alpha1.LabelSourceNamespace: w.source,
				}},
				Spec: w.spec,
			}
			st, ok := h.w.objs[k]
			switch {
			case !ok:
				h.store(server, nil, c)
			case !isCopy(st.obj):
				// the tenant's own object holds the name: a conflict
			default:
				cur := st.obj.(*networkingv1.NetworkPolicy)
				if reflect.DeepEqual(cur.Spec, c.Spec) && reflect.DeepEqual(cur.Labels, c.Labels) {
					continue
				}
				if st.writer != server {
					h.violate(invCopies, "8", "the materializer rewrote the copy %s that %s wrote last: an admitted write silently undone", k, st.writer)
				}
				h.store(server, st.obj, c)
			}
		}
	}
}

// lockedFromAbove reports whether a layer of v from another namespace than
// viewer is locked: the item is a locked inherited one.
func lockedFromAbove(v merge.Result, viewer string) bool {
	for _, it := range append([]merge.Item{v.Item}, v.Overlays...) {
		if it.Locked && it.Namespace != viewer {
			return true
		}
	}
	return false
}

// checkMaterialized: in every tenant namespace, the real object under a
// locked inherited name is the view's item (its copy).
func (h *harness) checkMaterialized() {
	h.readTruth(func(r watchmux.Reader) {
		for _, ns := range r.Namespaces() {
			if r.Terminating(ns) || !r.Lineage(ns).Tenant {
				continue
			}
			for _, v := range r.Results(netpols, ns, "") {
				if v.Item.Namespace == ns || !lockedFromAbove(v, ns) {
					continue
				}
				k := key{netpols, ns, v.Item.Name}
				st, ok := h.w.objs[k]
				if !ok {
					h.violateState("materialized "+k.String(), invMaterialized, "", "no object %s for the locked inherited item from %s", k, v.Item.Namespace)
					continue
				}
				if isCopy(st.obj) {
					continue
				}
				item := "5"
				if h.current.kind != opNSCreate && h.current.kind != opNSUpdate && (key{h.current.resource, h.current.namespace, h.current.name} != k) {
					// not in issue 24's list: the tenant's object was there
					// before a source elsewhere became the locked item
					item = "new/lock-over-existing"
				}
				h.violateState("materialized "+k.String()+" "+v.Item.Namespace, invMaterialized, item, "the real object %s is %s's own (no %s), while the view shows the locked %s from %s: what the CNI enforces is not the view",
					k, st.writer, v1alpha1.LabelMaterialized, v.Scope, v.Item.Namespace)
			}
		}
	})
}

// checkMemory: what the guards admit, guards without memory over the same
// mirror admit too; and once every assumption has expired and the mirror
// shows every write, both decide alike.
func (h *harness) checkMemory(ws []webhook, sentTo []int, req *admissionv1.AdmissionRequest, allowed bool) {
	quiet := h.caughtUp() && h.clock.Now().Sub(h.lastRemembered) > assumeFor
	if !allowed && !quiet {
		return
	}
	// Each webhook asked again of guards without memory over the mirror of
	// the replica that answered it.
	var memoryless [replicas]*admission.Guards
	at := make([]*admission.Guards, len(ws))
	for i, r := range sentTo {
		if memoryless[r] == nil {
			memoryless[r] = h.newGuards(h.replicas[r].mirror)
		}
		at[i] = memoryless[r]
	}
	fresh := ask(at, ws, req)
	switch {
	case allowed && !allAllowed(fresh):
		h.memoryBroken = true
		h.violate(invMemory, "1", "admitted, but guards without memory over the same mirror refuse it: %v", fresh)
	case !allowed && quiet && allAllowed(fresh):
		h.violate(invMemory, "", "refused %s after every assumption expired, but guards without memory admit it", req.Operation)
	}
}
