package admission_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// guardCase is one request to one guard and what it must answer.
type guardCase struct {
	name    string
	index   *fakeIndex
	answers map[authorizationv1.ResourceAttributes]answer
	req     *admissionv1.AdmissionRequest

	// wantStatus is the HTTP status when not 200 (an AdmissionReview).
	wantStatus  int
	wantAllowed bool
	// wantMessage are substrings of a denial's message.
	wantMessage    []string
	wantNotMessage []string
	wantWarnings   []string
	// wantSAR are the questions asked of the authorizer, in order.
	wantSAR []authorizationv1.ResourceAttributes
	// check inspects the index's questions.
	check func(t *testing.T, idx *fakeIndex)

	// namespaces are the host cluster's (default hostNamespaces); noHost
	// leaves the guards without a client to read them.
	namespaces []string
	noHost     bool
	// fleet, when set, is a hub's members' reports (--fleet-hub).
	fleet admission.FleetIndex
	// hostTerminating are host namespaces whose deletion has begun;
	// hostParents their parent labels, by name.
	hostTerminating []string
	hostParents     map[string]string
	// trusted users may write parent-uid as they like.
	trusted []string
	// wantPatch is the JSON patch of an allowed answer, "" for none.
	wantPatch string
	// identity is the server's own user (none: not known yet);
	// materialize the view resources delivered as copies.
	identity    string
	materialize []string
}

// runGuard posts tc's request to the guard at path.
func runGuard(t *testing.T, path string, tc guardCase) {
	t.Helper()
	idx := tc.index
	if idx == nil {
		idx = &fakeIndex{}
	}
	authz := &fakeAuthorizer{answers: tc.answers}
	cfg := admission.Config{Mirror: mirrorOf(idx), Authorizer: authz, Served: served, GlobalNamespaces: []string{global},
		TrustParentUIDFrom: tc.trusted, ServerIdentity: tc.identity, Materialized: tc.materialize, Fleet: tc.fleet}
	if !tc.noHost {
		names := tc.namespaces
		if names == nil {
			names = hostNamespaces
		}
		cfg.Namespaces = hostClient(names, tc.hostTerminating, tc.hostParents)
	}
	g := admission.NewGuards(cfg)

	resp, status := review(t, g, path, tc.req)
	want := tc.wantStatus
	if want == 0 {
		want = http.StatusOK
	}
	if status != want {
		t.Fatalf("HTTP status = %d, want %d", status, want)
	}
	if resp != nil {
		if resp.Allowed != tc.wantAllowed {
			t.Errorf("allowed = %v, want %v (result %+v)", resp.Allowed, tc.wantAllowed, resp.Result)
		}
		if !tc.wantAllowed {
			if resp.Result == nil {
				t.Fatalf("denial without a result")
			}
			if resp.Result.Code != http.StatusForbidden || resp.Result.Reason != metav1.StatusReasonForbidden || resp.Result.Status != metav1.StatusFailure {
				t.Errorf("denial result = code %d reason %q status %q, want 403 Forbidden Failure", resp.Result.Code, resp.Result.Reason, resp.Result.Status)
			}
		} else if resp.Result != nil {
			t.Errorf("allowed with result %+v, want none", resp.Result)
		}
		msg := ""
		if resp.Result != nil {
			msg = resp.Result.Message
		}
		for _, s := range tc.wantMessage {
			if !strings.Contains(msg, s) {
				t.Errorf("message %q does not contain %q", msg, s)
			}
		}
		for _, s := range tc.wantNotMessage {
			if strings.Contains(msg, s) {
				t.Errorf("message %q contains %q", msg, s)
			}
		}
		if !reflect.DeepEqual(resp.Warnings, tc.wantWarnings) {
			t.Errorf("warnings = %q, want %q", resp.Warnings, tc.wantWarnings)
		}
		checkPatch(t, resp, tc.wantPatch)
	}

	asked := authz.asked()
	var got []authorizationv1.ResourceAttributes
	for _, q := range asked {
		got = append(got, q.attrs)
		if !reflect.DeepEqual(q.user, tc.req.UserInfo) {
			t.Errorf("authorizer asked about user %+v, want the requester %+v", q.user, tc.req.UserInfo)
		}
	}
	if !reflect.DeepEqual(got, tc.wantSAR) {
		t.Errorf("authorizer asked %+v, want %+v", got, tc.wantSAR)
	}
	if tc.check != nil {
		tc.check(t, idx)
	}
}

