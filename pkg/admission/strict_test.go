package admission_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// The guards' memory may only make them stricter (DESIGN.md's fourth
// invariant): these tests play a request that one guard admits and another
// refuses, so that its change never lands, then a second request that the
// mirror alone refuses.

// TestRefusedChangeAdmitsNoCycle is issue 24's first hole: b has parent a,
// a and c have parent p. Labeling b with parent c and a stage is admitted by
// the parent guard and refused by the stages guard, so b keeps parent a;
// labeling a with parent b then closes the cycle a -> b -> a, which the
// mirror shows. The assumed b -> c must not hide it.
func TestRefusedChangeAdmitsNoCycle(t *testing.T) {
	t.Parallel()
	m := hierarchyMux(t, []*corev1.Namespace{ns(global, ""), ns("p", ""), ns("a", "p", recorded), ns("c", "p", recorded), ns("b", "a", recorded)},
		roleBinding("p", "p-sec", isLocked))
	g := admission.NewGuards(admission.Config{Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{answers: allowAll(updateNamespace("a"), updateNamespace("b"), updateNamespace("c"))}, Served: served, GlobalNamespaces: []string{global}, Namespaces: namespaceClient("p", "a", "b", "c"), Clock: clocktesting.NewFakePassiveClock(time.Now())})

	staged := ns("b", "c", parentUID(nsUID("c")))
	staged.Labels[v1alpha1.LabelStage] = "x"
	first := request(admissionv1.Update, nsGR, "", "b", ns("b", "a", recorded), staged)
	if resp, _ := review(t, g, webhookconfig.PathParents, first); resp == nil || !resp.Allowed {
		t.Fatalf("the parent guard refused b -> c: %+v", resp)
	}
	if resp, _ := review(t, g, webhookconfig.PathStages, first); resp == nil || resp.Allowed {
		t.Fatalf("the stages guard admitted a stage label alice may not set: %+v", resp)
	}
	t.Log("b -> c was refused by the stages guard: the mirror keeps b -> a")

	second := request(admissionv1.Update, nsGR, "", "a", ns("a", "p", recorded), ns("a", "b", parentUID(nsUID("b"))))
	resp, _ := review(t, g, webhookconfig.PathParents, second)
	if resp == nil || resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "would close the cycle a -> b -> a") {
		t.Fatalf("a -> b answered %+v, want the cycle a -> b -> a refused", resp)
	}
}

// TestSupersededAssumptionIsDropped: once the mirror shows the namespace at
// another version than the one an admitted change replaced, the assumption
// is gone and decisions are the mirror's alone.
func TestSupersededAssumptionIsDropped(t *testing.T) {
	t.Parallel()
	m := hierarchyMux(t, []*corev1.Namespace{ns(global, ""), ns("a", ""), ns("b", "")})
	g := admission.NewGuards(admission.Config{Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{answers: allowAll(updateNamespace("a"), updateNamespace("b"))}, Served: served, GlobalNamespaces: []string{global}, Namespaces: namespaceClient("a", "b"), Clock: clocktesting.NewFakePassiveClock(time.Now())})

	first := request(admissionv1.Update, nsGR, "", "a", ns("a", ""), ns("a", "b", recorded))
	if resp, _ := review(t, g, webhookconfig.PathParents, first); resp == nil || !resp.Allowed {
		t.Fatalf("a -> b refused: %+v", resp)
	}
	second := request(admissionv1.Update, nsGR, "", "b", ns("b", ""), ns("b", "a", recorded))
	if resp, _ := review(t, g, webhookconfig.PathParents, second); resp == nil || resp.Allowed {
		t.Fatalf("b -> a admitted while a -> b is assumed: %+v", resp)
	}
	t.Log("another write of a lands (a team label, no parent): a -> b never happened")
	other := ns("a", "")
	other.Labels["team"] = "x"
	other.Labels[v1alpha1.LabelInherit] = "true"
	m.OnNamespace(other, false)
	second.UID += "-again"
	if resp, _ := review(t, g, webhookconfig.PathParents, second); resp == nil || !resp.Allowed {
		t.Fatalf("b -> a after the mirror showed a at another version: %+v, want allowed", resp)
	}
}

