package admission_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

var nsGR = schema.GroupResource{Resource: "namespaces"}

// checkPatch fails the test unless resp carries the JSON patch want ("":
// none).
func checkPatch(t *testing.T, resp *admissionv1.AdmissionResponse, want string) {
	t.Helper()
	if want == "" {
		if resp.Patch != nil || resp.PatchType != nil {
			t.Errorf("patch %s (%v), want none", resp.Patch, resp.PatchType)
		}
		return
	}
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Errorf("patch type %v, want JSONPatch", resp.PatchType)
	}
	var got, exp any
	if err := json.Unmarshal(resp.Patch, &got); err != nil {
		t.Fatalf("patch %q: %v", resp.Patch, err)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatalf("want %q: %v", want, err)
	}
	if !reflect.DeepEqual(got, exp) {
		t.Errorf("patch %s, want %s", resp.Patch, want)
	}
}

// unlockAll is the question the parent guard asks first for the locked
// items of one source namespace and resource: unlock on all of them.
func unlockAll(gr schema.GroupResource, namespace string) authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Verb: admission.UnlockVerb, Group: gr.Group, Resource: gr.Resource, Namespace: namespace}
}

func TestParentUID(t *testing.T) {
	t.Parallel()
	create, update := admissionv1.Create, admissionv1.Update
	key := "/metadata/annotations/implicit.dev~1parent-uid"
	set := func(uid string) string { return fmt.Sprintf(`[{"op":"add","path":%q,"value":%q}]`, key, uid) }
	remove := fmt.Sprintf(`[{"op":"remove","path":%q}]`, key)
	other := func(n *corev1.Namespace) { n.Annotations = map[string]string{"other": "x"} }
	subresource := func(r *admissionv1.AdmissionRequest, sub string) *admissionv1.AdmissionRequest {
		r.SubResource = sub
		return r
	}
	tests := []guardCase{
		{
			name:        "a parent label on create records the parent's uid",
			req:         request(create, nsGR, "", "team-a", nil, ns("team-a", "org")),
			wantAllowed: true,
			wantPatch:   `[{"op":"add","path":"/metadata/annotations","value":{"implicit.dev/parent-uid":"ns-org"}}]`,
		},
		{
			name:        "a parent label set on update records the parent's uid beside other annotations",
			req:         request(update, nsGR, "", "team-a", ns("team-a", "", other), ns("team-a", "org", other)),
			wantAllowed: true,
			wantPatch:   set(string(nsUID("org"))),
		},
		{
			name:        "a changed parent records the new parent's uid over the old one",
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org", recorded), ns("team-a", "org2", parentUID(nsUID("org")))),
			wantAllowed: true,
			wantPatch:   set(string(nsUID("org2"))),
		},
		{
			name:        "a uid written with a new label is replaced by the parent's",
			req:         request(create, nsGR, "", "team-a", nil, ns("team-a", "org", parentUID("ns-squatter"))),
			wantAllowed: true,
			wantPatch:   set(string(nsUID("org"))),
		},
		{
			name:        "the parent's uid already written is left alone",
			req:         request(create, nsGR, "", "team-a", nil, ns("team-a", "org", recorded)),
			wantAllowed: true,
		},
		{
			// The recorded parent was deleted and another took its name:
			// writing the new one's uid would adopt it without the parent
			// guard's update check.
			name:        "a uid changed while the label stays is restored",
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org", parentUID("uid-old-org")), ns("team-a", "org", recorded)),
			wantAllowed: true,
			wantPatch:   set("uid-old-org"),
		},
		{
			name:        "a uid added while the label stays is removed",
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org"), ns("team-a", "org", recorded)),
			wantAllowed: true,
			wantPatch:   remove,
		},
		{
			name:        "a uid removed while the label stays is restored",
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org", recorded), ns("team-a", "org")),
			wantAllowed: true,
			wantPatch:   `[{"op":"add","path":"/metadata/annotations","value":{"implicit.dev/parent-uid":"ns-org"}}]`,
		},
		{
			name:        "a trusted user's uid is kept while the label stays",
			trusted:     []string{alice.Username},
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org"), ns("team-a", "org", recorded)),
			wantAllowed: true,
		},
		{
			name:        "a trusted user's uid with a new label is the parent's all the same",
			trusted:     []string{alice.Username},
			req:         request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "org", parentUID("x"))),
			wantAllowed: true,
			wantPatch:   set(string(nsUID("org"))),
		},
		{
			name:        "the uid goes with the label",
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org", recorded), ns("team-a", "", recorded)),
			wantAllowed: true,
			wantPatch:   remove,
		},
		{
			name:        "a uid without a label is removed",
			req:         request(create, nsGR, "", "team-a", nil, ns("team-a", "", parentUID("ns-org"))),
			wantAllowed: true,
			wantPatch:   remove,
		},
		{
			name:        "a parent that does not exist gets no uid (the parent guard refuses it)",
			req:         request(create, nsGR, "", "team-a", nil, ns("team-a", "ghost", parentUID("ns-ghost"))),
			wantAllowed: true,
			wantPatch:   remove,
		},
		{
			name:        "a parent set through namespaces/status is recorded too",
			req:         subresource(request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "org")), "status"),
			wantAllowed: true,
			wantPatch:   `[{"op":"add","path":"/metadata/annotations","value":{"implicit.dev/parent-uid":"ns-org"}}]`,
		},
		{
			name:        "another namespace subresource is left alone",
			req:         subresource(request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "org")), "other"),
			wantAllowed: true,
		},
		{
			name:        "another resource is left alone",
			req:         request(create, rolebindings, "team-a", "admins", nil, roleBinding("team-a", "admins")),
			wantAllowed: true,
		},
		{
			name:       "without a client to read parents, 503",
			noHost:     true,
			req:        request(create, nsGR, "", "team-a", nil, ns("team-a", "org")),
			wantStatus: http.StatusServiceUnavailable,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runGuard(t, webhookconfig.PathParentUID, tc)
		})
	}
}

