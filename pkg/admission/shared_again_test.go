package admission_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
)

// interleavedLedger is the shared record as one replica reaches it: before
// its first write, another replica's decision lands (first), so that the
// write conflicts and the decision is made again with the other's taken in.
type interleavedLedger struct {
	*memLedger
	first func()
}

func (l *interleavedLedger) Write(ctx context.Context, version string, rec admission.Record) (string, error) {
	if f := l.first; f != nil {
		l.first = nil
		f()
	}
	return l.memLedger.Write(ctx, version, rec)
}

// TestDecidedAgainWithTheOther: a tenant without unlock moves tc under tp
// through one replica while deleting tp through the other, both decided
// against the same version of the shared record. Each alone is admitted;
// together tc would lose org's locked item when tp goes. The second to
// write conflicts and is decided again with the first taken in: it must be
// refused, whichever it is. Before, a deletion decided again found tp
// already gone in its own memory (its first attempt's assumption) and
// judged the deletion against a subtree without tp: both were admitted
// (TestReplicasTerminatingParent, test/integration, 1 run in 8 under load).
func TestDecidedAgainWithTheOther(t *testing.T) {
	t.Parallel()
	move := request(admissionv1.Update, nsGR, "", "tc", ns("tc", "org", recorded), ns("tc", "tp", parentUID(nsUID("tp"))))
	deletion := request(admissionv1.Delete, nsGR, "", "tp", ns("tp", "org", recorded), nil)
	for _, tc := range []struct {
		name string
		// first lands while second is decided; second is decided again.
		firstPath, secondPath string
		first, second         *admissionv1.AdmissionRequest
	}{
		{name: "the deletion decided again after the move", firstPath: webhookconfig.PathParents, first: move, secondPath: webhookconfig.PathNamespaceDeletions, second: deletion},
		{name: "the move decided again after the deletion", firstPath: webhookconfig.PathNamespaceDeletions, first: deletion, secondPath: webhookconfig.PathParents, second: move},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			shared := &memLedger{}
			replica := func(l admission.Ledger) *admission.Guards {
				m := hierarchyMux(t, []*corev1.Namespace{ns(global, ""), ns("org", ""), ns("tc", "org", recorded), ns("tp", "org", recorded)},
					roleBinding("org", "org-sec", isLocked))
				return admission.NewGuards(admission.Config{
					Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{answers: allowAll(updateNamespace("tp"))},
					Served: served, GlobalNamespaces: []string{global}, Namespaces: namespaceClient(global, "org", "tc", "tp"),
					Ledger: l,
				})
			}
			a := replica(shared)
			bLedger := &interleavedLedger{memLedger: shared}
			b := replica(bLedger)
			// Each replica reads the record once, so that both decide
			// against its first version.
			if _, _, err := shared.Read(t.Context()); err != nil {
				t.Fatal(err)
			}
			var firstResp *admissionv1.AdmissionResponse
			bLedger.first = func() { firstResp, _ = review(t, a, tc.firstPath, tc.first) }
			resp, _ := review(t, b, tc.secondPath, tc.second)
			if firstResp == nil || !firstResp.Allowed {
				t.Fatalf("the first, alone, was refused: %+v", firstResp)
			}
			if shared.conflicts != 1 {
				t.Fatalf("%d conflicts, want 1: the second was not decided again", shared.conflicts)
			}
			if resp == nil {
				t.Fatal("no answer")
			}
			if resp.Allowed {
				t.Fatalf("the second was admitted after the first: tc loses org/org-sec, locked, without unlock")
			}
			t.Logf("the second refused: %s", resp.Result.Message)
		})
	}
}

// byUser answers each user's questions from that user's table.
type byUser map[string]*fakeAuthorizer

func (b byUser) Allowed(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	f, ok := b[user.Username]
	if !ok {
		return false, "", nil
	}
	return f.Allowed(ctx, user, attrs)
}