// materializedMux is a synced mux of NetworkPolicies over namespaces.
func materializedMux(namespaces []*corev1.Namespace, sources ...*networkingv1.NetworkPolicy) *watchmux.Mux {
	objs := make([]runtime.Object, 0, len(sources))
	for _, np := range sources {
		objs = append(objs, np)
	}
	return sourcesMux("networkpolicies", namespaces, objs...)
}

var npGR = schema.GroupResource{Group: "networking.k8s.io", Resource: "networkpolicies"}

// TestLockedMaterializedStandIn is issue 24's fifth hole: with
// NetworkPolicies materialized, a namespace created opted out holds an
// allow-all policy named like a locked global one; opting in would make
// the locked item its view's while the real object the CNI enforces stays
// alice's. Nobody may opt it in until the object is gone. Variants: a new
// parent that brings the lock, and the namespace and object created back to
// back before the mirror shows the namespace.
func TestLockedMaterializedStandIn(t *testing.T) {
	t.Parallel()
	update, create := admissionv1.Update, admissionv1.Create
	tests := []struct {
		name       string
		namespaces []*corev1.Namespace
		sources    []*networkingv1.NetworkPolicy
		answers    map[authorizationv1.ResourceAttributes]answer
		path       string
		req        *admissionv1.AdmissionRequest
		want       string // "" : allowed
	}{
		{
			name:       "opting in with an object named like a locked global item",
			namespaces: []*corev1.Namespace{ns(global, ""), ns("mine", "", noInherit)},
			sources:    []*networkingv1.NetworkPolicy{networkPolicy(global, "deny", isLocked), networkPolicy("mine", "deny")},
			path:       webhookconfig.PathParents,
			req:        request(update, nsGR, "", "mine", ns("mine", "", noInherit), ns("mine", "")),
			want:       "networkpolicies.networking.k8s.io implicit-global/deny (objects of that name in mine)",
		},
		{
			name:       "opting in with no such object",
			namespaces: []*corev1.Namespace{ns(global, ""), ns("mine", "", noInherit)},
			sources:    []*networkingv1.NetworkPolicy{networkPolicy(global, "deny", isLocked), networkPolicy("mine", "allow")},
			path:       webhookconfig.PathParents,
			req:        request(update, nsGR, "", "mine", ns("mine", "", noInherit), ns("mine", "")),
		},
		{
			name:       "a new parent that holds the locked item",
			namespaces: []*corev1.Namespace{ns(global, ""), ns("org", ""), ns("mine", "")},
			sources:    []*networkingv1.NetworkPolicy{networkPolicy("org", "deny", isLocked), networkPolicy("mine", "deny")},
			answers:    allowAll(updateNamespace("org")),
			path:       webhookconfig.PathParents,
			req:        request(update, nsGR, "", "mine", ns("mine", ""), ns("mine", "org", parentUID(nsUID("org")))),
			want:       "networkpolicies.networking.k8s.io org/deny (objects of that name in mine)",
		},
		{
			name:       "an object created before the mirror shows its namespace",
			namespaces: []*corev1.Namespace{ns(global, "")},
			sources:    []*networkingv1.NetworkPolicy{networkPolicy(global, "deny", isLocked)},
			path:       webhookconfig.PathShadows,
			req:        request(create, npGR, "fresh", "deny", nil, networkPolicy("fresh", "deny")),
			want:       "would shadow the locked global source implicit-global/deny",
		},
		{
			name:       "an overlay of a locked item of a materialized kind",
			namespaces: []*corev1.Namespace{ns(global, ""), ns("mine", "")},
			sources:    []*networkingv1.NetworkPolicy{networkPolicy(global, "deny", isLocked)},
			path:       webhookconfig.PathShadows,
			req:        request(create, npGR, "mine", "deny", nil, networkPolicy("mine", "deny", annotated(v1alpha1.AnnotationMerge, "overlay"))),
			want:       "would shadow the locked global source implicit-global/deny",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := materializedMux(tc.namespaces, tc.sources...)
			g := admission.NewGuards(admission.Config{Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{answers: tc.answers}, Served: []schema.GroupResource{npGR}, GlobalNamespaces: []string{global}, Materialized: []string{"networkpolicies"}, Namespaces: namespaceClient("org", "mine")})
			resp, _ := review(t, g, tc.path, tc.req)
			if resp == nil {
				t.Fatal("no answer")
			}
			if tc.want == "" {
				if !resp.Allowed {
					t.Fatalf("refused: %+v", resp.Result)
				}
				return
			}
			if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, tc.want) {
				t.Fatalf("answered %v %+v, want a denial with %q", resp.Allowed, resp.Result, tc.want)
			}
		})
	}
}

