package admission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// TestMain fails the package if any test leaves a goroutine behind:
// ConditionSync.Run must end with its context.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const global = "implicit-global"

var (
	rolebindings    = schema.GroupResource{Group: rbacv1.GroupName, Resource: "rolebindings"}
	roles           = schema.GroupResource{Group: rbacv1.GroupName, Resource: "roles"}
	networkpolicies = schema.GroupResource{Group: networkingv1.GroupName, Resource: "networkpolicies"}
	// served are the default served source resources of DESIGN.md.
	served = []schema.GroupResource{rolebindings, roles, networkpolicies}
)

// fakeIndex answers the guards' questions from fields, and records the
// questions whose arguments matter.
type fakeIndex struct {
	// inherited answers Inherited by "resource namespace name".
	inherited    map[string]merge.Result
	inheritedErr error
	// descendants, existing (name -> tenant) and cycles ("namespace parent")
	// answer HasDescendants, Exists, IsTenant and ParentCycleAssuming.
	descendants map[string]bool
	existing    map[string]bool
	cycles      map[string][]string
	// lost answers LockedLoss by namespace; lossErr fails it.
	lost map[string][]whatif.LockedItem
	// standIns answers LockedStandIns by namespace.
	standIns map[string][]whatif.LockedItem
	lossErr  error
	// locked answers SourceLocked by "resource namespace name".
	locked    map[string]bool
	lockedErr error
	reach     int
	reachErr  error
	// losers answers DeletionLosers by namespace.
	losers map[string][]string
	// terminating answers Terminating; goingAway GoingAway by namespace
	// (a terminating namespace answers itself).
	terminating map[string]bool
	goingAway   map[string]string
	// overlays answers Overlays by "resource name".
	overlays map[string]bool
	// candidates answers Candidates by "resource namespace"; objects
	// SourceObject by "resource namespace name"; candidateReach and
	// candidateOf CandidateReach.
	candidates     map[string][]whatif.CandidateSource
	candidatesErr  error
	objects        map[string]runtime.Object
	candidateReach [2]int

	mu             sync.Mutex
	reachCalls     []reachCall
	inheritedCalls []string
	lossCalls      []lossCall
}

// lossCall is one LockedLoss question.
type lossCall struct {
	namespace string
	next      whatif.NamespaceMeta
	assumed   whatif.Assumed
}

var (
	_ admission.LockedSources    = &fakeIndex{}
	_ admission.CandidateIndex   = &fakeIndex{}
	_ admission.LockIndex        = &fakeIndex{}
	_ admission.InheritanceIndex = &fakeIndex{}
	_ admission.ReachIndex       = &fakeIndex{}
	_ admission.ParentIndex      = &fakeIndex{}
	_ admission.LossIndex        = &fakeIndex{}
	_ admission.NamespaceIndex   = &fakeIndex{}
	_ admission.ExceptionIndex   = &fakeIndex{}
)

// mirrorOf asks every question of the guards of f; it tells no sync state
// (taken as synced) and no namespace uids (nothing is waited for).
func mirrorOf(f *fakeIndex) admission.Mirror {
	return admission.Mirror{
		Sources: f, Candidates: f, Locks: f, Inheritance: f, Reach: f,
		Parents: f, Losses: f, Namespaces: f, Exceptions: f,
	}
}

// reachCall is one InheritedReach question.
type reachCall struct {
	resource, namespace, name string
	obj                       runtime.Object
}

// InheritedReach implements admission.ReachIndex: reach.
func (f *fakeIndex) InheritedReach(resource, namespace, name string, obj runtime.Object) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reachCalls = append(f.reachCalls, reachCall{resource, namespace, name, obj})
	return f.reach, f.reachErr
}

// DeletionLosers implements admission.LossIndex: losers by namespace.
func (f *fakeIndex) DeletionLosers(namespace string) ([]string, error) {
	return f.losers[namespace], nil
}

// Inherited implements admission.InheritanceIndex.
func (f *fakeIndex) Inherited(resource, namespace, name string) (merge.Result, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := resource + " " + namespace + " " + name
	f.inheritedCalls = append(f.inheritedCalls, key)
	if f.inheritedErr != nil {
		return merge.Result{}, false, f.inheritedErr
	}
	r, ok := f.inherited[key]
	return r, ok, nil
}

