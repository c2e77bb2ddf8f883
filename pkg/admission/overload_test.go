package admission_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/accessreview"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
)

// TestAccessReviewCap: a namespace opt-out that would need more unlock
// access reviews than one request may ask is refused, saying so, after
// asking the host no more than the cap; within the cap the same opt-out is
// decided as before (refused, naming the locked items).
func TestAccessReviewCap(t *testing.T) {
	t.Parallel()
	lost := make([]whatif.LockedItem, 12)
	for i := range lost {
		lost[i] = whatif.LockedItem{Resource: "rolebindings", Namespace: global, Name: fmt.Sprintf("rb-%02d", i), Viewers: []string{"team-a"}}
	}
	tests := []struct {
		name        string
		cap         int
		wantMessage string
		wantAsked   int
	}{
		// Twice each: denials are never cached, so both reviews ask.
		{name: "past the cap", cap: 5, wantMessage: "more permission checks than one request may ask", wantAsked: 10},
		{name: "within the cap", cap: 13, wantMessage: "rb-09", wantAsked: 26},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			index := &fakeIndex{existing: map[string]bool{"team-a": true}, lost: map[string][]whatif.LockedItem{"team-a": lost}}
			host := &fakeAuthorizer{}
			g := admission.NewGuards(admission.Config{Mirror: mirrorOf(index), Authorizer: accessreview.New(host, accessreview.Options{PerAdmission: tc.cap}), Served: served, GlobalNamespaces: []string{global}})
			// Twice: the second review counts against its own cap.
			for range 2 {
				resp, status := review(t, g, webhookconfig.PathParents, request(admissionv1.Update, nsGR, "", "team-a", ns("team-a", ""), ns("team-a", "", noInherit)))
				if status != http.StatusOK {
					t.Fatalf("status %d, want 200", status)
				}
				if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusForbidden || !strings.Contains(resp.Result.Message, tc.wantMessage) {
					t.Errorf("response %+v, want a denial (403) saying %q", resp.Result, tc.wantMessage)
				}
			}
			if n := len(host.asked()); n != tc.wantAsked {
				t.Errorf("the host was asked %d access reviews, want %d", n, tc.wantAsked)
			}
		})
	}
}

// TestOverloadRefused: a requester with too many access reviews waiting is
// refused with 429 and a message, not left to the failure policy (503);
// other errors still are.
func TestOverloadRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantCode   int32
	}{
		{name: "too many waiting", err: fmt.Errorf("%w: 64 of user:alice", accessreview.ErrTooManyWaiting), wantStatus: http.StatusOK, wantCode: http.StatusTooManyRequests},
		{name: "another error", err: errBoom, wantStatus: http.StatusServiceUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			index := &fakeIndex{}
			attrs := unlock(rolebindings, global, "admins")
			host := &fakeAuthorizer{answers: map[authorizationv1.ResourceAttributes]answer{attrs: {err: tc.err}}}
			g := admission.NewGuards(admission.Config{Mirror: mirrorOf(index), Authorizer: host, Served: served, GlobalNamespaces: []string{global}})
			req := request(admissionv1.Update, rolebindings, global, "admins", roleBinding(global, "admins", isLocked), roleBinding(global, "admins", isLocked))
			resp, status := review(t, g, webhookconfig.PathLocks, req)
			if status != tc.wantStatus {
				t.Fatalf("status %d, want %d", status, tc.wantStatus)
			}
			if tc.wantCode != 0 && (resp.Allowed || resp.Result == nil || resp.Result.Code != tc.wantCode || !strings.Contains(resp.Result.Message, "retry later")) {
				t.Errorf("response %+v, want a denial (%d) asking to retry later", resp.Result, tc.wantCode)
			}
		})
	}
}