func allowAll(attrs ...authorizationv1.ResourceAttributes) map[authorizationv1.ResourceAttributes]answer {
	m := map[authorizationv1.ResourceAttributes]answer{}
	for _, a := range attrs {
		m[a] = answer{allowed: true}
	}
	return m
}

func TestLocks(t *testing.T) {
	t.Parallel()
	const team = "team-a"
	adminsUnlock := unlock(rolebindings, global, "admins")
	objName := fmt.Sprintf("%s %q in namespace %q", rolebindings, "admins", global)
	update, del, create := admissionv1.Update, admissionv1.Delete, admissionv1.Create

	tests := []guardCase{
		{
			name:        "unlocked update is allowed without asking",
			req:         request(update, rolebindings, global, "admins", roleBinding(global, "admins"), roleBinding(global, "admins")),
			wantAllowed: true,
		},
		{
			name:        "lock annotation other than true is no lock",
			req:         request(update, rolebindings, global, "admins", roleBinding(global, "admins", annotated(v1alpha1.AnnotationLocked, "false")), roleBinding(global, "admins", annotated(v1alpha1.AnnotationLocked, "yes"))),
			wantAllowed: true,
		},
		{
			name:        "unlocked delete is allowed without asking",
			req:         request(del, rolebindings, global, "admins", roleBinding(global, "admins"), nil),
			wantAllowed: true,
		},
		{
			name:        "unlocked create is allowed without asking",
			req:         request(create, rolebindings, team, "admins", nil, roleBinding(team, "admins")),
			wantAllowed: true,
		},
		{
			name:        "update of a locked object without unlock is denied",
			req:         request(update, rolebindings, global, "admins", roleBinding(global, "admins", isLocked), roleBinding(global, "admins", isLocked)),
			wantMessage: []string{objName, `"unlock"`, v1alpha1.AnnotationLocked, "changing it"},
			wantSAR:     []authorizationv1.ResourceAttributes{adminsUnlock},
		},
		{
			name:        "denial carries the authorizer's reason",
			answers:     map[authorizationv1.ResourceAttributes]answer{adminsUnlock: {reason: "no RBAC policy matched"}},
			req:         request(update, rolebindings, global, "admins", roleBinding(global, "admins", isLocked), roleBinding(global, "admins", isLocked)),
			wantMessage: []string{objName, "no RBAC policy matched"},
			wantSAR:     []authorizationv1.ResourceAttributes{adminsUnlock},
		},
		{
			name:        "update of a locked object with unlock is allowed",
			answers:     allowAll(adminsUnlock),
			req:         request(update, rolebindings, global, "admins", roleBinding(global, "admins", isLocked), roleBinding(global, "admins", isLocked)),
			wantAllowed: true,
			wantSAR:     []authorizationv1.ResourceAttributes{adminsUnlock},
		},
		{
			name:        "delete of a locked object without unlock is denied",
			req:         request(del, rolebindings, global, "admins", roleBinding(global, "admins", isLocked), nil),
			wantMessage: []string{objName, `"unlock"`, v1alpha1.AnnotationLocked, "deleting it"},
			wantSAR:     []authorizationv1.ResourceAttributes{adminsUnlock},
		},
		{
			name:        "delete of a locked object with unlock is allowed",
			answers:     allowAll(adminsUnlock),
			req:         request(del, rolebindings, global, "admins", roleBinding(global, "admins", isLocked), nil),
			wantAllowed: true,
			wantSAR:     []authorizationv1.ResourceAttributes{adminsUnlock},
		},
		{
			// kube-apiserver admits each item of a deletecollection with an
			// empty request name: the name comes from the old object.
			name:        "deletecollection item of a locked object is checked by its name",
			answers:     allowAll(adminsUnlock),
			req:         request(del, rolebindings, global, "", roleBinding(global, "admins", isLocked), nil),
			wantAllowed: true,
			wantSAR:     []authorizationv1.ResourceAttributes{adminsUnlock},
		},
		{
			name:            "delete of a locked object in a terminating namespace is allowed without asking",
			index:           &fakeIndex{terminating: map[string]bool{global: true}},
			hostTerminating: []string{global},
			req:             request(del, rolebindings, global, "admins", roleBinding(global, "admins", isLocked), nil),
			wantAllowed:     true,
		},
		{
			// The mirror lags behind the deletion's start.
			name:            "delete of a locked object in a namespace kube-apiserver alone shows terminating is allowed without asking",
			hostTerminating: []string{global},
			req:             request(del, rolebindings, global, "admins", roleBinding(global, "admins", isLocked), nil),
			wantAllowed:     true,
		},
		{
			// The mirror lags: it shows a namespace of that name that was
			// deleted before this one was created.
			name:        "delete of a locked object in a namespace the mirror alone shows terminating needs unlock",
			index:       &fakeIndex{terminating: map[string]bool{global: true}},
			req:         request(del, rolebindings, global, "admins", roleBinding(global, "admins", isLocked), nil),
			wantMessage: []string{objName, `"unlock"`, "deleting it"},
			wantSAR:     []authorizationv1.ResourceAttributes{adminsUnlock},
		},
		{
			name:        "update of a locked object in a terminating namespace still needs unlock",
			index:       &fakeIndex{terminating: map[string]bool{global: true}},
			req:         request(update, rolebindings, global, "admins", roleBinding(global, "admins", isLocked), roleBinding(global, "admins", isLocked)),
			wantMessage: []string{objName, `"unlock"`},
			wantSAR:     []authorizationv1.ResourceAttributes{adminsUnlock},
		},
		{
			name:        "removing the lock without unlock is denied",
			req:         request(update, rolebindings, global, "admins", roleBinding(global, "admins", isLocked), roleBinding(global, "admins")),
			wantMessage: []string{objName, `"unlock"`, v1alpha1.AnnotationLocked, "removing the lock"},
			wantSAR:     []authorizationv1.ResourceAttributes{adminsUnlock},
		},
		{
			name:        "removing the lock with unlock is allowed",
			answers:     allowAll(adminsUnlock),
			req:         request(update, rolebindings, global, "admins", roleBinding(global, "admins", isLocked), roleBinding(global, "admins")),
			wantAllowed: true,
			wantSAR:     []authorizationv1.ResourceAttributes{adminsUnlock},
		},
		{
			name:           "adding the lock without unlock is denied",
			req:            request(update, rolebindings, global, "admins", roleBinding(global, "admins"), roleBinding(global, "admins", isLocked)),
			wantMessage:    []string{objName, `"unlock"`, "locking it"},
			wantNotMessage: []string{"is locked"},
			wantSAR:        []authorizationv1.ResourceAttributes{adminsUnlock},
		},
		{
			name:        "adding the lock with unlock is allowed",
			answers:     allowAll(adminsUnlock),
			req:         request(update, rolebindings, global, "admins", roleBinding(global, "admins"), roleBinding(global, "admins", isLocked)),
			wantAllowed: true,
			wantSAR:     []authorizationv1.ResourceAttributes{adminsUnlock},
		},
		{
			name:           "create with the lock without unlock is denied",
			req:            request(create, rolebindings, global, "admins", nil, roleBinding(global, "admins", isLocked)),
			wantMessage:    []string{objName, `"unlock"`, "creating it locked"},
			wantNotMessage: []string{"is locked"},
			wantSAR:        []authorizationv1.ResourceAttributes{adminsUnlock},
		},
		{
			name:        "create with the lock takes the name from the object",
			answers:     allowAll(adminsUnlock),
			req:         request(create, rolebindings, global, "", nil, roleBinding(global, "admins", isLocked)),
			wantAllowed: true,
			wantSAR:     []authorizationv1.ResourceAttributes{adminsUnlock},
		},
		{
			name:        "the unlock question names the object's group and resource",
			req:         request(update, networkpolicies, team, "deny-all", networkPolicy(team, "deny-all", isLocked), networkPolicy(team, "deny-all", isLocked)),
			wantMessage: []string{fmt.Sprintf("%s %q in namespace %q", networkpolicies, "deny-all", team), v1alpha1.AnnotationLocked},
			wantSAR:     []authorizationv1.ResourceAttributes{unlock(networkpolicies, team, "deny-all")},
		},
		{
			name:       "authorizer error answers 503",
			answers:    map[authorizationv1.ResourceAttributes]answer{adminsUnlock: {err: errBoom}},
			req:        request(update, rolebindings, global, "admins", roleBinding(global, "admins", isLocked), roleBinding(global, "admins", isLocked)),
			wantStatus: http.StatusServiceUnavailable,
			wantSAR:    []authorizationv1.ResourceAttributes{adminsUnlock},
		},
		{
			name:        "a resource that is not served is allowed",
			req:         request(update, schema.GroupResource{Group: "apps", Resource: "deployments"}, global, "admins", roleBinding(global, "admins", isLocked), roleBinding(global, "admins", isLocked)),
			wantAllowed: true,
		},
		{
			name: "a served resource name in another group is allowed",
			req: request(update, schema.GroupResource{Group: "example.com", Resource: "rolebindings"}, global, "admins",
				roleBinding(global, "admins", isLocked), roleBinding(global, "admins", isLocked)),
			wantAllowed: true,
		},
		// Subresources: status is shown in the view, scale writes
		// spec.replicas; both change a locked source.
		{
			name:        "a status update of a locked source is denied without unlock",
			req:         sub(request(update, rolebindings, global, "admins", roleBinding(global, "admins", isLocked), roleBinding(global, "admins", isLocked)), "status"),
			wantMessage: []string{"is locked", "updating its status subresource", `"unlock"`},
			wantSAR:     []authorizationv1.ResourceAttributes{unlock(rolebindings, global, "admins")},
		},
		{
			name:        "a status update of a locked source is allowed with unlock",
			answers:     allowAll(unlock(rolebindings, global, "admins")),
			req:         sub(request(update, rolebindings, global, "admins", roleBinding(global, "admins", isLocked), roleBinding(global, "admins", isLocked)), "status"),
			wantAllowed: true,
			wantSAR:     []authorizationv1.ResourceAttributes{unlock(rolebindings, global, "admins")},
		},
		{
			name:        "a status update whose objects lack the lock is judged by the source",
			index:       &fakeIndex{locked: map[string]bool{"rolebindings " + global + " admins": true}},
			req:         sub(request(update, rolebindings, global, "admins", roleBinding(global, "admins"), roleBinding(global, "admins")), "status"),
			wantMessage: []string{"updating its status subresource"},
			wantSAR:     []authorizationv1.ResourceAttributes{unlock(rolebindings, global, "admins")},
		},
		{
			name:        "a status update of an unlocked source is allowed",
			req:         sub(request(update, rolebindings, global, "admins", roleBinding(global, "admins"), roleBinding(global, "admins")), "status"),
			wantAllowed: true,
		},
		{
			name:        "a scale update of a locked source is denied without unlock",
			index:       &fakeIndex{locked: map[string]bool{"rolebindings " + global + " admins": true}},
			req:         sub(request(update, rolebindings, global, "admins", scale(global, "admins", 1), scale(global, "admins", 5)), "scale"),
			wantMessage: []string{"updating its scale subresource"},
			wantSAR:     []authorizationv1.ResourceAttributes{unlock(rolebindings, global, "admins")},
		},
		{
			name:        "a scale update of a locked source is allowed with unlock",
			index:       &fakeIndex{locked: map[string]bool{"rolebindings " + global + " admins": true}},
			answers:     allowAll(unlock(rolebindings, global, "admins")),
			req:         sub(request(update, rolebindings, global, "admins", scale(global, "admins", 1), scale(global, "admins", 5)), "scale"),
			wantAllowed: true,
			wantSAR:     []authorizationv1.ResourceAttributes{unlock(rolebindings, global, "admins")},
		},
		{
			name:        "a scale update of an unlocked source is allowed",
			index:       &fakeIndex{locked: map[string]bool{}},
			req:         sub(request(update, rolebindings, global, "admins", scale(global, "admins", 1), scale(global, "admins", 5)), "scale"),
			wantAllowed: true,
		},
		{
			name:       "a scale update answers 503 when the index can't tell the lock",
			index:      &fakeIndex{lockedErr: errBoom},
			req:        sub(request(update, rolebindings, global, "admins", scale(global, "admins", 1), scale(global, "admins", 5)), "scale"),
			wantStatus: http.StatusServiceUnavailable,
		},
		{
			name:        "another subresource is allowed",
			req:         sub(request(update, rolebindings, global, "admins", roleBinding(global, "admins", isLocked), roleBinding(global, "admins", isLocked)), "approval"),
			wantAllowed: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runGuard(t, webhookconfig.PathLocks, tc)
		})
	}
}