// TestLockDecidedAgainOverALockBelow: alice may unlock org/rb, not tc/rb;
// bob may unlock tc/rb. Bob locks tc/rb while alice locks org/rb: decided
// in that order, alice's lock is refused (it would displace tc/rb, locked,
// from tc's view: lockOverLocks). Alice's lock decided again after bob's,
// with its own first admission in memory (org/rb admitted locked a moment
// ago), must be refused too. Before, the lock it sets was already in the
// state it was judged from: tc/rb was displaced there already, so nothing
// was lost; the mirror alone, without bob's lock, lost nothing either.
func TestLockDecidedAgainOverALockBelow(t *testing.T) {
	t.Parallel()
	update := admissionv1.Update
	bob := authenticationv1.UserInfo{Username: "bob", Groups: []string{"system:authenticated"}}
	lockOrg := request(update, rolebindings, "org", "rb", roleBinding("org", "rb"), roleBinding("org", "rb", isLocked))
	lockTC := request(update, rolebindings, "tc", "rb", roleBinding("tc", "rb"), roleBinding("tc", "rb", isLocked))
	lockTC.UserInfo = bob
	replica := func(l admission.Ledger) *admission.Guards {
		m := hierarchyMux(t, []*corev1.Namespace{ns(global, ""), ns("org", ""), ns("tc", "org", recorded)},
			roleBinding("org", "rb"), roleBinding("tc", "rb"))
		cfg := admission.Config{
			Mirror: admission.MirrorOf(whatif.New(m)),
			Authorizer: byUser{
				"alice": {answers: allowAll(unlock(rolebindings, "org", "rb"))},
				"bob":   {answers: allowAll(unlock(rolebindings, "tc", "rb"))},
			},
			Served: served, GlobalNamespaces: []string{global},
		}
		if l != nil {
			cfg.Ledger = l
		}
		return admission.NewGuards(cfg)
	}
	mustAllow := func(t *testing.T, g *admission.Guards, req *admissionv1.AdmissionRequest) {
		t.Helper()
		if resp, _ := review(t, g, webhookconfig.PathLocks, req); resp == nil || !resp.Allowed {
			t.Fatalf("%s locking %s/%s, alone, was refused: %+v", req.UserInfo.Username, req.Namespace, req.Name, resp)
		}
	}
	for _, tc := range []struct {
		name string
		// decide makes bob's lock and then alice's, and returns the
		// answer to alice's last.
		decide func(t *testing.T) *admissionv1.AdmissionResponse
	}{
		{name: "bob's lock first, on a fresh replica", decide: func(t *testing.T) *admissionv1.AdmissionResponse {
			g := replica(nil)
			mustAllow(t, g, lockTC)
			resp, _ := review(t, g, webhookconfig.PathLocks, lockOrg)
			return resp
		}},
		{name: "alice's lock sent again on one replica after bob's", decide: func(t *testing.T) *admissionv1.AdmissionResponse {
			g := replica(nil)
			mustAllow(t, g, lockOrg) // refused by another webhook, or its call timed out
			mustAllow(t, g, lockTC)
			resp, _ := review(t, g, webhookconfig.PathLocks, lockOrg)
			return resp
		}},
		{name: "alice's lock decided again after the other replica's", decide: func(t *testing.T) *admissionv1.AdmissionResponse {
			shared := &memLedger{}
			a := replica(shared)
			bLedger := &interleavedLedger{memLedger: shared}
			b := replica(bLedger)
			if _, _, err := shared.Read(t.Context()); err != nil {
				t.Fatal(err)
			}
			bLedger.first = func() { mustAllow(t, a, lockTC) }
			resp, _ := review(t, b, webhookconfig.PathLocks, lockOrg)
			if shared.conflicts != 1 {
				t.Fatalf("%d conflicts, want 1: alice's lock was not decided again", shared.conflicts)
			}
			return resp
		}},
		{name: "alice's lock created, the shadows guard's answer to the same request first", decide: func(t *testing.T) *admissionv1.AdmissionResponse {
			// org/rb does not exist yet: alice creates it locked. The
			// shadows guard, asked too (rb is a locked name), records the
			// object as one of org's own; kube-apiserver calls both at
			// once, so the lock guard may decide second.
			m := hierarchyMux(t, []*corev1.Namespace{ns(global, ""), ns("org", ""), ns("tc", "org", recorded)}, roleBinding("tc", "rb"))
			g := admission.NewGuards(admission.Config{
				Mirror: admission.MirrorOf(whatif.New(m)),
				Authorizer: byUser{
					"alice": {answers: allowAll(unlock(rolebindings, "org", "rb"))},
					"bob":   {answers: allowAll(unlock(rolebindings, "tc", "rb"))},
				},
				Served: served, GlobalNamespaces: []string{global},
			})
			mustAllow(t, g, lockTC)
			createOrg := request(admissionv1.Create, rolebindings, "org", "rb", nil, roleBinding("org", "rb", isLocked))
			if resp, _ := review(t, g, webhookconfig.PathShadows, createOrg); resp == nil || !resp.Allowed {
				t.Fatalf("the shadows guard refused org/rb: %+v", resp)
			}
			resp, _ := review(t, g, webhookconfig.PathLocks, createOrg)
			return resp
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := tc.decide(t)
			mustRefuse(t, resp, "tc/rb", "alice's lock of org/rb was admitted after bob's: tc/rb, locked, leaves tc's view without unlock on it")
		})
	}
}

