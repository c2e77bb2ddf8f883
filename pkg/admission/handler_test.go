package admission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
)

func TestHandlerRejectsWhatIsNotAReview(t *testing.T) {
	t.Parallel()
	valid := reviewJSON(t, request(admissionv1.Update, rolebindings, global, "admins", roleBinding(global, "admins"), roleBinding(global, "admins")))
	tests := []struct {
		name       string
		method     string
		body       []byte
		wantStatus int
	}{
		{name: "GET", method: http.MethodGet, body: valid, wantStatus: http.StatusMethodNotAllowed},
		{name: "PUT", method: http.MethodPut, body: valid, wantStatus: http.StatusMethodNotAllowed},
		{name: "bad JSON", method: http.MethodPost, body: []byte(`{"apiVersion":`), wantStatus: http.StatusBadRequest},
		{name: "not an object", method: http.MethodPost, body: []byte(`"review"`), wantStatus: http.StatusBadRequest},
		{name: "missing request", method: http.MethodPost, body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), wantStatus: http.StatusBadRequest},
		{name: "empty body", method: http.MethodPost, body: nil, wantStatus: http.StatusBadRequest},
		{name: "too large", method: http.MethodPost, body: append(append([]byte(`{"request":{"uid":"`), bytes.Repeat([]byte("x"), 6<<20)...), `"}}`...), wantStatus: http.StatusBadRequest},
		{name: "valid", method: http.MethodPost, body: valid, wantStatus: http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := admission.NewGuards(admission.Config{Mirror: mirrorOf(&fakeIndex{}), Authorizer: &fakeAuthorizer{}, Served: served, GlobalNamespaces: []string{global}})
			for _, path := range webhookconfig.Paths {
				r := httptest.NewRequest(tc.method, path, bytes.NewReader(tc.body))
				w := httptest.NewRecorder()
				g.Handler(path).ServeHTTP(w, r)
				if w.Code != tc.wantStatus {
					t.Errorf("%s %s: status %d (%q), want %d", tc.method, path, w.Code, w.Body.String(), tc.wantStatus)
				}
			}
		})
	}
}

func TestHandlerEchoesTheReview(t *testing.T) {
	t.Parallel()
	req := request(admissionv1.Update, rolebindings, global, "admins", roleBinding(global, "admins"), roleBinding(global, "admins"))
	tests := []struct {
		name string
		body []byte
	}{
		{name: "v1 review", body: reviewJSON(t, req)},
		{name: "review without apiVersion and kind", body: func() []byte {
			b, err := json.Marshal(&admissionv1.AdmissionReview{Request: req})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := admission.NewGuards(admission.Config{Mirror: mirrorOf(&fakeIndex{}), Authorizer: &fakeAuthorizer{}, Served: served, GlobalNamespaces: []string{global}})
			for _, path := range webhookconfig.Paths {
				w := post(t, g, path, tc.body)
				if w.Code != http.StatusOK {
					t.Fatalf("%s: status %d (%q)", path, w.Code, w.Body.String())
				}
				var out admissionv1.AdmissionReview
				if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
					t.Fatalf("%s: decoding %q: %v", path, w.Body.String(), err)
				}
				if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" {
					t.Errorf("%s: answer is %q %q, want admission.k8s.io/v1 AdmissionReview", path, out.APIVersion, out.Kind)
				}
				if out.Request != nil {
					t.Errorf("%s: answer carries the request back", path)
				}
				if out.Response == nil || out.Response.UID != req.UID || !out.Response.Allowed {
					t.Errorf("%s: response %+v, want allowed with UID %q", path, out.Response, req.UID)
				}
			}
		})
	}
}