func TestParentsHierarchy(t *testing.T) {
	t.Parallel()
	create, update := admissionv1.Create, admissionv1.Update
	sec := whatif.LockedItem{Resource: "rolebindings", Namespace: global, Name: "sec", Viewers: []string{"team-a", "team-a-1"}}
	deny := whatif.LockedItem{Resource: "networkpolicies", Namespace: "org", Name: "deny-all", Viewers: []string{"team-a"}}
	losing := func(items ...whatif.LockedItem) *fakeIndex {
		return &fakeIndex{
			existing: map[string]bool{"org": true, "org2": true, "team-a": true},
			lost:     map[string][]whatif.LockedItem{"team-a": items},
		}
	}
	many := make([]whatif.LockedItem, 12)
	for i := range many {
		many[i] = whatif.LockedItem{Resource: "rolebindings", Namespace: global, Name: fmt.Sprintf("rb-%02d", i), Viewers: []string{"team-a"}}
	}
	var manySAR []authorizationv1.ResourceAttributes
	manySAR = append(manySAR, unlockAll(rolebindings, global))
	for _, it := range many {
		manySAR = append(manySAR, unlock(rolebindings, global, it.Name))
	}
	tests := []guardCase{
		// implicit.dev/parent-uid
		{
			name:        "a new parent without its uid is denied",
			answers:     allowAll(updateNamespace("org")),
			req:         request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "org")),
			wantMessage: []string{v1alpha1.AnnotationParentUID, `"ns-org"`, webhookconfig.WebhookParentUID},
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace("org")},
		},
		{
			name:        "a new parent with another namespace's uid is denied",
			answers:     allowAll(updateNamespace("org")),
			req:         request(create, nsGR, "", "team-a", nil, ns("team-a", "org", parentUID("ns-org2"))),
			wantMessage: []string{v1alpha1.AnnotationParentUID, `"ns-org"`},
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace("org")},
		},
		{
			name:        "a new parent with its uid is allowed",
			answers:     allowAll(updateNamespace("org")),
			req:         request(create, nsGR, "", "team-a", nil, ns("team-a", "org", recorded)),
			wantAllowed: true,
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace("org")},
		},
		{
			name:        "changing the uid while the label stays is denied",
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org", parentUID("uid-old-org")), ns("team-a", "org", recorded)),
			wantMessage: []string{v1alpha1.AnnotationParentUID, "can't be changed", "set the label again"},
		},
		{
			name:        "recording a uid on a namespace labelled before is denied",
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org"), ns("team-a", "org", recorded)),
			wantMessage: []string{v1alpha1.AnnotationParentUID, "can't be changed"},
		},
		{
			name:        "a trusted user may record a uid on a namespace labelled before",
			trusted:     []string{alice.Username},
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org"), ns("team-a", "org", recorded)),
			wantAllowed: true,
		},
		{
			name:        "a uid without a parent label is denied",
			req:         request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "", parentUID("ns-org"))),
			wantMessage: []string{v1alpha1.AnnotationParentUID, "only with " + v1alpha1.LabelParent},
		},
		{
			name:        "removing the label with its uid is allowed",
			index:       losing(),
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org", recorded), ns("team-a", "")),
			wantAllowed: true,
		},
		{
			name:        "without a client to read parents, 503",
			noHost:      true,
			answers:     allowAll(updateNamespace("org")),
			req:         request(create, nsGR, "", "team-a", nil, ns("team-a", "org", recorded)),
			wantStatus:  http.StatusServiceUnavailable,
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace("org")},
			wantAllowed: false,
		},

		// Locked items that would leave.
		{
			name:        "opting out of inheritance with locked items is denied without unlock",
			index:       losing(deny, sec),
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org", recorded), ns("team-a", "org", recorded, noInherit)),
			wantMessage: []string{`setting implicit.dev/inherit: "false" on namespace "team-a"`, "networkpolicies.networking.k8s.io org/deny-all (in the views of team-a); rolebindings.rbac.authorization.k8s.io implicit-global/sec (in the views of team-a, team-a-1)", `"unlock"`},
			wantSAR: []authorizationv1.ResourceAttributes{
				unlockAll(networkpolicies, "org"), unlock(networkpolicies, "org", "deny-all"),
				unlockAll(rolebindings, global), unlock(rolebindings, global, "sec"),
			},
		},
		{
			name:           "opting out is denied naming only the items the requester may not unlock",
			index:          losing(deny, sec),
			answers:        allowAll(unlock(networkpolicies, "org", "deny-all")),
			req:            request(update, nsGR, "", "team-a", ns("team-a", "org", recorded), ns("team-a", "org", recorded, noInherit)),
			wantMessage:    []string{"implicit-global/sec"},
			wantNotMessage: []string{"deny-all"},
			wantSAR: []authorizationv1.ResourceAttributes{
				unlockAll(networkpolicies, "org"), unlock(networkpolicies, "org", "deny-all"),
				unlockAll(rolebindings, global), unlock(rolebindings, global, "sec"),
			},
		},
		{
			name:        "opting out is allowed with unlock on each locked item",
			index:       losing(deny, sec),
			answers:     allowAll(unlock(networkpolicies, "org", "deny-all"), unlock(rolebindings, global, "sec")),
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org", recorded), ns("team-a", "org", recorded, noInherit)),
			wantAllowed: true,
			wantSAR: []authorizationv1.ResourceAttributes{
				unlockAll(networkpolicies, "org"), unlock(networkpolicies, "org", "deny-all"),
				unlockAll(rolebindings, global), unlock(rolebindings, global, "sec"),
			},
		},
		{
			name:        "unlock on every source of a namespace answers for all its items at once",
			index:       losing(deny, sec),
			answers:     allowAll(unlockAll(networkpolicies, "org"), unlockAll(rolebindings, global)),
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org", recorded), ns("team-a", "org", recorded, noInherit)),
			wantAllowed: true,
			wantSAR:     []authorizationv1.ResourceAttributes{unlockAll(networkpolicies, "org"), unlockAll(rolebindings, global)},
		},
		{
			name:        "removing the parent with locked items is denied without unlock",
			index:       losing(deny),
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org", recorded), ns("team-a", "")),
			wantMessage: []string{"removing implicit.dev/parent: org", "org/deny-all"},
			wantSAR:     []authorizationv1.ResourceAttributes{unlockAll(networkpolicies, "org"), unlock(networkpolicies, "org", "deny-all")},
		},
		{
			name:        "changing the parent with locked items is denied without unlock",
			index:       losing(deny),
			answers:     allowAll(updateNamespace("org2")),
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org", recorded), ns("team-a", "org2", recorded)),
			wantMessage: []string{"setting implicit.dev/parent: org2", "org/deny-all"},
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace("org2"), unlockAll(networkpolicies, "org"), unlock(networkpolicies, "org", "deny-all")},
		},
		{
			name:           "a denial names ten items and counts the rest",
			index:          losing(many...),
			req:            request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "", noInherit)),
			wantMessage:    []string{"rb-09", "and 2 more"},
			wantNotMessage: []string{"rb-10"},
			wantSAR:        manySAR,
		},
		{
			name:        "a change that loses nothing asks nothing",
			index:       losing(),
			req:         request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "", noInherit)),
			wantAllowed: true,
			check: func(t *testing.T, idx *fakeIndex) {
				// Against the mirror alone, with the assumptions, and with
				// them and the deletions taken back (assumedWays), then the
				// three again just before the change is assumed.
				calls := idx.losses()
				if len(calls) != 6 {
					t.Fatalf("LockedLoss asked %d times, want 6", len(calls))
				}
				for i, c := range calls {
					if c.namespace != "team-a" || c.next.Labels[v1alpha1.LabelInherit] != "false" {
						t.Errorf("LockedLoss asked about %s with labels %v, want team-a with the new labels", c.namespace, c.next.Labels)
					}
					// The mirror alone, with at most the namespace itself as
					// the request found it (the fake mirror does not know it).
					for k := range c.assumed {
						if i%3 == 0 && k != "team-a" {
							t.Errorf("question %d: assumed %v, want the mirror alone and team-a as it is", i, c.assumed)
						}
					}
				}
			},
		},
		{
			name:        "creating a namespace loses nothing and is not asked about",
			index:       losing(sec),
			req:         request(create, nsGR, "", "team-a", nil, ns("team-a", "", noInherit)),
			wantAllowed: true,
			check: func(t *testing.T, idx *fakeIndex) {
				if calls := idx.losses(); len(calls) != 0 {
					t.Errorf("LockedLoss asked %+v, want nothing", calls)
				}
			},
		},
		{
			name:       "an index that can't answer gives 503",
			index:      &fakeIndex{lossErr: errBoom},
			req:        request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "", noInherit)),
			wantStatus: http.StatusServiceUnavailable,
		},
		{
			name:       "an authorizer error gives 503",
			index:      losing(sec),
			answers:    map[authorizationv1.ResourceAttributes]answer{unlockAll(rolebindings, global): {err: errBoom}},
			req:        request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "", noInherit)),
			wantStatus: http.StatusServiceUnavailable,
			wantSAR:    []authorizationv1.ResourceAttributes{unlockAll(rolebindings, global)},
		},
		{
			name:        "an unrelated label change is allowed without a question",
			index:       losing(sec),
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org", recorded), ns("team-a", "org", recorded, func(n *corev1.Namespace) { n.Labels["team"] = "a" })),
			wantAllowed: true,
			check: func(t *testing.T, idx *fakeIndex) {
				if calls := idx.losses(); len(calls) != 0 {
					t.Errorf("LockedLoss asked %+v, want nothing", calls)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runGuard(t, webhookconfig.PathParents, tc)
		})
	}
}