// TestLockAfterAMoveBelow: alice may update namespaces tc2 and org and
// unlock org/rb, not tc2/rb. She moves tc2, which holds its own locked
// tc2/rb, from org2 under org (org/rb is not locked: tc2/rb stays in tc2's
// view, nothing is lost), then locks org/rb. Judged once the mirror shows
// the move, the lock is refused: it would displace tc2/rb from tc2's view
// (lockOverLocks). Judged a moment after the move, on the replica that
// admitted it or on the other after taking the move in from the shared
// record, it must be refused too. Before, the lock guard asked the mirror
// alone who inherits from org: tc2 was not there yet.
func TestLockAfterAMoveBelow(t *testing.T) {
	t.Parallel()
	lockAfterAMove(t, func(tc2 *corev1.Namespace) admission.Config {
		m := hierarchyMux(t, []*corev1.Namespace{ns(global, ""), ns("org", ""), ns("org2", ""), tc2},
			roleBinding("org", "rb"), roleBinding("tc2", "rb", isLocked))
		return admission.Config{
			Mirror:     admission.MirrorOf(whatif.New(m)),
			Authorizer: &fakeAuthorizer{answers: allowAll(unlock(rolebindings, "org", "rb"), updateNamespace("org"))},
			Served:     served, GlobalNamespaces: []string{global}, Namespaces: namespaceClient(global, "org", "org2", "tc2"),
		}
	}, request(admissionv1.Update, rolebindings, "org", "rb", roleBinding("org", "rb"), roleBinding("org", "rb", isLocked)),
		"tc2/rb", "tc2/rb, locked, leaves tc2's view without unlock on it")
}

// TestLockAfterAMoveOverObjects is TestLockAfterAMoveBelow for a
// materialized kind: tc2 holds its own NetworkPolicy deny; moved under org
// (org/deny not locked: nothing stands in), then org/deny is locked. Once
// the mirror shows the move the lock is refused for everyone (tc2's own
// object, not the locked item, would be what the CNI enforces there:
// lockOverObjects); a moment after the move, on either replica, too.
func TestLockAfterAMoveOverObjects(t *testing.T) {
	t.Parallel()
	lockAfterAMove(t, func(tc2 *corev1.Namespace) admission.Config {
		m := materializedMux([]*corev1.Namespace{ns(global, ""), ns("org", ""), ns("org2", ""), tc2},
			networkPolicy("org", "deny"), networkPolicy("tc2", "deny"))
		return admission.Config{
			Mirror:     admission.MirrorOf(whatif.New(m)),
			Authorizer: &fakeAuthorizer{answers: allowAll(unlock(networkpolicies, "org", "deny"), updateNamespace("org"))},
			Served:     []schema.GroupResource{npGR}, GlobalNamespaces: []string{global}, Materialized: []string{"networkpolicies"},
			Namespaces: namespaceClient(global, "org", "org2", "tc2"),
		}
	}, request(admissionv1.Update, npGR, "org", "deny", networkPolicy("org", "deny"), networkPolicy("org", "deny", isLocked)),
		"under that name: tc2", "tc2's own deny, not the locked item, is what the CNI enforces there")
}