// TestLockWithOpenCandidate is issue 24's fourth hole: alice's candidate
// rb-next, written when rb was not locked, would outlive the org's lock of
// rb in every namespace its selector matches. Locking a source with an open
// candidate is refused, naming it, even for who may unlock; the candidate
// may be in the mirror or admitted a moment ago, and a lock admitted a
// moment ago counts for the candidate guard before the mirror shows it.
func TestLockWithOpenCandidate(t *testing.T) {
	t.Parallel()
	create, update := admissionv1.Create, admissionv1.Update
	orgAdmin := allowAll(unlock(rolebindings, "org", "rb"))
	nsList := []*corev1.Namespace{ns(global, ""), ns("org", ""), ns("team-a", "org", recorded)}

	t.Run("a candidate in the mirror", func(t *testing.T) {
		t.Parallel()
		m := hierarchyMux(t, nsList, roleBinding("org", "rb"), roleBinding("org", "rb-next", candidateFor("rb", "!"+v1alpha1.LabelStage)))
		g := admission.NewGuards(admission.Config{Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{answers: orgAdmin}, Served: served, GlobalNamespaces: []string{global}})
		req := request(update, rolebindings, "org", "rb", roleBinding("org", "rb"), roleBinding("org", "rb", isLocked))
		resp, _ := review(t, g, webhookconfig.PathLocks, req)
		if resp == nil || resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, `open candidate "rb-next"`) {
			t.Fatalf("locking rb answered %+v, want a denial naming rb-next", resp)
		}
	})
	t.Run("a candidate admitted a moment ago", func(t *testing.T) {
		t.Parallel()
		m := hierarchyMux(t, nsList, roleBinding("org", "rb"))
		g := admission.NewGuards(admission.Config{Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{answers: orgAdmin}, Served: served, GlobalNamespaces: []string{global}})
		cand := request(create, rolebindings, "org", "rb-next", nil, roleBinding("org", "rb-next", candidateFor("rb", "!"+v1alpha1.LabelStage)))
		if resp, _ := review(t, g, webhookconfig.PathCandidates, cand); resp == nil || !resp.Allowed {
			t.Fatalf("the candidate was refused: %+v", resp)
		}
		req := request(update, rolebindings, "org", "rb", roleBinding("org", "rb"), roleBinding("org", "rb", isLocked))
		resp, _ := review(t, g, webhookconfig.PathLocks, req)
		if resp == nil || resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, `open candidate "rb-next"`) {
			t.Fatalf("locking rb answered %+v, want a denial naming rb-next", resp)
		}
	})
	t.Run("a lock admitted a moment ago", func(t *testing.T) {
		t.Parallel()
		m := hierarchyMux(t, nsList, roleBinding("org", "rb"))
		auth := &fakeAuthorizer{answers: orgAdmin}
		g := admission.NewGuards(admission.Config{Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: auth, Served: served, GlobalNamespaces: []string{global}})
		lock := request(update, rolebindings, "org", "rb", roleBinding("org", "rb"), roleBinding("org", "rb", isLocked))
		lock.UserInfo.Username = "org-admin"
		if resp, _ := review(t, g, webhookconfig.PathLocks, lock); resp == nil || !resp.Allowed {
			t.Fatalf("the lock was refused: %+v", resp)
		}
		cand := request(create, rolebindings, "org", "rb-next", nil, roleBinding("org", "rb-next", candidateFor("rb", "!"+v1alpha1.LabelStage)))
		cand.UserInfo.Username = "mallory"
		auth.answers = nil // mallory may not unlock
		resp, _ := review(t, g, webhookconfig.PathCandidates, cand)
		if resp == nil || resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "which is locked") {
			t.Fatalf("the candidate answered %+v, want a denial: rb is locked", resp)
		}
	})
}