// hierarchyMux is a synced mux of rolebindings over namespaces, with
// sources; locked ones are annotated so.
func hierarchyMux(t *testing.T, namespaces []*corev1.Namespace, sources ...*rbacv1.RoleBinding) *watchmux.Mux {
	t.Helper()
	objs := make([]runtime.Object, 0, len(sources))
	for _, rb := range sources {
		objs = append(objs, rb)
	}
	return sourcesMux("rolebindings", namespaces, objs...)
}

// sourcesMux is a synced mux of resource over namespaces, with sources.
func sourcesMux(resource string, namespaces []*corev1.Namespace, sources ...runtime.Object) *watchmux.Mux {
	m := watchmux.New(merge.Policy{GlobalNamespace: global}, []string{resource}, nil, watchmux.Options{})
	for _, n := range namespaces {
		m.OnNamespace(n, false)
	}
	for _, o := range sources {
		m.OnSource(resource, o, false)
	}
	m.MarkSynced()
	return m
}

// TestParentsAssumeAdmittedChanges checks the race of two namespace changes
// that are each harmless against the index but not together: the guard
// judges the second with the first applied until the index shows it, or
// the assumption expires.
func TestParentsAssumeAdmittedChanges(t *testing.T) {
	t.Parallel()
	update := admissionv1.Update
	tests := []struct {
		name    string
		answers map[authorizationv1.ResourceAttributes]answer
		// first is admitted; second is asked with first assumed, then again
		// after the assumption expired.
		first, second *admissionv1.AdmissionRequest
		dryRun        bool
		wantMessage   string
	}{
		{
			name:        "two parent labels that close a cycle together",
			answers:     allowAll(updateNamespace("a"), updateNamespace("b")),
			first:       request(update, nsGR, "", "a", ns("a", ""), ns("a", "b", recorded)),
			second:      request(update, nsGR, "", "b", ns("b", ""), ns("b", "a", recorded)),
			wantMessage: "would close the cycle b -> a -> b",
		},
		{
			// a holds the locked a-sec; b joins a's subtree, then a opts
			// out: b would lose a-sec, which the index doesn't know b has.
			name:        "a namespace that opts out after another joined below it",
			answers:     allowAll(updateNamespace("a")),
			first:       request(update, nsGR, "", "b", ns("b", ""), ns("b", "a", recorded)),
			second:      request(update, nsGR, "", "a", ns("a", ""), ns("a", "", noInherit)),
			wantMessage: "rolebindings.rbac.authorization.k8s.io a/a-sec (in the views of b)",
		},
		{
			name:    "a dry run is not assumed",
			answers: allowAll(updateNamespace("a"), updateNamespace("b")),
			first:   request(update, nsGR, "", "a", ns("a", ""), ns("a", "b", recorded)),
			second:  request(update, nsGR, "", "b", ns("b", ""), ns("b", "a", recorded)),
			dryRun:  true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := hierarchyMux(t, []*corev1.Namespace{ns(global, ""), ns("a", ""), ns("b", "")}, roleBinding("a", "a-sec", isLocked))
			clock := clocktesting.NewFakePassiveClock(time.Now())
			g := admission.NewGuards(admission.Config{Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{answers: tc.answers}, Served: served, GlobalNamespaces: []string{global}, Namespaces: namespaceClient("a", "b"), Clock: clock})

			tc.first.DryRun = ptr.To(tc.dryRun)
			if resp, _ := review(t, g, webhookconfig.PathParents, tc.first); resp == nil || !resp.Allowed {
				t.Fatalf("first change refused: %+v", resp)
			}
			resp, _ := review(t, g, webhookconfig.PathParents, tc.second)
			if resp == nil {
				t.Fatal("no answer to the second change")
			}
			if tc.wantMessage == "" {
				if !resp.Allowed {
					t.Fatalf("second change refused: %+v", resp.Result)
				}
				return
			}
			if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, tc.wantMessage) {
				t.Fatalf("second change answered %v %+v, want a denial with %q", resp.Allowed, resp.Result, tc.wantMessage)
			}
			t.Log("the index never showed the first change: once the assumption expires, the second is judged against the index alone")
			clock.SetTime(clock.Now().Add(31 * time.Second))
			tc.second.UID += "-again"
			if resp, _ := review(t, g, webhookconfig.PathParents, tc.second); resp == nil || !resp.Allowed {
				t.Fatalf("second change after the assumption expired: %+v, want allowed", resp)
			}
		})
	}
}