// lockAfterAMove plays lock after tc2 moved from org2 under org, three
// ways: the mirror shows the move; a moment after it, on one replica; and
// decided again after the other replica's move (its write conflicting).
// Guards are cfg's over a mirror holding tc2 as given; each way must refuse
// the lock, naming want (why: what admitting it would break).
func lockAfterAMove(t *testing.T, cfg func(tc2 *corev1.Namespace) admission.Config, lock *admissionv1.AdmissionRequest, want, why string) {
	t.Helper()
	move := request(admissionv1.Update, nsGR, "", "tc2", ns("tc2", "org2", recorded), ns("tc2", "org", parentUID(nsUID("org"))))
	replica := func(l admission.Ledger, moved bool) *admission.Guards {
		tc2 := ns("tc2", "org2", recorded)
		if moved {
			tc2 = ns("tc2", "org", recorded)
		}
		c := cfg(tc2)
		if l != nil {
			c.Ledger = l
		}
		return admission.NewGuards(c)
	}
	mustMove := func(t *testing.T, g *admission.Guards) {
		t.Helper()
		if resp, _ := review(t, g, webhookconfig.PathParents, move); resp == nil || !resp.Allowed {
			t.Fatalf("moving tc2 under org, alone, was refused: %+v", resp)
		}
	}
	for _, tc := range []struct {
		name   string
		decide func(t *testing.T) *admissionv1.AdmissionResponse
	}{
		{name: "the mirror shows the move", decide: func(t *testing.T) *admissionv1.AdmissionResponse {
			resp, _ := review(t, replica(nil, true), webhookconfig.PathLocks, lock)
			return resp
		}},
		{name: "a moment after the move, on one replica", decide: func(t *testing.T) *admissionv1.AdmissionResponse {
			g := replica(nil, false)
			mustMove(t, g)
			resp, _ := review(t, g, webhookconfig.PathLocks, lock)
			return resp
		}},
		{name: "decided again after the other replica's move", decide: func(t *testing.T) *admissionv1.AdmissionResponse {
			shared := &memLedger{}
			a := replica(shared, false)
			bLedger := &interleavedLedger{memLedger: shared}
			b := replica(bLedger, false)
			if _, _, err := shared.Read(t.Context()); err != nil {
				t.Fatal(err)
			}
			bLedger.first = func() { mustMove(t, a) }
			resp, _ := review(t, b, webhookconfig.PathLocks, lock)
			if shared.conflicts != 1 {
				t.Fatalf("%d conflicts, want 1: the lock was not decided again", shared.conflicts)
			}
			return resp
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := tc.decide(t)
			mustRefuse(t, resp, want, fmt.Sprintf("the lock of %s/%s was admitted after the move: %s", lock.Namespace, lock.Name, why))
		})
	}
}