// TestHandlerOverHTTP posts a review to a real HTTP server, as
// kube-apiserver does.
func TestHandlerOverHTTP(t *testing.T) {
	t.Parallel()
	authz := &fakeAuthorizer{}
	g := admission.NewGuards(admission.Config{Mirror: mirrorOf(&fakeIndex{}), Authorizer: authz, Served: served, GlobalNamespaces: []string{global}})
	mux := http.NewServeMux()
	for _, p := range webhookconfig.Paths {
		mux.Handle(p, g.Handler(p))
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	req := request(admissionv1.Delete, rolebindings, global, "admins", roleBinding(global, "admins", isLocked), nil)
	resp, err := srv.Client().Post(srv.URL+webhookconfig.PathLocks, "application/json", bytes.NewReader(reviewJSON(t, req)))
	if err != nil {
		t.Fatalf("posting the review: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("decoding the answer: %v", err)
	}
	if out.Response == nil || out.Response.Allowed || out.Response.UID != req.UID || out.Response.Result == nil || out.Response.Result.Code != http.StatusForbidden {
		t.Fatalf("response %+v, want a 403 denial of %q", out.Response, req.UID)
	}
	if len(authz.asked()) != 1 {
		t.Errorf("authorizer asked %d times, want once", len(authz.asked()))
	}
}

func TestUndecodableObjectIsDenied(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		path string
		req  func() *admissionv1.AdmissionRequest
	}{
		{name: "locks, object", path: webhookconfig.PathLocks, req: func() *admissionv1.AdmissionRequest {
			r := request(admissionv1.Update, rolebindings, global, "admins", roleBinding(global, "admins"), nil)
			r.Object = runtime.RawExtension{Raw: []byte(`"not an object"`)}
			return r
		}},
		{name: "locks, old object", path: webhookconfig.PathLocks, req: func() *admissionv1.AdmissionRequest {
			r := request(admissionv1.Update, rolebindings, global, "admins", nil, roleBinding(global, "admins"))
			r.OldObject = runtime.RawExtension{Raw: []byte(`[1]`)}
			return r
		}},
		{name: "shadows", path: webhookconfig.PathShadows, req: func() *admissionv1.AdmissionRequest {
			r := request(admissionv1.Create, rolebindings, "team-a", "admins", nil, nil)
			r.Object = runtime.RawExtension{Raw: []byte(`42`)}
			return r
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := admission.NewGuards(admission.Config{Mirror: mirrorOf(&fakeIndex{}), Authorizer: &fakeAuthorizer{}, Served: served, GlobalNamespaces: []string{global}})
			resp, status := review(t, g, tc.path, tc.req())
			if status != http.StatusOK {
				t.Fatalf("status %d, want 200", status)
			}
			if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "decoding") {
				t.Errorf("response %+v, want a denial about decoding", resp)
			}
		})
	}
}

func TestSARAuthorizer(t *testing.T) {
	t.Parallel()
	attrs := unlock(rolebindings, global, "admins")
	tests := []struct {
		name        string
		allowed     bool
		reason      string
		err         error
		wantAllowed bool
		wantErr     bool
	}{
		{name: "allowed", allowed: true, reason: "RBAC: allowed by RoleBinding x", wantAllowed: true},
		{name: "denied", reason: "no binding"},
		{name: "error", err: errBoom, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			client := fake.NewClientset()
			var got *authorizationv1.SubjectAccessReview
			client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
				got = a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
				if tc.err != nil {
					return true, nil, tc.err
				}
				out := got.DeepCopy()
				out.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: tc.allowed, Reason: tc.reason}
				return true, out, nil
			})
			a := admission.SARAuthorizer{Client: client.AuthorizationV1().SubjectAccessReviews()}
			allowed, reason, err := a.Allowed(context.Background(), alice, attrs)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if allowed != tc.wantAllowed || (!tc.wantErr && reason != tc.reason) {
				t.Errorf("Allowed = %v %q, want %v %q", allowed, reason, tc.wantAllowed, tc.reason)
			}
			if got == nil {
				t.Fatalf("no SubjectAccessReview created")
			}
			want := authorizationv1.SubjectAccessReviewSpec{
				ResourceAttributes: &attrs,
				User:               alice.Username,
				Groups:             alice.Groups,
				UID:                alice.UID,
				Extra:              map[string]authorizationv1.ExtraValue{"scopes.example.com": {"read", "write"}},
			}
			if !reflect.DeepEqual(got.Spec, want) {
				t.Errorf("SubjectAccessReview spec\n%+v\nwant\n%+v", got.Spec, want)
			}
		})
	}
}

func TestSARAuthorizerWithoutClient(t *testing.T) {
	t.Parallel()
	allowed, _, err := admission.SARAuthorizer{}.Allowed(context.Background(), alice, unlock(rolebindings, global, "admins"))
	if err == nil || allowed {
		t.Errorf("Allowed without a client = %v, %v; want an error", allowed, err)
	}
}

// TestGuardsWaitForSync: until the mirror holds every namespace and
// source, every guard answers 503 (the webhook's failure policy applies)
// instead of deciding from an empty mirror; once synced, the same review is
// decided.
func TestGuardsWaitForSync(t *testing.T) {
	t.Parallel()
	req := request(admissionv1.Update, rolebindings, global, "admins", roleBinding(global, "admins"), roleBinding(global, "admins"))
	body := reviewJSON(t, req)
	for _, tc := range []struct {
		name   string
		synced bool
		want   int
	}{
		{name: "before sync", synced: false, want: http.StatusServiceUnavailable},
		{name: "synced", synced: true, want: http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := muxOf(t, tc.synced, with())
			g := admission.NewGuards(admission.Config{Mirror: admission.MirrorOf(m.Index), Authorizer: &fakeAuthorizer{}, Served: served, GlobalNamespaces: []string{global}})
			for _, path := range webhookconfig.Paths {
				w := post(t, g, path, body)
				if w.Code != tc.want {
					t.Errorf("%s: status %d (%q), want %d", path, w.Code, w.Body.String(), tc.want)
				}
				if tc.want == http.StatusServiceUnavailable && !strings.Contains(w.Body.String(), "not read every namespace and source yet") {
					t.Errorf("%s: body %q does not say why", path, w.Body.String())
				}
			}
		})
	}
}
