package admission_test

import (
	"net/http"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// server is the server's own identity in these tests.
const server = "system:serviceaccount:implicit-system:implicit-apiserver"

func labelled(k, v string) objOpt {
	return func(m *metav1.ObjectMeta) {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[k] = v
	}
}

// copyOf marks a NetworkPolicy as the copy of the global source of its name.
var copyOf = []objOpt{
	labelled(v1alpha1.LabelMaterialized, "true"),
	labelled(v1alpha1.LabelScope, "global"),
	labelled(v1alpha1.LabelSourceNamespace, global),
}

func sourceAttrs(verb string, gr schema.GroupResource, namespace, name string) authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Verb: verb, Group: gr.Group, Resource: gr.Resource, Namespace: namespace, Name: name}
}

func TestMaterialized(t *testing.T) {
	t.Parallel()
	const team = "team-a"
	create, update, del := admissionv1.Create, admissionv1.Update, admissionv1.Delete
	cp := func(opts ...objOpt) []objOpt { return append(append([]objOpt{}, copyOf...), opts...) }
	np := func(opts ...objOpt) *networkingv1.NetworkPolicy { return networkPolicy(team, "deny", opts...) }
	updateSource := sourceAttrs("update", networkpolicies, global, "deny")
	deleteSource := sourceAttrs("delete", networkpolicies, global, "deny")
	unlockSource := unlock(networkpolicies, global, "deny")
	createHere := sourceAttrs("create", networkpolicies, team, "deny")
	asServer := func(r *admissionv1.AdmissionRequest) *admissionv1.AdmissionRequest {
		r.UserInfo.Username = server
		return r
	}
	tests := []guardCase{
		{
			name:        "an object without the label is none of its business",
			identity:    server,
			req:         request(update, networkpolicies, team, "deny", np(), np(annotated("x", "y"))),
			wantAllowed: true,
		},
		{
			name:        "a kind that is not served is none of its business",
			identity:    server,
			req:         request(create, schema.GroupResource{Resource: "configmaps"}, team, "deny", nil, np(cp()...)),
			wantAllowed: true,
		},
		{
			name:        "the server creates a copy",
			identity:    server,
			req:         asServer(request(create, networkpolicies, team, "deny", nil, np(cp()...))),
			wantAllowed: true,
		},
		{
			name:        "the server deletes a copy",
			identity:    server,
			req:         asServer(request(del, networkpolicies, team, "deny", np(cp()...), nil)),
			wantAllowed: true,
		},
		{
			name:       "before the server knows its identity it can't decide",
			req:        asServer(request(create, networkpolicies, team, "deny", nil, np(cp()...))),
			wantStatus: http.StatusServiceUnavailable,
		},
		{
			name:        "a tenant creating an object with the label is denied: it would hide it from views",
			identity:    server,
			req:         request(create, networkpolicies, team, "deny", nil, np(cp()...)),
			wantMessage: []string{"only implicit-apiserver", server, v1alpha1.LabelMaterialized, "hide this object"},
		},
		{
			name:        "a tenant adding the label to its own object is denied",
			identity:    server,
			req:         request(update, networkpolicies, team, "deny", np(), np(cp()...)),
			wantMessage: []string{"only implicit-apiserver", v1alpha1.LabelMaterialized},
		},
		{
			name:         "a write that removes the label makes the copy its writer's own: whoever may create it there may",
			identity:     server,
			answers:      allowAll(createHere),
			req:          request(update, networkpolicies, team, "deny", np(cp()...), np()),
			wantAllowed:  true,
			wantSAR:      []authorizationv1.ResourceAttributes{createHere},
			wantWarnings: []string{`implicit.dev: networkpolicies.networking.k8s.io "deny" in namespace "team-a" was a materialized copy of implicit-global/deny: this write made it the namespace's own (label implicit.dev/materialized removed); it shadows the inherited item here and in the namespaces below, and implicit-apiserver no longer writes it`},
		},
		{
			name:        "making a copy one's own needs create on it",
			identity:    server,
			req:         request(update, networkpolicies, team, "deny", np(cp()...), np()),
			wantMessage: []string{"materialized copy of implicit-global/deny", "make it the namespace's own", `"create" permission`},
			wantSAR:     []authorizationv1.ResourceAttributes{createHere},
		},
		{
			name:        "a locked source's copy can't be made one's own, even with unlock: it would shadow the lock",
			identity:    server,
			index:       &fakeIndex{locked: map[string]bool{"networkpolicies " + global + " deny": true}},
			answers:     allowAll(createHere, unlockSource, unlock(networkpolicies, team, "deny")),
			req:         request(update, networkpolicies, team, "deny", np(cp(isLocked)...), np(isLocked)),
			wantMessage: []string{"materialized copy of the locked global source implicit-global/deny", v1alpha1.AnnotationLocked, "can't be shadowed"},
		},
		{
			name:     "nor the copy of an item the view inherits locked (a stale copy)",
			identity: server,
			index: &fakeIndex{inherited: map[string]merge.Result{"networkpolicies " + team + " deny": {
				Item: merge.Item{Namespace: "org", Name: "deny", Locked: true}, Scope: merge.ScopeParent,
			}}},
			answers:     allowAll(createHere),
			req:         request(update, networkpolicies, team, "deny", np(cp()...), np()),
			wantMessage: []string{"locked parent source org/deny", "can't be shadowed"},
		},
		{
			name:         "a write that makes a copy one's own and locks it needs unlock on it too",
			identity:     server,
			answers:      allowAll(createHere),
			req:          request(update, networkpolicies, team, "deny", np(cp()...), np(isLocked)),
			wantMessage:  []string{`"unlock" permission`, "namespace team-a"},
			wantSAR:      []authorizationv1.ResourceAttributes{createHere, unlock(networkpolicies, team, "deny")},
			wantWarnings: nil,
		},
		{
			name:        "a write that makes a copy one's own can't make it a candidate at once",
			identity:    server,
			answers:     allowAll(createHere),
			req:         request(update, networkpolicies, team, "deny", np(cp()...), np(annotated(v1alpha1.AnnotationCandidateFor, "web"))),
			wantMessage: []string{"can't make it a candidate"},
		},
		{
			name:        "the server removes the label",
			identity:    server,
			req:         asServer(request(update, networkpolicies, team, "deny", np(cp()...), np())),
			wantAllowed: true,
		},
		{
			name:        "a tenant editing a copy is denied, naming the source",
			identity:    server,
			req:         request(update, networkpolicies, team, "deny", np(cp()...), np(cp(annotated("x", "y"))...)),
			wantMessage: []string{"materialized copy", global + "/deny", "change the source instead", `"update" permission on the source`},
			wantSAR:     []authorizationv1.ResourceAttributes{updateSource},
		},
		{
			name:        "a tenant deleting a copy is denied",
			identity:    server,
			req:         request(del, networkpolicies, team, "deny", np(cp()...), nil),
			wantMessage: []string{"materialized copy", `"delete" permission on the source`},
			wantSAR:     []authorizationv1.ResourceAttributes{deleteSource},
		},
		{
			name:         "whoever may change the source may change the copy, warned that it is written back",
			identity:     server,
			answers:      allowAll(updateSource),
			req:          request(update, networkpolicies, team, "deny", np(cp()...), np(cp(annotated("x", "y"))...)),
			wantAllowed:  true,
			wantSAR:      []authorizationv1.ResourceAttributes{updateSource},
			wantWarnings: []string{`implicit.dev: networkpolicies.networking.k8s.io "deny" in namespace "team-a" is a materialized copy of implicit-global/deny: implicit-apiserver writes it back as the view says`},
		},
		{
			name:        "a locked source's copy needs unlock too",
			identity:    server,
			index:       &fakeIndex{locked: map[string]bool{"networkpolicies " + global + " deny": true}},
			answers:     allowAll(deleteSource),
			req:         request(del, networkpolicies, team, "deny", np(cp()...), nil),
			wantMessage: []string{`"unlock" permission on the source`},
			wantSAR:     []authorizationv1.ResourceAttributes{deleteSource, unlockSource},
		},
		{
			name:         "a locked source's copy with delete and unlock",
			identity:     server,
			index:        &fakeIndex{locked: map[string]bool{"networkpolicies " + global + " deny": true}},
			answers:      allowAll(deleteSource, unlockSource),
			req:          request(del, networkpolicies, team, "deny", np(cp()...), nil),
			wantAllowed:  true,
			wantSAR:      []authorizationv1.ResourceAttributes{deleteSource, unlockSource},
			wantWarnings: []string{`implicit.dev: networkpolicies.networking.k8s.io "deny" in namespace "team-a" is a materialized copy of implicit-global/deny: implicit-apiserver writes it back as the view says`},
		},
		{
			name:            "a copy goes with its namespace",
			identity:        server,
			index:           &fakeIndex{terminating: map[string]bool{team: true}},
			hostTerminating: []string{team},
			req:             request(del, networkpolicies, team, "deny", np(cp()...), nil),
			wantAllowed:     true,
		},
		{
			// The mirror lags behind the deletion's start: the namespace
			// controller, acting on its own informers, is not refused.
			name:            "a copy goes with its namespace before the mirror shows it terminating",
			identity:        server,
			hostTerminating: []string{team},
			req:             request(del, networkpolicies, team, "deny", np(cp()...), nil),
			wantAllowed:     true,
		},
		{
			// The mirror lags behind the namespace's deletion and
			// creation again.
			name:        "a copy in a namespace the mirror alone shows terminating is judged",
			identity:    server,
			index:       &fakeIndex{terminating: map[string]bool{team: true}},
			req:         request(del, networkpolicies, team, "deny", np(cp()...), nil),
			wantMessage: []string{`the "delete" permission on the source`},
			wantSAR:     []authorizationv1.ResourceAttributes{{Verb: "delete", Group: "networking.k8s.io", Resource: "networkpolicies", Namespace: global, Name: "deny"}},
		},
		{
			name:        "a copy whose source namespace is unknown is refused",
			identity:    server,
			req:         request(update, networkpolicies, team, "deny", np(labelled(v1alpha1.LabelMaterialized, "true")), np(labelled(v1alpha1.LabelMaterialized, "true"))),
			wantMessage: []string{"materialized copy"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runGuard(t, webhookconfig.PathMaterialized, tc)
		})
	}
}