// TestRefusedDeletionHidesAMove: a tenant without unlock moves tc under tp
// (nothing lost: tp is under org too), then deletes tc, which has no
// children (nothing lost); that DELETE is refused by another webhook, so tc
// stays, under tp once the move lands. Then the tenant deletes tp: tc would
// lose org's locked item, so it must be refused. The refused deletion of tc
// may make later decisions only stricter (DESIGN.md's fourth invariant).
func TestRefusedDeletionHidesAMove(t *testing.T) {
	t.Parallel()
	m := hierarchyMux(t, []*corev1.Namespace{ns(global, ""), ns("org", ""), ns("tc", "org", recorded), ns("tp", "org", recorded)},
		roleBinding("org", "org-sec", isLocked))
	g := admission.NewGuards(admission.Config{
		Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{answers: allowAll(updateNamespace("tp"))},
		Served: served, GlobalNamespaces: []string{global}, Namespaces: namespaceClient(global, "org", "tc", "tp"),
	})
	move := request(admissionv1.Update, nsGR, "", "tc", ns("tc", "org", recorded), ns("tc", "tp", parentUID(nsUID("tp"))))
	if resp, _ := review(t, g, webhookconfig.PathParents, move); resp == nil || !resp.Allowed {
		t.Fatalf("the move, alone, was refused: %+v", resp)
	}
	delTC := request(admissionv1.Delete, nsGR, "", "tc", ns("tc", "org", recorded), nil)
	if resp, _ := review(t, g, webhookconfig.PathNamespaceDeletions, delTC); resp == nil || !resp.Allowed {
		t.Fatalf("deleting tc (no children) was refused: %+v", resp)
	}
	delTP := request(admissionv1.Delete, nsGR, "", "tp", ns("tp", "org", recorded), nil)
	resp, _ := review(t, g, webhookconfig.PathNamespaceDeletions, delTP)
	if resp == nil {
		t.Fatal("no answer")
	}
	if resp.Allowed {
		t.Fatal("deleting tp was admitted: tc, moved under it, loses org/org-sec, locked, without unlock")
	}
	t.Logf("refused: %s", resp.Result.Message)
}

// TestRefusedDeletionHidesAMovedChild: a tenant without unlock on tc/x
// moves tc (which holds its own locked RoleBinding x) under another root
// namespace (nothing lost), then deletes tc, which has no children (nothing
// lost); that DELETE is refused by another webhook, so tc stays, under its
// new parent once the move lands. A change after it that takes something
// from tc, moved there, must be judged so: judged with tc assumed gone and
// with the mirror (tc not yet moved), it is judged on nothing. So the
// guards also judge with the deletions taken back, as NamespaceDeletions
// judges its own losses (caeef58). Each case fails without the deletion
// (the control), and must fail with it.
func TestRefusedDeletionHidesAMovedChild(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// to is where tc moves; then, what the tenant sends at path.
		to   string
		path string
		then *admissionv1.AdmissionRequest
		want string
	}{{
		// The parents guard: tp's move under p2, whose locked x
		// displaces tc's own locked x in tc's view.
		name: "a move above it", to: "tp", path: webhookconfig.PathParents,
		then: request(admissionv1.Update, nsGR, "", "tp", ns("tp", ""), ns("tp", "p2", parentUID(nsUID("p2")))),
		want: "tc/x",
	}, {
		// The locks guard: locking tp/x displaces tc's own locked x
		// (it becomes an overlay of tp/x).
		name: "a lock above it", to: "tp", path: webhookconfig.PathLocks,
		then: request(admissionv1.Update, rolebindings, "tp", "x", roleBinding("tp", "x"), roleBinding("tp", "x", isLocked)),
		want: "tc/x",
	}, {
		// The shadows guard: tc's own y under p3's locked y.
		name: "a shadow in it", to: "p3", path: webhookconfig.PathShadows,
		then: request(admissionv1.Create, rolebindings, "tc", "y", nil, roleBinding("tc", "y")),
		want: "p3/y",
	}} {
		for _, deleteTC := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, tc deleted=%t", tc.name, deleteTC), func(t *testing.T) {
				t.Parallel()
				m := hierarchyMux(t, []*corev1.Namespace{ns(global, ""), ns("p2", ""), ns("p3", ""), ns("tc", ""), ns("tp", "")},
					roleBinding("p2", "x", isLocked), roleBinding("p3", "y", isLocked), roleBinding("tc", "x", isLocked), roleBinding("tp", "x"))
				g := admission.NewGuards(admission.Config{
					Mirror: admission.MirrorOf(whatif.New(m)),
					Authorizer: &fakeAuthorizer{answers: allowAll(updateNamespace("tp"), updateNamespace("p2"), updateNamespace("p3"),
						unlock(rolebindings, "tp", "x"), unlockAll(rolebindings, "tp"))},
					Served: served, GlobalNamespaces: []string{global}, Namespaces: namespaceClient(global, "p2", "p3", "tc", "tp"),
				})
				moved := ns("tc", tc.to, parentUID(nsUID(tc.to)))
				move := request(admissionv1.Update, nsGR, "", "tc", ns("tc", ""), moved)
				if resp, _ := review(t, g, webhookconfig.PathParents, move); resp == nil || !resp.Allowed {
					t.Fatalf("the move of tc, alone, was refused: %+v", resp)
				}
				if deleteTC {
					delTC := request(admissionv1.Delete, nsGR, "", "tc", moved, nil)
					if resp, _ := review(t, g, webhookconfig.PathNamespaceDeletions, delTC); resp == nil || !resp.Allowed {
						t.Fatalf("deleting tc (no children) was refused: %+v", resp)
					}
				}
				resp, _ := review(t, g, tc.path, tc.then)
				mustRefuse(t, resp, tc.want, fmt.Sprintf("%s was admitted: tc, moved under %s, loses what the lock %s protects", tc.name, tc.to, tc.want))
			})
		}
	}
}

