package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// policiesServer answers PolicyReviews in team-a with one policy, two
// bindings (one with an inherited, overlaid parameter, one exempt), and
// none in team-b.
func policiesServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/policyreviews") {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var pr v1alpha1.PolicyReview
		_ = json.Unmarshal(b, &pr)
		if strings.HasSuffix(r.URL.Path, "/namespaces/team-a/policyreviews") {
			pr.Namespace = "team-a"
			pr.Status.Policies = []v1alpha1.ReviewedPolicy{{
				Kind: v1alpha1.KindValidatingAdmissionPolicy, Name: "replica-limit", ParamResource: "configmaps",
				Bindings: []v1alpha1.ReviewedBinding{
					{Name: "replica-limit-audit", Action: "Audit,Warn", ParamName: "limits", ParamNamespace: "team-a",
						Params: []v1alpha1.PolicyParam{{Name: "limits", Scope: "parent", Namespace: "org", Overlays: []string{"team-a/limits"}}}},
					{Name: "replica-limit-extra", Action: "exempt", ParamName: "extra", ParamNamespace: "team-a"},
					{Name: "replica-limit-org", ParamName: "limits", ParamNamespace: "org", Problem: `the parameter is read in the namespace "org", whose configmaps you may not list`},
				},
			}}
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(pr)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestPolicies: policies -n NS prints a row per binding and inherited
// parameter, with its action and source; -o yaml prints the PolicyReview.
func TestPolicies(t *testing.T) {
	t.Parallel()
	flags := serverFlags(t, policiesServer(t))
	code, out, errOut := runPlugin(t, append(flags, "policies", "-n", "team-a")...)
	if code != exitOK {
		t.Fatalf("policies: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`(?m)^POLICY\s+KIND\s+BINDING\s+ACTION\s+PARAM\s+SOURCE$`,
		`(?m)^replica-limit\s+Validating\s+replica-limit-audit\s+Audit,Warn\s+configmaps/limits\s+parent org \+ overlays team-a/limits$`,
		`(?m)^replica-limit\s+Validating\s+replica-limit-extra\s+exempt\s+configmaps/extra\s+<none>$`,
		`(?m)^replica-limit\s+Validating\s+replica-limit-org\s+<unknown>\s+configmaps/limits\s+<none>$`,
		`(?m)^replica-limit replica-limit-org: the parameter is read in the namespace "org", whose configmaps you may not list$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("policies lacks %s:\n%s", want, out)
		}
	}
	code, out, errOut = runPlugin(t, append(flags, "policies", "-n", "team-a", "-o", "yaml")...)
	if code != exitOK || !strings.Contains(out, "kind: PolicyReview") || !strings.Contains(out, "action: Audit,Warn") || !strings.Contains(out, "name: team-a") {
		t.Errorf("policies -o yaml: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runPlugin(t, append(flags, "policies", "-n", "team-b")...)
	if code != exitOK || !strings.Contains(out, "No admission policy") {
		t.Errorf("policies -n team-b: exit %d\n%s", code, out)
	}
}