// Overlays implements admission.InheritanceIndex: overlays answers it by "resource
// name" of the inherited item.
func (f *fakeIndex) Overlays(resource string, inherited merge.Result, _ map[string]string) bool {
	return f.overlays[resource+" "+inherited.Item.Name]
}

// HasDescendants implements admission.ReachIndex.
func (f *fakeIndex) HasDescendants(namespace string) bool { return f.descendants[namespace] }

// Exists implements admission.ParentIndex.
func (f *fakeIndex) Exists(namespace string) bool {
	_, ok := f.existing[namespace]
	return ok
}

// Terminating implements admission.NamespaceIndex.
func (f *fakeIndex) Terminating(namespace string) bool { return f.terminating[namespace] }

// GoingAway implements admission.ParentIndex.
func (f *fakeIndex) GoingAway(namespace string, _ whatif.Assumed) string {
	if f.terminating[namespace] {
		return namespace
	}
	return f.goingAway[namespace]
}

// GoingAwayBelow implements admission.LockIndex: nothing is.
func (f *fakeIndex) GoingAwayBelow(string, whatif.Assumed) string { return "" }

// IsTenant implements admission.ParentIndex.
func (f *fakeIndex) IsTenant(namespace string) bool { return f.existing[namespace] }

// ParentCycleAssuming implements admission.ParentIndex.
func (f *fakeIndex) ParentCycleAssuming(namespace, parent string, _ whatif.Assumed) []string {
	return f.cycles[namespace+" "+parent]
}

// LockedLossPending implements admission.LossIndex.
func (f *fakeIndex) LockedLossPending(namespace string, next whatif.NamespaceMeta, assumed whatif.Assumed, _ whatif.Pending) ([]whatif.LockedItem, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lossCalls = append(f.lossCalls, lossCall{namespace, next, assumed})
	return f.lost[namespace], f.lossErr
}

func (f *fakeIndex) losses() []lossCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]lossCall(nil), f.lossCalls...)
}

// InheritedAssuming implements admission.InheritanceIndex: as Inherited.
func (f *fakeIndex) InheritedAssuming(resource, namespace, name string, _ whatif.Assumed, _ whatif.Pending) (merge.Result, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.inherited[resource+" "+namespace+" "+name]
	return r, ok, f.inheritedErr
}

// NamespaceMeta implements admission.NamespaceIndex: the fake mirror never shows a
// namespace change, so assumptions last until they expire.
func (f *fakeIndex) NamespaceMeta(string) (whatif.NamespaceMeta, bool) {
	return whatif.NamespaceMeta{}, false
}

// LockedStandIns implements admission.LossIndex: standIns answers it by
// namespace.
func (f *fakeIndex) LockedStandIns(namespace string, _ whatif.NamespaceMeta, _ whatif.Assumed, _ []string, _ whatif.Pending) ([]whatif.LockedItem, error) {
	return f.standIns[namespace], nil
}

// ObjectsUnderLock implements admission.LockIndex: no namespace holds one.
func (f *fakeIndex) ObjectsUnderLock(string, string, string, *unstructured.Unstructured, whatif.Assumed, []string) ([]string, error) {
	return nil, nil
}

// LockedUnderLock implements admission.LockIndex: nothing is displaced.
func (f *fakeIndex) LockedUnderLock(string, string, string, *unstructured.Unstructured, whatif.Assumed, whatif.Pending) ([]whatif.LockedItem, error) {
	return nil, nil
}

// DeletionLoss implements admission.LossIndex: lost answers it too.
func (f *fakeIndex) DeletionLoss(namespace string, _ whatif.Assumed) ([]whatif.LockedItem, error) {
	return f.lost[namespace], f.lossErr
}

// SourceLocked implements admission.LockedSources.
func (f *fakeIndex) SourceLocked(resource, namespace, name string) (bool, error) {
	return f.locked[resource+" "+namespace+" "+name], f.lockedErr
}

// Candidates implements admission.CandidateIndex.
func (f *fakeIndex) Candidates(resource, namespace string) ([]whatif.CandidateSource, error) {
	return f.candidates[resource+" "+namespace], f.candidatesErr
}