// TestCycleThroughARefusedDeletion: tc is moved under tp, then deleted (no
// children: nothing lost), a DELETE another webhook refuses, so tc stays
// under tp. Setting tp's parent to tc (opted out: inherit "false", so
// nothing is lost) was judged with tc assumed gone (the walk up from tc
// ends there) and with the mirror alone (tc not yet under tp): admitted,
// and the labels formed the cycle tc -> tp -> tc, which the parents guard
// refuses for everyone (opting tp back in later is not judged for cycles:
// a cycle never exists in the labels it admitted). The new parent's place
// is also judged with the deletions taken back. Without the deletion (the
// control) the assumptions' way finds the cycle.
func TestCycleThroughARefusedDeletion(t *testing.T) {
	t.Parallel()
	for _, deleteTC := range []bool{false, true} {
		t.Run(fmt.Sprintf("tc deleted=%t", deleteTC), func(t *testing.T) {
			t.Parallel()
			m := hierarchyMux(t, []*corev1.Namespace{ns(global, ""), ns("tc", ""), ns("tp", "")})
			g := admission.NewGuards(admission.Config{
				Mirror:     admission.MirrorOf(whatif.New(m)),
				Authorizer: &fakeAuthorizer{answers: allowAll(updateNamespace("tp"), updateNamespace("tc"))},
				Served:     served, GlobalNamespaces: []string{global}, Namespaces: namespaceClient(global, "tc", "tp"),
			})
			moved := ns("tc", "tp", parentUID(nsUID("tp")))
			if resp, _ := review(t, g, webhookconfig.PathParents, request(admissionv1.Update, nsGR, "", "tc", ns("tc", ""), moved)); resp == nil || !resp.Allowed {
				t.Fatalf("the move of tc was refused: %+v", resp)
			}
			if deleteTC {
				if resp, _ := review(t, g, webhookconfig.PathNamespaceDeletions, request(admissionv1.Delete, nsGR, "", "tc", moved, nil)); resp == nil || !resp.Allowed {
					t.Fatalf("deleting tc was refused: %+v", resp)
				}
			}
			resp, _ := review(t, g, webhookconfig.PathParents, request(admissionv1.Update, nsGR, "", "tp", ns("tp", ""), ns("tp", "tc", parentUID(nsUID("tc")), noInherit)))
			mustRefuse(t, resp, "cycle", "tp under tc admitted: tc -> tp -> tc")
		})
	}
}