// TestFanoutOfCandidateConversion: an ordinary source that becomes a
// candidate leaves every view under its name, and a candidate that becomes
// an ordinary source enters them; both warn of their reach (issue 24, item
// 9). The hierarchy: org with the children team-a and team-b.
func TestFanoutOfCandidateConversion(t *testing.T) {
	t.Parallel()
	update := admissionv1.Update
	nsList := []*corev1.Namespace{ns(global, ""), ns("org", ""), ns("team-a", "org", recorded), ns("team-b", "org", recorded)}
	stage := candidateFor("rb", "!"+v1alpha1.LabelStage)
	tests := []struct {
		name     string
		sources  []*rbacv1.RoleBinding
		old, obj *rbacv1.RoleBinding
		want     string
	}{
		{
			name:    "an ordinary source becomes a candidate",
			sources: []*rbacv1.RoleBinding{roleBinding("org", "rb"), roleBinding("org", "x")},
			old:     roleBinding("org", "x"), obj: roleBinding("org", "x", stage),
			want: admission.Warning(2), // org's two children (its own view is no reach)
		},
		{
			name:    "a candidate becomes an ordinary source",
			sources: []*rbacv1.RoleBinding{roleBinding("org", "rb"), roleBinding("org", "x", stage)},
			old:     roleBinding("org", "x", stage), obj: roleBinding("org", "x"),
			want: admission.Warning(2), // org's two children (its own view is no reach)
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := hierarchyMux(t, nsList, tc.sources...)
			g := admission.NewGuards(admission.Config{Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{}, Served: served, GlobalNamespaces: []string{global}})
			resp, _ := review(t, g, webhookconfig.PathFanout, request(update, rolebindings, "org", "x", tc.old, tc.obj))
			if resp == nil || !resp.Allowed || len(resp.Warnings) != 1 || resp.Warnings[0] != tc.want {
				t.Fatalf("answered %+v, want allowed with the warning %q", resp, tc.want)
			}
		})
	}
}

// TestNamespaceDeletionNeedsUnlock: deleting a namespace others inherit
// from takes its locked sources out of their views, and its children lose
// what its ancestors pass down: that needs unlock on each, as opting out
// does (issue 24, suggested by the first item's direction).
func TestNamespaceDeletionNeedsUnlock(t *testing.T) {
	t.Parallel()
	nsList := []*corev1.Namespace{ns(global, ""), ns("top", ""), ns("org", "top", parentUID(nsUID("top"))), ns("team-a", "org", recorded), ns("solo", "")}
	sources := []*rbacv1.RoleBinding{roleBinding(global, "g-lock", isLocked), roleBinding("top", "t-lock", isLocked), roleBinding("org", "o-lock", isLocked), roleBinding("org", "open")}
	deletion := func(name string) *admissionv1.AdmissionRequest {
		req := request(admissionv1.Delete, nsGR, "", name, ns(name, ""), nil)
		return req
	}
	tests := []struct {
		name    string
		req     *admissionv1.AdmissionRequest
		answers map[authorizationv1.ResourceAttributes]answer
		want    []string // "" : allowed
	}{
		{name: "a leaf", req: deletion("team-a")},
		{name: "a namespace nobody inherits from", req: deletion("solo")},
		{
			name: "a parent, without unlock",
			req:  deletion("org"),
			want: []string{`deleting namespace "org"`, "org/o-lock (in the views of team-a)", "top/t-lock (in the views of team-a)"},
		},
		{
			name:    "a parent, with unlock on what its children lose",
			req:     deletion("org"),
			answers: allowAll(unlockAll(rolebindings, "org"), unlockAll(rolebindings, "top")),
		},
		{
			name: "the global namespace",
			req:  deletion(global),
			want: []string{"implicit-global/g-lock (in the views of org, solo, team-a"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := hierarchyMux(t, nsList, sources...)
			g := admission.NewGuards(admission.Config{Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{answers: tc.answers}, Served: served, GlobalNamespaces: []string{global}})
			resp, _ := review(t, g, webhookconfig.PathNamespaceDeletions, tc.req)
			if resp == nil {
				t.Fatal("no answer")
			}
			if len(tc.want) == 0 {
				if !resp.Allowed {
					t.Fatalf("refused: %+v", resp.Result)
				}
				return
			}
			if resp.Allowed || resp.Result == nil {
				t.Fatalf("allowed, want a denial with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(resp.Result.Message, w) {
					t.Errorf("message %q lacks %q", resp.Result.Message, w)
				}
			}
		})
	}
}

