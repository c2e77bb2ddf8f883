package admission_test

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestParentTerminating: a namespace whose deletion has begun is no place
// to move a child to (issue 39): its deletion was judged on the subtree it
// had, and what ends it is not judged again. Refused whether the mirror or
// kube-apiserver shows it Terminating, for a new parent label, a namespace
// created under it, opting back in under it, or a parent below it.
func TestParentTerminating(t *testing.T) {
	t.Parallel()
	create, update := admissionv1.Create, admissionv1.Update
	idx := func(terminating ...string) *fakeIndex {
		f := &fakeIndex{
			existing:    map[string]bool{"org": true, "org2": true, "team-a": true},
			terminating: map[string]bool{},
		}
		for _, n := range terminating {
			f.terminating[n] = true
		}
		return f
	}
	below := idx()
	below.goingAway = map[string]string{"org2": "org"}
	tests := []guardCase{
		{
			name:        "a new parent the mirror shows terminating is denied",
			index:       idx("org"),
			answers:     allowAll(updateNamespace("org")),
			req:         request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "org", recorded)),
			wantMessage: []string{`namespace "org" can't be the parent of namespace "team-a": it is being terminated`, v1alpha1.LabelParent},
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace("org")},
		},
		{
			name:            "a new parent kube-apiserver shows terminating is denied before the mirror shows it",
			index:           idx(),
			hostTerminating: []string{"org"},
			answers:         allowAll(updateNamespace("org")),
			req:             request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "org", recorded)),
			wantMessage:     []string{`namespace "org" can't be the parent of namespace "team-a": it is being terminated`},
			wantSAR:         []authorizationv1.ResourceAttributes{updateNamespace("org")},
		},
		{
			name:            "a namespace created under a terminating parent is denied",
			index:           idx(),
			hostTerminating: []string{"org"},
			answers:         allowAll(updateNamespace("org")),
			req:             request(create, nsGR, "", "team-a", nil, ns("team-a", "org", recorded)),
			wantMessage:     []string{"being terminated"},
			wantSAR:         []authorizationv1.ResourceAttributes{updateNamespace("org")},
		},
		{
			name:        "a new parent below a terminating ancestor is denied, naming it",
			index:       below,
			answers:     allowAll(updateNamespace("org2")),
			req:         request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "org2", parentUID(nsUID("org2")))),
			wantMessage: []string{`namespace "org2" can't be the parent of namespace "team-a": its ancestor "org" is being terminated`},
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace("org2")},
		},
		{
			name:            "a new parent below an ancestor kube-apiserver shows terminating is denied before the mirror shows it",
			index:           idx(),
			hostTerminating: []string{"org"},
			hostParents:     map[string]string{"org2": "org"},
			answers:         allowAll(updateNamespace("org2")),
			req:             request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "org2", parentUID(nsUID("org2")))),
			wantMessage:     []string{`namespace "org2" can't be the parent of namespace "team-a": its ancestor "org" is being terminated`},
			wantSAR:         []authorizationv1.ResourceAttributes{updateNamespace("org2")},
		},
		{
			// Whether a namespace is terminating is told only to who may
			// update it, as whether it exists.
			name:            "without update on the terminating parent, the denial says only that",
			index:           idx("org"),
			hostTerminating: []string{"org"},
			req:             request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "org", recorded)),
			wantMessage:     []string{`update namespace "org"`},
			wantNotMessage:  []string{"terminated"},
			wantSAR:         []authorizationv1.ResourceAttributes{updateNamespace("org")},
		},
		{
			name:        "opting back in under a terminating parent is denied",
			index:       idx("org"),
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org", recorded, noInherit), ns("team-a", "org", recorded)),
			wantMessage: []string{`namespace "org" can't be the parent of namespace "team-a": it is being terminated`},
		},
		{
			name:            "opting back in under a parent kube-apiserver shows terminating is denied",
			index:           idx(),
			hostTerminating: []string{"org"},
			req:             request(update, nsGR, "", "team-a", ns("team-a", "org", recorded, noInherit), ns("team-a", "org", recorded)),
			wantMessage:     []string{"being terminated"},
		},
		{
			name:        "opting back in without a parent is allowed while anything terminates",
			index:       idx("org"),
			req:         request(update, nsGR, "", "team-a", ns("team-a", "", noInherit), ns("team-a", "")),
			wantAllowed: true,
		},
		{
			name:        "leaving a terminating parent is judged as any leaving: allowed when it takes no lock",
			index:       idx("org"),
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org", recorded), ns("team-a", "")),
			wantAllowed: true,
		},
		{
			name:        "a terminating namespace may itself take a parent that stays",
			index:       idx("team-a"),
			answers:     allowAll(updateNamespace("org")),
			req:         request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "org", recorded)),
			wantAllowed: true,
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace("org")},
		},
		{
			name:        "another label of a child of a terminating parent is not judged",
			index:       idx("org"),
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org", recorded), ns("team-a", "org", recorded, func(n *corev1.Namespace) { n.Labels["team"] = "a" })),
			wantAllowed: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runGuard(t, webhookconfig.PathParents, tc)
		})
	}
}