// TestRefusedMoveHidesALandedMove is open (docs/security.md, "What
// remains"): tc (which holds its own locked x) is moved under tp, under
// org (nothing lost: org/x is not locked), a move that lands; then tp is
// moved out of org, under p2, a move another webhook refuses, so tp stays
// under org and tc under it. A change above org that takes tc/x from tc's
// view (locking org/x, moving org under p3 and its locked x) or puts tc's
// own y under org's locked y is judged with both moves applied (tp no
// longer under org) and with the mirror alone (tc not yet under tp): it is
// judged on nothing, and admitted. (The mover holds unlock on org/y, which
// tp's move out takes; nobody may put an object under a locked name.) The state that came, the first move
// without the second, is neither. Without the refused move (the control)
// each is refused. Run with IMPLICIT_ADMISSION_OPEN=1.
func TestRefusedMoveHidesALandedMove(t *testing.T) {
	t.Parallel()
	if os.Getenv("IMPLICIT_ADMISSION_OPEN") != "1" {
		t.Skip("open: a change refused elsewhere hides one that landed (docs/security.md, What remains); IMPLICIT_ADMISSION_OPEN=1 runs it")
	}
	for _, tc := range []struct {
		name string
		path string
		then *admissionv1.AdmissionRequest
		want string
	}{{
		name: "a lock above it", path: webhookconfig.PathLocks,
		then: request(admissionv1.Update, rolebindings, "org", "x", roleBinding("org", "x"), roleBinding("org", "x", isLocked)),
		want: "tc/x",
	}, {
		name: "a move above it", path: webhookconfig.PathParents,
		then: request(admissionv1.Update, nsGR, "", "org", ns("org", ""), ns("org", "p3", parentUID(nsUID("p3")))),
		want: "tc/x",
	}, {
		name: "a shadow in it", path: webhookconfig.PathShadows,
		then: request(admissionv1.Create, rolebindings, "tc", "y", nil, roleBinding("tc", "y")),
		want: "org/y",
	}} {
		for _, moveTP := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, tp moved=%t", tc.name, moveTP), func(t *testing.T) {
				t.Parallel()
				m := hierarchyMux(t, []*corev1.Namespace{ns(global, ""), ns("org", ""), ns("p2", ""), ns("p3", ""), ns("tp", "org", recorded), ns("tc", "")},
					roleBinding("org", "x"), roleBinding("org", "y", isLocked), roleBinding("p3", "x", isLocked), roleBinding("tc", "x", isLocked))
				g := admission.NewGuards(admission.Config{
					Mirror: admission.MirrorOf(whatif.New(m)),
					Authorizer: &fakeAuthorizer{answers: allowAll(updateNamespace("tp"), updateNamespace("p2"), updateNamespace("p3"), updateNamespace("org"),
						unlock(rolebindings, "org", "x"), unlock(rolebindings, "org", "y"))},
					Served: served, GlobalNamespaces: []string{global}, Namespaces: namespaceClient(global, "org", "p2", "p3", "tc", "tp"),
				})
				moved := ns("tc", "tp", parentUID(nsUID("tp")))
				if resp, _ := review(t, g, webhookconfig.PathParents, request(admissionv1.Update, nsGR, "", "tc", ns("tc", ""), moved)); resp == nil || !resp.Allowed {
					t.Fatalf("the move of tc was refused: %+v", resp)
				}
				if moveTP {
					out := request(admissionv1.Update, nsGR, "", "tp", ns("tp", "org", recorded), ns("tp", "p2", parentUID(nsUID("p2"))))
					if resp, _ := review(t, g, webhookconfig.PathParents, out); resp == nil || !resp.Allowed {
						t.Fatalf("the move of tp was refused: %+v", resp)
					}
				}
				resp, _ := review(t, g, tc.path, tc.then)
				if resp == nil {
					t.Fatal("no answer")
				}
				if resp.Allowed {
					t.Fatalf("%s was admitted: tc, under tp under org, loses what the lock %s protects", tc.name, tc.want)
				}
				if !strings.Contains(resp.Result.Message, tc.want) {
					t.Errorf("the refusal does not name %s: %s", tc.want, resp.Result.Message)
				}
			})
		}
	}
}