// TestLockOverTenantObjects: a source of a materialized kind can't become a
// locked item of namespaces that hold an object of their own under its name
// (found by internal/invariants): there the object, not the locked item,
// would be what the CNI enforces. Even who may unlock is refused.
func TestLockOverTenantObjects(t *testing.T) {
	t.Parallel()
	nsList := []*corev1.Namespace{ns(global, ""), ns("mine", ""), ns("other", "")}
	m := materializedMux(nsList, networkPolicy("mine", "deny"))
	g := admission.NewGuards(admission.Config{Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{answers: allowAll(unlock(networkpolicies, global, "deny"), unlock(networkpolicies, global, "open"))}, Served: []schema.GroupResource{npGR}, GlobalNamespaces: []string{global}, Materialized: []string{"networkpolicies"}})

	resp, _ := review(t, g, webhookconfig.PathLocks, request(admissionv1.Create, npGR, global, "deny", nil, networkPolicy(global, "deny", isLocked)))
	if resp == nil || resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "hold an object of their own under that name: mine") {
		t.Fatalf("a locked global deny answered %+v, want a denial naming mine", resp)
	}
	resp, _ = review(t, g, webhookconfig.PathLocks, request(admissionv1.Create, npGR, global, "open", nil, networkPolicy(global, "open", isLocked)))
	if resp == nil || !resp.Allowed {
		t.Fatalf("a locked global open (no tenant holds the name) answered %+v, want allowed", resp)
	}
}

// TestPromoteLockedStagedCreation: a candidate that is locked itself (a
// staged creation of a locked source, which needed unlock to write) does not
// stop its promotion, the creation of the locked stable source.
func TestPromoteLockedStagedCreation(t *testing.T) {
	t.Parallel()
	nsList := []*corev1.Namespace{ns(global, ""), ns("org", ""), ns("team-a", "org", recorded)}
	m := hierarchyMux(t, nsList, roleBinding("org", "rb-next", candidateFor("rb", "!"+v1alpha1.LabelStage), isLocked))
	g := admission.NewGuards(admission.Config{Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{answers: allowAll(unlock(rolebindings, "org", "rb"))}, Served: served, GlobalNamespaces: []string{global}})
	resp, _ := review(t, g, webhookconfig.PathLocks, request(admissionv1.Create, rolebindings, "org", "rb", nil, roleBinding("org", "rb", isLocked)))
	if resp == nil || !resp.Allowed {
		t.Fatalf("promoting a locked staged creation answered %+v, want allowed", resp)
	}
}

// TestStageOverAnUnknownNamespace: with NetworkPolicies materialized, org
// holds a locked candidate deny.next for deny (canary namespaces); fresh,
// under p under org, holds its own NetworkPolicy deny, and this replica's
// mirror shows that object but not fresh yet (its namespace informer
// lags). Moving p out of org is admitted by the parents guard and refused
// by another webhook, so p stays under org. Then an org release manager
// (verb stage) stages fresh as a canary: the locked candidate would stand
// in over fresh's own deny, what the CNI enforces there (the third
// invariant). Judged with the assumptions (p moved out) fresh inherits
// nothing from org; judged with the mirror alone, fresh was nothing at
// all. The mirror alone must know fresh as the request found it, as the
// parents guard's bothWays does. Without the refused move (the control)
// the assumptions' way finds it.
func TestStageOverAnUnknownNamespace(t *testing.T) {
	t.Parallel()
	const canary = v1alpha1.LabelStage + "=canary"
	for _, refusedMove := range []bool{false, true} {
		t.Run(fmt.Sprintf("refused move=%t", refusedMove), func(t *testing.T) {
			t.Parallel()
			m := materializedMux([]*corev1.Namespace{ns(global, ""), ns("org", ""), ns("p", "org", recorded)},
				networkPolicy("org", "deny"), networkPolicy("org", "deny.next", candidateFor("deny", canary), isLocked), networkPolicy("fresh", "deny"))
			g := admission.NewGuards(admission.Config{
				Mirror: admission.MirrorOf(whatif.New(m)),
				Authorizer: &fakeAuthorizer{answers: allowAll(
					authorizationv1.ResourceAttributes{Verb: "stage", Resource: "namespaces", Namespace: "fresh", Name: "fresh"})},
				Served: []schema.GroupResource{npGR}, GlobalNamespaces: []string{global}, Materialized: []string{"networkpolicies"},
				Namespaces: namespaceClient(global, "org", "p", "fresh"),
			})
			if refusedMove {
				move := request(admissionv1.Update, nsGR, "", "p", ns("p", "org", recorded), ns("p", ""))
				if resp, _ := review(t, g, webhookconfig.PathParents, move); resp == nil || !resp.Allowed {
					t.Fatalf("moving p out of org was refused: %+v", resp)
				}
			}
			staged := ns("fresh", "p", recorded)
			staged.Labels[v1alpha1.LabelStage] = "canary"
			resp, _ := review(t, g, webhookconfig.PathStages, request(admissionv1.Update, nsGR, "", "fresh", ns("fresh", "p", recorded), staged))
			mustRefuse(t, resp, "org/deny", "staging fresh as a canary was admitted: org's locked deny.next stands in over fresh's own deny")
		})
	}
}