// TestSourceGuardsLeaveCopiesAlone: a copy is never a source, so the lock,
// shadow and fanout guards let the server write a locked item's copy (which
// carries the lock annotation and shadows the locked item's name) and ask
// nothing.
func TestSourceGuardsLeaveCopiesAlone(t *testing.T) {
	t.Parallel()
	const team = "team-a"
	lockedCopy := append(append([]objOpt{}, copyOf...), isLocked)
	idx := func() *fakeIndex {
		return &fakeIndex{
			inherited:   map[string]merge.Result{"networkpolicies " + team + " deny": {Item: merge.Item{Namespace: global, Name: "deny", Locked: true}, Scope: merge.ScopeGlobal}},
			descendants: map[string]bool{team: true},
			reach:       3,
		}
	}
	for _, tc := range []struct {
		path string
		op   admissionv1.Operation
	}{
		{webhookconfig.PathLocks, admissionv1.Create},
		{webhookconfig.PathLocks, admissionv1.Update},
		{webhookconfig.PathShadows, admissionv1.Create},
		{webhookconfig.PathFanout, admissionv1.Update},
	} {
		t.Run(tc.path+" "+string(tc.op), func(t *testing.T) {
			t.Parallel()
			var old runtime.Object
			if tc.op != admissionv1.Create {
				old = networkPolicy(team, "deny", lockedCopy...)
			}
			req := request(tc.op, networkpolicies, team, "deny", old, networkPolicy(team, "deny", lockedCopy...))
			req.UserInfo.Username = server
			runGuard(t, tc.path, guardCase{identity: server, index: idx(), req: req, wantAllowed: true, check: func(t *testing.T, f *fakeIndex) {
				if len(f.reachCalls) != 0 || len(f.inheritedCalls) != 0 {
					t.Errorf("the guard asked about a copy: reach %v, inherited %v", f.reachCalls, f.inheritedCalls)
				}
			}})
		})
	}
}