// inheritedResult is a merge result of a source item at scope.
func inheritedResult(scope merge.Scope, namespace, name string, locked bool) merge.Result {
	return merge.Result{Scope: scope, Item: merge.Item{Namespace: namespace, Name: name, Locked: locked, Object: roleBinding(namespace, name)}}
}

func TestShadows(t *testing.T) {
	t.Parallel()
	const team = "team-a"
	create := admissionv1.Create
	asked := func(keys ...string) func(t *testing.T, idx *fakeIndex) {
		return func(t *testing.T, idx *fakeIndex) {
			if !reflect.DeepEqual(idx.inheritedCalls, keys) {
				t.Errorf("Inherited asked %q, want %q", idx.inheritedCalls, keys)
			}
		}
	}
	tests := []guardCase{
		{
			name: "create shadowing a locked global item is denied",
			index: &fakeIndex{inherited: map[string]merge.Result{
				"rolebindings team-a admins": inheritedResult(merge.ScopeGlobal, global, "admins", true),
			}},
			req:         request(create, rolebindings, team, "admins", nil, roleBinding(team, "admins")),
			wantMessage: []string{"locked global source " + global + "/admins", "namespace " + team, `"admins"`},
			check:       asked("rolebindings team-a admins"),
		},
		{
			name: "create shadowing a locked parent item is denied",
			index: &fakeIndex{inherited: map[string]merge.Result{
				"rolebindings team-a admins": inheritedResult(merge.ScopeParent, "org", "admins", true),
			}},
			req:         request(create, rolebindings, team, "admins", nil, roleBinding(team, "admins")),
			wantMessage: []string{"locked parent source org/admins"},
			check:       asked("rolebindings team-a admins"),
		},
		{
			name: "create shadowing an unlocked inherited item is allowed",
			index: &fakeIndex{inherited: map[string]merge.Result{
				"rolebindings team-a admins": inheritedResult(merge.ScopeGlobal, global, "admins", false),
			}},
			req:         request(create, rolebindings, team, "admins", nil, roleBinding(team, "admins")),
			wantAllowed: true,
			check:       asked("rolebindings team-a admins"),
		},
		{
			name: "create overlaying a locked item that takes overlays is allowed, with a warning",
			index: &fakeIndex{
				inherited: map[string]merge.Result{
					"rolebindings team-a admins": inheritedResult(merge.ScopeGlobal, global, "admins", true),
				},
				overlays: map[string]bool{"rolebindings admins": true},
			},
			req:          request(create, rolebindings, team, "admins", nil, roleBinding(team, "admins")),
			wantAllowed:  true,
			wantWarnings: []string{`implicit.dev: rolebindings.rbac.authorization.k8s.io "admins" in namespace "team-a" overlays the locked global source ` + global + `/admins: the fields it sets stay as they are; the view's implicit.dev/conflict names what this object can't change`},
			check:        asked("rolebindings team-a admins"),
		},
		{
			name:        "create with nothing inherited is allowed",
			index:       &fakeIndex{},
			req:         request(create, rolebindings, team, "admins", nil, roleBinding(team, "admins")),
			wantAllowed: true,
			check:       asked("rolebindings team-a admins"),
		},
		{
			name: "create takes the name from the object",
			index: &fakeIndex{inherited: map[string]merge.Result{
				"rolebindings team-a admins": inheritedResult(merge.ScopeGlobal, global, "admins", true),
			}},
			req:         request(create, rolebindings, team, "", nil, roleBinding(team, "admins")),
			wantMessage: []string{"locked global source " + global + "/admins"},
			check:       asked("rolebindings team-a admins"),
		},
		{
			name: "update is allowed without asking",
			index: &fakeIndex{inherited: map[string]merge.Result{
				"rolebindings team-a admins": inheritedResult(merge.ScopeGlobal, global, "admins", true),
			}},
			req:         request(admissionv1.Update, rolebindings, team, "admins", roleBinding(team, "admins"), roleBinding(team, "admins")),
			wantAllowed: true,
			check:       asked(),
		},
		{
			name:        "delete is allowed without asking",
			index:       &fakeIndex{inheritedErr: errBoom},
			req:         request(admissionv1.Delete, rolebindings, team, "admins", roleBinding(team, "admins"), nil),
			wantAllowed: true,
			check:       asked(),
		},
		{
			name:        "a resource that is not served is allowed",
			index:       &fakeIndex{inheritedErr: errBoom},
			req:         request(create, schema.GroupResource{Group: "apps", Resource: "deployments"}, team, "admins", nil, roleBinding(team, "admins")),
			wantAllowed: true,
			check:       asked(),
		},
		{
			name:       "index not synced answers 503",
			index:      &fakeIndex{inheritedErr: notSynced(t)},
			req:        request(create, rolebindings, team, "admins", nil, roleBinding(team, "admins")),
			wantStatus: http.StatusServiceUnavailable,
			check:      asked("rolebindings team-a admins"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runGuard(t, webhookconfig.PathShadows, tc)
		})
	}
}