// TestStageUnderARefusedDeletion: with NetworkPolicies materialized, org
// holds a locked candidate deny.next for deny (canary namespaces); p and
// tc are root namespaces, and tc holds its own NetworkPolicy deny. p is
// moved under org, then tc under p: nothing lost, and tc is no canary, so
// nothing stands in. Then p, whose only child is tc, is deleted (tc
// inherits nothing locked through it: nothing lost), a DELETE another
// webhook refuses, so p stays under org and tc under p. An org release
// manager then stages tc as a canary: org's locked deny.next would stand
// in over tc's own deny, what the CNI enforces there (the third
// invariant). Judged with the assumptions p is gone (tc reaches nothing
// through it); with the mirror alone p is not under org yet. The stages
// guard must judge the third way too, with the deletions admitted a
// moment ago taken back (assumedWays), as the parents guard's stand-ins
// are. Without the deletion (the control) the assumptions' way finds it.
func TestStageUnderARefusedDeletion(t *testing.T) {
	t.Parallel()
	for _, deleteP := range []bool{false, true} {
		t.Run(fmt.Sprintf("p deleted=%t", deleteP), func(t *testing.T) {
			t.Parallel()
			m := materializedMux([]*corev1.Namespace{ns(global, ""), ns("org", ""), ns("p", ""), ns("tc", "")},
				networkPolicy("org", "deny"), networkPolicy("org", "deny.next", candidateFor("deny", v1alpha1.LabelStage+"=canary"), isLocked),
				networkPolicy("tc", "deny"))
			g := admission.NewGuards(admission.Config{
				Mirror: admission.MirrorOf(whatif.New(m)),
				Authorizer: &fakeAuthorizer{answers: allowAll(updateNamespace("org"), updateNamespace("p"),
					authorizationv1.ResourceAttributes{Verb: "stage", Resource: "namespaces", Namespace: "tc", Name: "tc"})},
				Served: []schema.GroupResource{npGR}, GlobalNamespaces: []string{global}, Materialized: []string{"networkpolicies"},
				Namespaces: namespaceClient(global, "org", "p", "tc"),
			})
			underOrg := ns("p", "org", parentUID(nsUID("org")))
			if resp, _ := review(t, g, webhookconfig.PathParents, request(admissionv1.Update, nsGR, "", "p", ns("p", ""), underOrg)); resp == nil || !resp.Allowed {
				t.Fatalf("moving p under org was refused: %+v", resp)
			}
			moved := ns("tc", "p", parentUID(nsUID("p")))
			if resp, _ := review(t, g, webhookconfig.PathParents, request(admissionv1.Update, nsGR, "", "tc", ns("tc", ""), moved)); resp == nil || !resp.Allowed {
				t.Fatalf("moving tc under p was refused: %+v", resp)
			}
			if deleteP {
				del := request(admissionv1.Delete, nsGR, "", "p", underOrg, nil)
				if resp, _ := review(t, g, webhookconfig.PathNamespaceDeletions, del); resp == nil || !resp.Allowed {
					t.Fatalf("deleting p was refused: %+v", resp)
				}
			}
			staged := ns("tc", "p", parentUID(nsUID("p")))
			staged.Labels[v1alpha1.LabelStage] = "canary"
			resp, _ := review(t, g, webhookconfig.PathStages, request(admissionv1.Update, nsGR, "", "tc", moved, staged))
			mustRefuse(t, resp, "org/deny", "staging tc as a canary was admitted: org's locked deny.next stands in over tc's own deny")
		})
	}
}
