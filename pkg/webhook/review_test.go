package webhook_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/webhook"
)

var sarType = webhook.Type{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview", MaxBytes: 100}

// echo answers a decoded SubjectAccessReview with itself, allowed.
func echo(w http.ResponseWriter, r *http.Request) {
	var sar authorizationv1.SubjectAccessReview
	if !sarType.Decode(w, r, &sar) {
		return
	}
	sar.Status.Allowed = true
	if err := sarType.Write(w, &sar); err != nil {
		panic(err)
	}
}

func TestType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		method     string
		body       string
		wantCode   int
		wantBody   string
		wantHeader string
	}{
		{name: "not a POST", method: http.MethodGet, wantCode: http.StatusMethodNotAllowed,
			wantBody: "POST an authorization.k8s.io/v1 SubjectAccessReview"},
		{name: "too large", method: http.MethodPost, body: `{"spec":{"user":"` + strings.Repeat("a", 100) + `"}}`,
			wantCode: http.StatusBadRequest, wantBody: "reading the SubjectAccessReview failed or it is too large"},
		{name: "not JSON", method: http.MethodPost, body: `{`, wantCode: http.StatusBadRequest,
			wantBody: "not an authorization.k8s.io/v1 SubjectAccessReview: "},
		{name: "no apiVersion: the review's", method: http.MethodPost, body: `{"spec":{"user":"alice"}}`,
			wantCode: http.StatusOK, wantHeader: "application/json",
			wantBody: `{"kind":"SubjectAccessReview","apiVersion":"authorization.k8s.io/v1","metadata":{},"spec":{"user":"alice"},"status":{"allowed":true}}`},
		{name: "the request's apiVersion kept", method: http.MethodPost, body: `{"apiVersion":"authorization.k8s.io/v1beta1","kind":"SubjectAccessReview"}`,
			wantCode: http.StatusOK, wantHeader: "application/json",
			wantBody: `{"kind":"SubjectAccessReview","apiVersion":"authorization.k8s.io/v1beta1","metadata":{},"spec":{},"status":{"allowed":true}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			echo(rec, httptest.NewRequest(tc.method, "/authorize", strings.NewReader(tc.body)))
			if rec.Code != tc.wantCode {
				t.Fatalf("code %d, want %d: %s", rec.Code, tc.wantCode, rec.Body)
			}
			got := strings.TrimSpace(rec.Body.String())
			if tc.wantCode != http.StatusOK {
				if !strings.HasPrefix(got, tc.wantBody) {
					t.Errorf("body %q, want it to start with %q", got, tc.wantBody)
				}
				return
			}
			if got != tc.wantBody {
				t.Errorf("body\n%s\nwant\n%s", got, tc.wantBody)
			}
			if h := rec.Header().Get("Content-Type"); h != tc.wantHeader {
				t.Errorf("Content-Type %q, want %q", h, tc.wantHeader)
			}
			var sar authorizationv1.SubjectAccessReview
			if err := json.Unmarshal(rec.Body.Bytes(), &sar); err != nil {
				t.Errorf("the answer is no SubjectAccessReview: %v", err)
			}
		})
	}
}