// notSynced is the error an unsynced watchmux.Mux answers with.
func notSynced(t *testing.T) error {
	t.Helper()
	m := watchmux.New(merge.Policy{GlobalNamespace: global}, []string{"rolebindings"}, nil, watchmux.Options{})
	_, _, err := whatif.New(m).Inherited("rolebindings", "team-a", "admins")
	if !watchmux.IsNotSynced(err) {
		t.Fatalf("an unsynced mux answered %v, want the not-synced error", err)
	}
	return err
}

func TestParents(t *testing.T) {
	t.Parallel()
	nsGR := schema.GroupResource{Resource: "namespaces"}
	create, update := admissionv1.Create, admissionv1.Update
	// existing: org and org2 are tenants, kube-system is not.
	idx := func() *fakeIndex {
		return &fakeIndex{
			existing: map[string]bool{"org": true, "org2": true, "team-a": true, "kube-system": false, global: false},
			cycles:   map[string][]string{"org org2": {"org", "org2", "org"}},
		}
	}
	tests := []guardCase{
		{
			name:        "create without a parent label is allowed",
			index:       idx(),
			req:         request(create, nsGR, "", "team-a", nil, ns("team-a", "")),
			wantAllowed: true,
		},
		{
			name:        "update with an unchanged parent is allowed",
			index:       idx(),
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org"), ns("team-a", "org")),
			wantAllowed: true,
		},
		{
			name:        "removing the parent is allowed",
			index:       idx(),
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org"), ns("team-a", "")),
			wantAllowed: true,
		},
		{
			name:        "delete is allowed",
			index:       idx(),
			req:         request(admissionv1.Delete, nsGR, "", "team-a", ns("team-a", "org"), nil),
			wantAllowed: true,
		},
		{
			name:        "self parent is denied",
			index:       idx(),
			req:         request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "team-a")),
			wantMessage: []string{`"team-a"`, "own parent", v1alpha1.LabelParent},
		},
		{
			name:        "parent the requester may not update is denied",
			index:       idx(),
			answers:     map[authorizationv1.ResourceAttributes]answer{updateNamespace("org"): {reason: "RBAC: no binding"}},
			req:         request(create, nsGR, "", "team-a", nil, ns("team-a", "org")),
			wantMessage: []string{"update namespace \"org\"", v1alpha1.LabelParent, `"team-a"`, "RBAC: no binding"},
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace("org")},
		},
		{
			name:        "a changed parent is checked against the new parent",
			index:       idx(),
			answers:     allowAll(updateNamespace("org")),
			req:         request(update, nsGR, "", "team-a", ns("team-a", "org"), ns("team-a", "org2")),
			wantMessage: []string{"update namespace \"org2\""},
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace("org2")},
		},
		{
			name:        "the global namespace as parent is denied",
			index:       idx(),
			answers:     allowAll(updateNamespace(global)),
			req:         request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", global)),
			wantMessage: []string{`"` + global + `" can't be a parent`},
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace(global)},
		},
		{
			name:        "the global namespace as parent is denied before it exists",
			index:       &fakeIndex{},
			answers:     allowAll(updateNamespace(global)),
			req:         request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", global)),
			wantMessage: []string{`"` + global + `" can't be a parent`},
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace(global)},
		},
		{
			name:        "an existing non-tenant as parent is denied",
			index:       idx(),
			answers:     allowAll(updateNamespace("kube-system")),
			req:         request(create, nsGR, "", "team-a", nil, ns("team-a", "kube-system")),
			wantMessage: []string{`"kube-system" can't be a parent`},
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace("kube-system")},
		},
		{
			// A parent is the namespace meant when the label is set: one
			// that does not exist yet is no one's, and whoever created it
			// later would adopt the child.
			name:        "a parent that does not exist yet is denied with update on it",
			index:       idx(),
			answers:     allowAll(updateNamespace("future")),
			req:         request(create, nsGR, "", "team-a", nil, ns("team-a", "future")),
			wantMessage: []string{`namespace "future" does not exist`, v1alpha1.AnnotationParentUID},
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace("future")},
		},
		{
			name:        "a parent that does not exist yet is denied without update on it",
			index:       idx(),
			req:         request(create, nsGR, "", "team-a", nil, ns("team-a", "future")),
			wantMessage: []string{"update namespace \"future\""},
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace("future")},
		},
		{
			name:        "a parent that closes a cycle is denied",
			index:       idx(),
			answers:     allowAll(updateNamespace("org2")),
			req:         request(update, nsGR, "", "org", ns("org", ""), ns("org", "org2")),
			wantMessage: []string{"cycle org -> org2 -> org", v1alpha1.LabelParent},
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace("org2")},
		},
		{
			name:        "a tenant parent the requester may update is allowed",
			index:       idx(),
			answers:     allowAll(updateNamespace("org")),
			req:         request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "org", recorded)),
			wantAllowed: true,
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace("org")},
		},
		{
			name:        "an old namespace without labels is a new parent",
			index:       idx(),
			answers:     allowAll(updateNamespace("org")),
			req:         request(update, nsGR, "", "team-a", &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "team-a"}}}, ns("team-a", "org", recorded)),
			wantAllowed: true,
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace("org")},
		},
		{
			name:       "authorizer error answers 503",
			index:      idx(),
			answers:    map[authorizationv1.ResourceAttributes]answer{updateNamespace("org"): {err: errBoom}},
			req:        request(create, nsGR, "", "team-a", nil, ns("team-a", "org")),
			wantStatus: http.StatusServiceUnavailable,
			wantSAR:    []authorizationv1.ResourceAttributes{updateNamespace("org")},
		},
		{
			name:        "another resource is allowed",
			index:       idx(),
			req:         request(create, rolebindings, "team-a", "admins", nil, roleBinding("team-a", "admins", annotated("x", "y"))),
			wantAllowed: true,
		},
		{
			// PUT namespaces/<name>/status saves label changes too: the
			// guard checks it like the namespace itself.
			name:  "a parent set through namespaces/status is checked like any",
			index: idx(),
			req: func() *admissionv1.AdmissionRequest {
				r := request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", global))
				r.SubResource = "status"
				return r
			}(),
			wantMessage: []string{global},
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace(global)},
		},
		{
			name:  "a parent set through namespaces/finalize is checked like any",
			index: idx(),
			req: func() *admissionv1.AdmissionRequest {
				r := request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "org"))
				r.SubResource = "finalize"
				return r
			}(),
			wantMessage: []string{"update namespace"},
			wantSAR:     []authorizationv1.ResourceAttributes{updateNamespace("org")},
		},
		{
			name:  "another namespace subresource is allowed",
			index: idx(),
			req: func() *admissionv1.AdmissionRequest {
				r := request(update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "org"))
				r.SubResource = "other"
				return r
			}(),
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