// SourceObject implements admission.CandidateIndex.
func (f *fakeIndex) SourceObject(resource, namespace, name string) (any, bool, error) {
	o, ok := f.objects[resource+" "+namespace+" "+name]
	return o, ok, nil
}

// CandidateReach implements admission.CandidateIndex.
func (f *fakeIndex) CandidateReach(string, string, *unstructured.Unstructured, *merge.Candidate) (int, int, error) {
	return f.candidateReach[0], f.candidateReach[1], f.reachErr
}

// answer is the fake authorizer's answer to one question.
type answer struct {
	allowed bool
	reason  string
	err     error
}

// sar is one question the fake authorizer was asked.
type sar struct {
	user  authenticationv1.UserInfo
	attrs authorizationv1.ResourceAttributes
}

// fakeAuthorizer answers from a table; what it is not told, it denies.
type fakeAuthorizer struct {
	answers map[authorizationv1.ResourceAttributes]answer

	mu    sync.Mutex
	calls []sar
}

var _ admission.Authorizer = &fakeAuthorizer{}

// Allowed implements admission.Authorizer.
func (f *fakeAuthorizer) Allowed(_ context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, sar{user, attrs})
	a, ok := f.answers[attrs]
	if !ok {
		return false, "", nil
	}
	return a.allowed, a.reason, a.err
}

func (f *fakeAuthorizer) asked() []sar {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sar(nil), f.calls...)
}

// alice is the requester of every test review.
var alice = authenticationv1.UserInfo{
	Username: "alice",
	UID:      "uid-alice",
	Groups:   []string{"team-a-admins", "system:authenticated"},
	Extra:    map[string]authenticationv1.ExtraValue{"scopes.example.com": {"read", "write"}},
}

// unlock is the SubjectAccessReview the lock guard asks for on a source.
func unlock(gr schema.GroupResource, namespace, name string) authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Verb: admission.UnlockVerb, Group: gr.Group, Resource: gr.Resource, Namespace: namespace, Name: name}
}

// updateNamespace is the SubjectAccessReview the parent guard asks for.
func updateNamespace(name string) authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Verb: "update", Resource: "namespaces", Namespace: name, Name: name}
}

// objOpt decorates a test source object; isLocked is internal/testfixture's
// Locked.
type objOpt = testfixture.ObjectOpt

var isLocked = testfixture.Locked

func annotated(k, v string) objOpt {
	return func(m *metav1.ObjectMeta) { m.Annotations[k] = v }
}

// The objects as kube-apiserver sends them to a webhook (testfixture).
var (
	objectMeta    = testfixture.AdmittedMeta
	roleBinding   = testfixture.AdmittedRoleBinding
	role          = testfixture.AdmittedRole
	networkPolicy = testfixture.AdmittedNetworkPolicy
)

// ns returns the test Namespace as kube-apiserver sends it to a webhook,
// with the parent label when parent is set.
func ns(name, parent string, opts ...nsOpt) *corev1.Namespace {
	if parent != "" {
		opts = append([]nsOpt{testfixture.Parent(parent)}, opts...)
	}
	n := testfixture.Namespace(name, opts...)
	n.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}
	if len(n.Annotations) == 0 {
		// A namespace without annotations has none in a review: a patch
		// adds the map, not a key.
		n.Annotations = nil
	}
	return n
}

// Namespace builders, shared with the other packages' tests.
type nsOpt = testfixture.NamespaceOpt

var (
	nsUID     = testfixture.NamespaceUID
	recorded  = testfixture.Recorded
	noInherit = testfixture.NoInherit
)

// parentUID records uid as the namespace's parent-uid.
func parentUID(uid types.UID) nsOpt { return testfixture.ParentUID(string(uid)) }

// hostNamespaces are the namespaces of the host cluster the parent guards
// read parents from, unless a test says otherwise.
var hostNamespaces = []string{"org", "org2", "team-a", "kube-system", global}

// namespaceClient serves names as namespaces, with nsUID uids.
func namespaceClient(names ...string) admission.NamespaceGetter {
	return hostClient(names, nil, nil)
}

