package servedgroup

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// fakeViewer serves one RoleBinding, team-a/org-viewers, inherited from the
// global namespace. Rejecting a write only ever calls Get; the embedded nil
// Viewer stands for the rest of the interface and panics if reached.
type fakeViewer struct{ registry.Viewer }

func (fakeViewer) item() *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{
		Namespace: "team-a", Name: "org-viewers",
		Labels: map[string]string{v1alpha1.LabelSourceNamespace: "implicit-global"},
	}}
}

// Get implements registry.Viewer.
func (f fakeViewer) Get(_ context.Context, namespace, name string) (runtime.Object, error) {
	if it := f.item(); namespace == it.Namespace && name == it.Name {
		return it, nil
	}
	return nil, apierrors.NewNotFound(rbacv1.Resource("rolebindings"), name)
}

// recorder is the next handler: it counts the requests it is given.
type recorder struct {
	mu    sync.Mutex
	calls int
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	r.calls++
	r.mu.Unlock()
	w.WriteHeader(http.StatusTeapot)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

func viewRequest(verb, group, resource, subresource, namespace, name string) *genericapirequest.RequestInfo {
	return &genericapirequest.RequestInfo{
		IsResourceRequest: true,
		Verb:              verb,
		APIGroup:          group,
		APIVersion:        "v1alpha1",
		Namespace:         namespace,
		Resource:          resource,
		Subresource:       subresource,
		Name:              name,
	}
}

func TestReadOnly(t *testing.T) {
	t.Parallel()
	scheme := NewScheme(kinds.BuiltIns())
	codecs := NewCodecs(scheme)
	views := map[string]*registry.Storage{
		"rolebindings": registry.NewStorage(GroupName, kinds.RoleBindings(), fakeViewer{}),
	}
	const methodNotAllowed = http.StatusMethodNotAllowed

	tests := []struct {
		name string
		// info is nil for a request without request info.
		info *genericapirequest.RequestInfo
		// wantCode is the status; http.StatusTeapot when the request passes through.
		wantCode int
		// wantMsg are substrings of the Status message of a rejection.
		wantMsg []string
	}{
		{name: "get passes", info: viewRequest("get", GroupName, "rolebindings", "", "team-a", "org-viewers"), wantCode: http.StatusTeapot},
		{name: "list passes", info: viewRequest("list", GroupName, "rolebindings", "", "team-a", ""), wantCode: http.StatusTeapot},
		{name: "list of all namespaces passes", info: viewRequest("list", GroupName, "rolebindings", "", "", ""), wantCode: http.StatusTeapot},
		{name: "watch passes", info: viewRequest("watch", GroupName, "rolebindings", "", "team-a", ""), wantCode: http.StatusTeapot},
		{
			name: "create is refused", info: viewRequest("create", GroupName, "rolebindings", "", "team-a", ""),
			wantCode: methodNotAllowed, wantMsg: []string{"rolebindings.implicit.dev is a read-only view", "create is not supported", `namespace "team-a"`},
		},
		{
			name: "update of an inherited item names its source", info: viewRequest("update", GroupName, "rolebindings", "", "team-a", "org-viewers"),
			wantCode: methodNotAllowed, wantMsg: []string{"read-only view", "update is not supported", `"org-viewers" in namespace "implicit-global"`},
		},
		{
			name: "patch is refused", info: viewRequest("patch", GroupName, "rolebindings", "", "team-a", "missing"),
			wantCode: methodNotAllowed, wantMsg: []string{"read-only view", "patch is not supported"},
		},
		{
			name: "delete is refused", info: viewRequest("delete", GroupName, "rolebindings", "", "team-a", "org-viewers"),
			wantCode: methodNotAllowed, wantMsg: []string{"read-only view", "delete is not supported"},
		},
		{
			name: "deletecollection is refused", info: viewRequest("deletecollection", GroupName, "rolebindings", "", "team-a", ""),
			wantCode: methodNotAllowed, wantMsg: []string{"read-only view", "deletecollection is not supported"},
		},
		{
			name: "deletecollection across namespaces is refused", info: viewRequest("deletecollection", GroupName, "rolebindings", "", "", ""),
			wantCode: methodNotAllowed, wantMsg: []string{"read-only view", "edit the source rolebindings.rbac.authorization.k8s.io instead"},
		},
		{name: "write in another group passes", info: viewRequest("create", rbacv1.GroupName, "rolebindings", "", "team-a", ""), wantCode: http.StatusTeapot},
		{name: "write in the core group passes", info: viewRequest("delete", "", "rolebindings", "", "team-a", "x"), wantCode: http.StatusTeapot},
		{name: "write on an unknown resource passes", info: viewRequest("create", GroupName, "widgets", "", "team-a", ""), wantCode: http.StatusTeapot},
		{name: "write on a subresource passes", info: viewRequest("update", GroupName, "rolebindings", "status", "team-a", "org-viewers"), wantCode: http.StatusTeapot},
		{
			name:     "non-resource request passes",
			info:     &genericapirequest.RequestInfo{IsResourceRequest: false, Verb: "post", Path: "/apis/implicit.dev/v1alpha1/rolebindings"},
			wantCode: http.StatusTeapot,
		},
		{name: "request without request info passes", wantCode: http.StatusTeapot},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			next := &recorder{}
			h := readOnly(next, func(r string) (Storage, bool) { s, ok := views[r]; return s, ok }, codecs)
			req := httptest.NewRequest(http.MethodPost, "/apis/implicit.dev/v1alpha1/namespaces/team-a/rolebindings", nil)
			if tc.info != nil {
				req = req.WithContext(genericapirequest.WithRequestInfo(req.Context(), tc.info))
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)

			if w.Code != tc.wantCode {
				t.Fatalf("status = %d, want %d; body %s", w.Code, tc.wantCode, w.Body)
			}
			if tc.wantCode == http.StatusTeapot {
				if next.count() != 1 {
					t.Errorf("next handler called %d times, want once", next.count())
				}
				return
			}
			if next.count() != 0 {
				t.Errorf("next handler called %d times for a refused write", next.count())
			}
			if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			var st metav1.Status
			if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
				t.Fatalf("body is not a Status: %v: %s", err, w.Body)
			}
			if st.Kind != "Status" || st.Code != http.StatusMethodNotAllowed || st.Reason != metav1.StatusReasonMethodNotAllowed || st.Status != metav1.StatusFailure {
				t.Errorf("Status = kind %q code %d reason %q status %q, want a 405 MethodNotAllowed Failure", st.Kind, st.Code, st.Reason, st.Status)
			}
			for _, want := range tc.wantMsg {
				if !strings.Contains(st.Message, want) {
					t.Errorf("message %q does not contain %q", st.Message, want)
				}
			}
		})
	}
}