// TestMaterializedFanoutWarning: the fan-out warning of a materialized
// kind's source counts its real writes.
func TestMaterializedFanoutWarning(t *testing.T) {
	t.Parallel()
	req := request(admissionv1.Update, networkpolicies, global, "deny", networkPolicy(global, "deny"), networkPolicy(global, "deny", annotated("x", "y")))
	runGuard(t, webhookconfig.PathFanout, guardCase{
		index:        &fakeIndex{reach: 12},
		materialize:  []string{"networkpolicies"},
		req:          req,
		wantAllowed:  true,
		wantWarnings: []string{"implicit.dev: this change reaches 12 namespaces and makes 12 real writes (materialized copies, delivery: Materialize)"},
	})
	reqRB := request(admissionv1.Update, rolebindings, global, "admins", roleBinding(global, "admins"), roleBinding(global, "admins", annotated("x", "y")))
	runGuard(t, webhookconfig.PathFanout, guardCase{
		index:        &fakeIndex{reach: 12},
		materialize:  []string{"networkpolicies"},
		req:          reqRB,
		wantAllowed:  true,
		wantWarnings: []string{admission.Warning(12)},
	})
}

// TestOwnCopy: the mutating guard removes the copy label and the provenance
// from anyone's update of a copy but the server's.
func TestOwnCopy(t *testing.T) {
	t.Parallel()
	const team = "team-a"
	update := admissionv1.Update
	np := func(opts ...objOpt) *networkingv1.NetworkPolicy { return networkPolicy(team, "deny", opts...) }
	provenance := []objOpt{
		labelled(v1alpha1.LabelMaterialized, "true"), labelled(v1alpha1.LabelScope, "global"), labelled(v1alpha1.LabelSourceNamespace, global),
		annotated(v1alpha1.AnnotationSourceUID, "u"), annotated(v1alpha1.AnnotationSourceResourceVersion, "7"),
	}
	withProvenance := func(opts ...objOpt) []objOpt { return append(append([]objOpt{}, provenance...), opts...) }
	asServer := func(r *admissionv1.AdmissionRequest) *admissionv1.AdmissionRequest {
		r.UserInfo.Username = server
		return r
	}
	const removeAll = `[{"op":"remove","path":"/metadata/labels/implicit.dev~1materialized"},` +
		`{"op":"remove","path":"/metadata/labels/implicit.dev~1scope"},` +
		`{"op":"remove","path":"/metadata/labels/implicit.dev~1source-namespace"},` +
		`{"op":"remove","path":"/metadata/annotations/implicit.dev~1source-uid"},` +
		`{"op":"remove","path":"/metadata/annotations/implicit.dev~1source-resource-version"}]`
	for _, tc := range []guardCase{
		{
			name:        "an update of a copy (kubectl apply over it) loses the label and the provenance",
			identity:    server,
			req:         request(update, networkpolicies, team, "deny", np(withProvenance()...), np(withProvenance(annotated("mine", "yes"))...)),
			wantAllowed: true,
			wantPatch:   removeAll,
		},
		{
			name:        "only what is left is removed",
			identity:    server,
			req:         request(update, networkpolicies, team, "deny", np(withProvenance()...), np(labelled(v1alpha1.LabelMaterialized, "true"), labelled("team", "a"))),
			wantAllowed: true,
			wantPatch:   `[{"op":"remove","path":"/metadata/labels/implicit.dev~1materialized"}]`,
		},
		{
			name:        "an update that removed everything itself needs no patch",
			identity:    server,
			req:         request(update, networkpolicies, team, "deny", np(withProvenance()...), np()),
			wantAllowed: true,
		},
		{
			name:        "the server's own writes keep the label",
			identity:    server,
			req:         asServer(request(update, networkpolicies, team, "deny", np(withProvenance()...), np(withProvenance()...))),
			wantAllowed: true,
		},
		{
			name:        "an object that is no copy is left alone",
			identity:    server,
			req:         request(update, networkpolicies, team, "deny", np(labelled(v1alpha1.LabelScope, "x")), np(labelled(v1alpha1.LabelScope, "x"))),
			wantAllowed: true,
		},
		{
			name:        "a label other than \"true\" is no copy",
			identity:    server,
			req:         request(update, networkpolicies, team, "deny", np(labelled(v1alpha1.LabelMaterialized, "false")), np(labelled(v1alpha1.LabelMaterialized, "false"))),
			wantAllowed: true,
		},
		{
			name:        "a kind that is not served is left alone",
			identity:    server,
			req:         request(update, schema.GroupResource{Resource: "configmaps"}, team, "deny", np(withProvenance()...), np(withProvenance()...)),
			wantAllowed: true,
		},
		{
			name:       "before the server knows its identity it can't tell its writes from others'",
			req:        request(update, networkpolicies, team, "deny", np(withProvenance()...), np(withProvenance()...)),
			wantStatus: http.StatusServiceUnavailable,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runGuard(t, webhookconfig.PathOwnCopy, tc)
		})
	}
}