// TestParentTerminatingMirror: with the real mirror, a parent whose
// deletion has begun (Terminating), a parent below it, and a namespace
// whose deletion the namespace deletions guard admitted a moment ago (the
// mirror not showing it yet) are each refused as a new parent.
func TestParentTerminatingMirror(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// deleted is first deleted through the namespace deletions guard.
		deleted     string
		parent      string
		wantMessage string
	}{
		{name: "terminating", parent: "p", wantMessage: `namespace "p" can't be the parent of namespace "c": it is being terminated`},
		{name: "below a terminating namespace", parent: "q", wantMessage: `its ancestor "p" is being terminated`},
		{name: "deletion admitted a moment ago", deleted: "r", parent: "r", wantMessage: `namespace "r" can't be the parent of namespace "c": it is being terminated`},
		{name: "a parent that stays", parent: "org"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := hierarchyMux(t, []*corev1.Namespace{
				ns(global, ""), ns("org", ""), ns("p", "org", recorded, deleting), ns("q", "p", parentUID(nsUID("p"))),
				ns("r", "org", recorded), ns("c", ""),
			}, roleBinding("org", "org-sec", isLocked))
			g := admission.NewGuards(admission.Config{Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{answers: allowAll(
				updateNamespace("p"), updateNamespace("q"), updateNamespace("r"), updateNamespace("org"),
				unlockAll(rolebindings, "org"),
			)}, Served: served, GlobalNamespaces: []string{global}, Namespaces: namespaceClient(global, "org", "p", "q", "r", "c")})
			if tc.deleted != "" {
				resp, _ := review(t, g, webhookconfig.PathNamespaceDeletions, request(admissionv1.Delete, nsGR, "", tc.deleted, ns(tc.deleted, "org", recorded), nil))
				if resp == nil || !resp.Allowed {
					t.Fatalf("deleting %s: %+v", tc.deleted, resp)
				}
			}
			resp, _ := review(t, g, webhookconfig.PathParents, request(admissionv1.Update, nsGR, "", "c", ns("c", ""), ns("c", tc.parent, parentUID(nsUID(tc.parent)))))
			if resp == nil {
				t.Fatal("no answer")
			}
			if tc.wantMessage == "" {
				if !resp.Allowed {
					t.Fatalf("refused: %+v", resp.Result)
				}
				return
			}
			if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, tc.wantMessage) {
				t.Fatalf("answered %v %+v, want a denial with %q", resp.Allowed, resp.Result, tc.wantMessage)
			}
		})
	}
}

// TestTerminatingSubtreeGainsNoLock: a namespace whose deletion has begun
// and that others still inherit through can't come to pass down more than
// it did when its deletion was judged. Re-parenting it (or opting it back
// in), or re-parenting a namespace above it, under a parent with a locked
// item gives its children that item only to lose it, unjudged, when the
// deletion ends (as locking a source above it would: lockAboveDeletion).
// A Terminating namespace nobody inherits through may still take a parent.
func TestTerminatingSubtreeGainsNoLock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		old, next   *corev1.Namespace
		wantMessage string
	}{
		{
			name: "a terminating namespace with a child takes a parent",
			old:  ns("p", "", deleting), next: ns("p", "org", recorded, deleting),
			wantMessage: `namespace "p"`,
		},
		{
			name: "a namespace above a terminating one with a child takes a parent",
			old:  ns("x", ""), next: ns("x", "org", recorded),
			wantMessage: `namespace "q"`,
		},
		{
			name: "a terminating namespace with a child opts back in",
			old:  ns("r", "org", recorded, noInherit, deleting), next: ns("r", "org", recorded, deleting),
			wantMessage: `namespace "r"`,
		},
		{
			name: "a terminating leaf takes a parent",
			old:  ns("leaf", "", deleting), next: ns("leaf", "org", recorded, deleting),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := hierarchyMux(t, []*corev1.Namespace{
				ns(global, ""), ns("org", ""),
				ns("p", "", deleting), ns("c", "p", recorded),
				ns("x", ""), ns("q", "x", recorded, deleting), ns("d", "q", recorded),
				ns("r", "org", recorded, noInherit, deleting), ns("e", "r", recorded),
				ns("leaf", "", deleting),
			}, roleBinding("org", "org-sec", isLocked))
			g := admission.NewGuards(admission.Config{
				Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{answers: allowAll(updateNamespace("org"))},
				Served: served, GlobalNamespaces: []string{global},
				Namespaces: hostClient([]string{global, "org", "p", "c", "x", "q", "d", "r", "e", "leaf"}, []string{"p", "q", "r", "leaf"}, map[string]string{"c": "p", "q": "x", "d": "q", "r": "org", "e": "r"}),
			})
			resp, _ := review(t, g, webhookconfig.PathParents, request(admissionv1.Update, nsGR, "", tc.next.Name, tc.old, tc.next))
			if resp == nil {
				t.Fatal("no answer")
			}
			if tc.wantMessage == "" {
				if !resp.Allowed {
					t.Fatalf("refused: %+v", resp.Result)
				}
				return
			}
			if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, tc.wantMessage) || !strings.Contains(resp.Result.Message, "being deleted") {
				t.Fatalf("answered %v %+v, want a denial naming %s being deleted", resp.Allowed, resp.Result, tc.wantMessage)
			}
		})
	}
}