func TestFanout(t *testing.T) {
	t.Parallel()
	update, del := admissionv1.Update, admissionv1.Delete
	// reached checks Reach was asked about namespace/name, with the new
	// object for an update (wantObj) or nil for a delete.
	reached := func(namespace string, wantObj bool) func(t *testing.T, idx *fakeIndex) {
		return func(t *testing.T, idx *fakeIndex) {
			if len(idx.reachCalls) != 1 {
				t.Fatalf("Reach asked %d times, want once", len(idx.reachCalls))
			}
			c := idx.reachCalls[0]
			if c.resource != "rolebindings" || c.namespace != namespace || c.name != "admins" {
				t.Errorf("Reach asked about %s %s/%s, want rolebindings %s/admins", c.resource, c.namespace, c.name, namespace)
			}
			if !wantObj {
				if c.obj != nil {
					t.Errorf("Reach got %T %v for a delete, want nil", c.obj, c.obj)
				}
				return
			}
			u, ok := c.obj.(*unstructured.Unstructured)
			if !ok {
				t.Fatalf("Reach got %T, want the new object", c.obj)
			}
			if u.GetName() != "admins" || u.GetAnnotations()["new"] != "yes" {
				t.Errorf("Reach got %v, want the new object", u.Object)
			}
		}
	}
	notReached := func(t *testing.T, idx *fakeIndex) {
		if len(idx.reachCalls) != 0 {
			t.Errorf("Reach asked %+v, want no question", idx.reachCalls)
		}
	}
	newRB := func(namespace string) *admissionv1.AdmissionRequest {
		return request(update, rolebindings, namespace, "admins", roleBinding(namespace, "admins"), roleBinding(namespace, "admins", annotated("new", "yes")))
	}
	tests := []guardCase{
		{
			name:         "update in the global namespace warns",
			index:        &fakeIndex{reach: 7},
			req:          newRB(global),
			wantAllowed:  true,
			wantWarnings: []string{"implicit.dev: this change reaches 7 namespaces"},
			check:        reached(global, true),
		},
		{
			name:         "delete in the global namespace warns",
			index:        &fakeIndex{reach: 5},
			req:          request(del, rolebindings, global, "admins", roleBinding(global, "admins"), nil),
			wantAllowed:  true,
			wantWarnings: []string{"implicit.dev: this change reaches 5 namespaces"},
			check:        reached(global, false),
		},
		{
			name:         "update in a parent warns",
			index:        &fakeIndex{reach: 3, descendants: map[string]bool{"org": true}},
			req:          newRB("org"),
			wantAllowed:  true,
			wantWarnings: []string{"implicit.dev: this change reaches 3 namespaces"},
			check:        reached("org", true),
		},
		{
			name:         "a change that reaches nothing says so",
			index:        &fakeIndex{reach: 0, descendants: map[string]bool{"org": true}},
			req:          request(del, rolebindings, "org", "admins", roleBinding("org", "admins"), nil),
			wantAllowed:  true,
			wantWarnings: []string{"implicit.dev: this change reaches 0 namespaces"},
			check:        reached("org", false),
		},
		{
			// kubectl diff of an unchanged file, a merge patch of {}, an
			// annotate --overwrite with the value it has: kube-apiserver
			// writes nothing, so no view changes and no copy is written.
			name:  "an update that changes nothing does not warn",
			index: &fakeIndex{reach: 7},
			req: request(update, rolebindings, global, "admins",
				roleBinding(global, "admins", func(m *metav1.ObjectMeta) { m.ResourceVersion = "41" }),
				roleBinding(global, "admins")),
			wantAllowed: true,
			check:       notReached,
		},
		{
			name:         "an update that changes only managedFields warns: kube-apiserver writes it",
			index:        &fakeIndex{reach: 7},
			req:          request(update, rolebindings, global, "admins", roleBinding(global, "admins"), roleBinding(global, "admins", func(m *metav1.ObjectMeta) { m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl-patch"}} })),
			wantAllowed:  true,
			wantWarnings: []string{"implicit.dev: this change reaches 7 namespaces"},
		},
		{
			name:        "update in a leaf namespace does not warn",
			index:       &fakeIndex{reach: 3, descendants: map[string]bool{"org": true}},
			req:         newRB("team-a"),
			wantAllowed: true,
			check:       notReached,
		},
		{
			name:        "reach error allows without warning",
			index:       &fakeIndex{reachErr: errBoom},
			req:         newRB(global),
			wantAllowed: true,
			check:       reached(global, true),
		},
		{
			name:         "create in the global namespace warns (issue 27)",
			index:        &fakeIndex{reach: 6},
			req:          request(admissionv1.Create, rolebindings, global, "admins", nil, roleBinding(global, "admins", annotated("new", "yes"))),
			wantAllowed:  true,
			wantWarnings: []string{"implicit.dev: this change reaches 6 namespaces"},
			check:        reached(global, true),
		},
		{
			name:        "create in a leaf namespace does not warn",
			index:       &fakeIndex{reach: 3},
			req:         request(admissionv1.Create, rolebindings, "team-a", "admins", nil, roleBinding("team-a", "admins")),
			wantAllowed: true,
			check:       notReached,
		},
		{
			name:        "a resource that is not served does not warn",
			index:       &fakeIndex{reach: 3},
			req:         request(update, schema.GroupResource{Group: "apps", Resource: "deployments"}, global, "admins", roleBinding(global, "admins"), roleBinding(global, "admins")),
			wantAllowed: true,
			check:       notReached,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runGuard(t, webhookconfig.PathFanout, tc)
		})
	}
}

func TestWarning(t *testing.T) {
	t.Parallel()
	if got, want := admission.Warning(12), "implicit.dev: this change reaches 12 namespaces"; got != want {
		t.Errorf("Warning(12) = %q, want %q", got, want)
	}
}