// hostClient is namespaceClient with the deletion of the namespaces
// terminating begun, and the parent labels of parents.
func hostClient(names, terminating []string, parents map[string]string) admission.NamespaceGetter {
	objs := make([]runtime.Object, 0, len(names))
	for _, n := range names {
		var opts []nsOpt
		if slices.Contains(terminating, n) {
			opts = append(opts, deleting)
		}
		objs = append(objs, ns(n, parents[n], opts...))
	}
	return fake.NewClientset(objs...).CoreV1().Namespaces()
}

// deleting marks a namespace Terminating: its deletion has begun.
func deleting(n *corev1.Namespace) {
	n.DeletionTimestamp = &metav1.Time{Time: time.Unix(1700000000, 0)}
	n.Status.Phase = corev1.NamespaceTerminating
}

// request is an admission request for op on an object of gr; old and obj
// may be nil (for CREATE and DELETE).
func request(op admissionv1.Operation, gr schema.GroupResource, namespace, name string, old, obj runtime.Object) *admissionv1.AdmissionRequest {
	gvr := metav1.GroupVersionResource{Group: gr.Group, Version: "v1", Resource: gr.Resource}
	return &admissionv1.AdmissionRequest{
		UID:             types.UID("req-" + string(op) + "-" + name),
		Resource:        gvr,
		RequestResource: &gvr,
		Name:            name,
		Namespace:       namespace,
		Operation:       op,
		UserInfo:        alice,
		Object:          raw(obj),
		OldObject:       raw(old),
	}
}

// sub makes req a request of subresource.
func sub(req *admissionv1.AdmissionRequest, subresource string) *admissionv1.AdmissionRequest {
	req.SubResource = subresource
	return req
}

// scale is the Scale kube-apiserver sends for a scale subresource request:
// the source's name and namespace, none of its annotations.
func scale(namespace, name string, replicas int32) *autoscalingv1.Scale {
	return &autoscalingv1.Scale{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name)},
		Spec:       autoscalingv1.ScaleSpec{Replicas: replicas},
	}
}

func raw(obj runtime.Object) runtime.RawExtension {
	if obj == nil {
		return runtime.RawExtension{}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return runtime.RawExtension{Raw: b}
}

// reviewJSON is req in an admission.k8s.io/v1 AdmissionReview, as
// kube-apiserver posts it.
func reviewJSON(t testing.TB, req *admissionv1.AdmissionRequest) []byte {
	t.Helper()
	b, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	if err != nil {
		t.Fatalf("encoding the AdmissionReview: %v", err)
	}
	return b
}

// post posts body to the guard at path and returns the recorded response.
func post(t testing.TB, g *admission.Guards, path string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	g.Handler(path).ServeHTTP(w, r)
	return w
}

// review posts req to the guard at path and decodes its answer, failing the
// test unless it is an HTTP 200 AdmissionReview for req. It returns nil and
// the status when the guard answered with another status.
func review(t testing.TB, g *admission.Guards, path string, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, int) {
	t.Helper()
	w := post(t, g, path, reviewJSON(t, req))
	if w.Code != http.StatusOK {
		return nil, w.Code
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("decoding the answer %q: %v", w.Body.String(), err)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" {
		t.Errorf("answer is a %s %s, want admission.k8s.io/v1 AdmissionReview", out.APIVersion, out.Kind)
	}
	if out.Response == nil {
		t.Fatalf("answer %q has no response", w.Body.String())
	}
	if out.Response.UID != req.UID {
		t.Errorf("response UID = %q, want the request's %q", out.Response.UID, req.UID)
	}
	return out.Response, w.Code
}

var errBoom = errors.New("boom")

// mustRefuse fails t unless resp refuses (admitted says what an admission
// lets through) with a message naming naming, and logs the refusal.
func mustRefuse(t *testing.T, resp *admissionv1.AdmissionResponse, naming, admitted string) {
	t.Helper()
	if resp == nil {
		t.Fatal("no answer")
	}
	if resp.Allowed {
		t.Fatal(admitted)
	}
	if !strings.Contains(resp.Result.Message, naming) {
		t.Errorf("the refusal does not name %s: %s", naming, resp.Result.Message)
	}
	t.Logf("refused: %s", resp.Result.Message)
}
