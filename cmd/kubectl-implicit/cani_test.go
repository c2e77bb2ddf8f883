package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// canIServer answers SelfSubjectRulesReviews, RulesReviews and
// SelfSubjectAccessReviews: dana holds view locally, inherits admin from
// org, and may create rolebindings through it.
func canIServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var out any
		switch {
		case strings.HasSuffix(r.URL.Path, "/selfsubjectrulesreviews"):
			var rr authorizationv1.SelfSubjectRulesReview
			if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, &rr); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			rr.Status = authorizationv1.SubjectRulesReviewStatus{
				ResourceRules: []authorizationv1.ResourceRule{
					{Verbs: []string{"list", "get"}, APIGroups: []string{""}, Resources: []string{"pods"}},
					{Verbs: []string{"get", "watch"}, APIGroups: []string{""}, Resources: []string{"pods"}},
				},
				NonResourceRules: []authorizationv1.NonResourceRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}},
				Incomplete:       true, EvaluationError: "webhook authorizer does not support user rule resolution",
			}
			out = rr
		case strings.HasSuffix(r.URL.Path, "/namespaces/team-a/rulesreviews"):
			var rr v1alpha1.RulesReview
			_ = json.Unmarshal(b, &rr)
			rr.Status = v1alpha1.RulesReviewStatus{User: "dana", Rules: []v1alpha1.InheritedRule{{
				Verbs: []string{"create", "delete"}, APIGroups: []string{"rbac.authorization.k8s.io", "apps"}, Resources: []string{"rolebindings", "deployments/scale"},
				Binding: v1alpha1.ItemReference{Namespace: "org", Name: "platform-admins", Scope: "parent"},
				Role:    v1alpha1.RoleReference{Kind: "ClusterRole", Name: "admin"},
			}}}
			out = rr
		case strings.HasSuffix(r.URL.Path, "/selfsubjectaccessreviews"):
			// client-go may send built-in kinds as protobuf.
			var sar authorizationv1.SelfSubjectAccessReview
			if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, &sar); err != nil || sar.Spec.ResourceAttributes == nil {
				http.Error(w, fmt.Sprintf("not a SelfSubjectAccessReview: %v", err), http.StatusBadRequest)
				return
			}
			switch a := sar.Spec.ResourceAttributes; {
			case a.Verb == "create" && a.Resource == "rolebindings":
				sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true,
					Reason: `implicit.dev: RoleBinding "platform-admins" inherited from namespace "org" (parent) grants ClusterRole admin`}
			case a.Verb == "get" && a.Resource == "pods":
				sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: `RBAC: allowed by RoleBinding "view/team-a"`}
			}
			out = sar
		default:
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestCanI: can-i --list prints kube-apiserver's rules and the inherited
// ones in one table, each with its source; can-i VERB RESOURCE answers yes
// with the inherited binding or local RBAC, or no with exit 1.
func TestCanI(t *testing.T) {
	t.Parallel()
	flags := serverFlags(t, canIServer(t))
	code, out, errOut := runPlugin(t, append(flags, "can-i", "--list", "-n", "team-a")...)
	if code != exitOK {
		t.Fatalf("can-i --list: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`(?m)^RESOURCES\s+NON-RESOURCE URLS\s+RESOURCE NAMES\s+VERBS\s+SOURCE$`,
		`(?m)^pods\s+\[\]\s+\[\]\s+\[get list watch\]\s+rbac$`,
		`(?m)^deployments\.apps/scale\s+\[\]\s+\[\]\s+\[create delete\]\s+inherited from parent org/platform-admins$`,
		`(?m)^<none>\s+\[/healthz\]\s+\[\]\s+\[get\]\s+rbac\n*$`,
		`(?m)^rolebindings\.rbac\.authorization\.k8s\.io\s+\[\]\s+\[\]\s+\[create delete\]\s+inherited from parent org/platform-admins$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("can-i --list lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "incomplete") {
		t.Errorf("the webhook's missing rule resolution is reported as incomplete: the inherited rules are listed:\n%s", out)
	}

	code, out, errOut = runPlugin(t, append(flags, "can-i", "--list", "-n", "team-a", "-o", "name")...)
	if code != exitOK || !strings.Contains(out, "rulesreview.implicit.dev/team-a") || !strings.Contains(out, "selfsubjectrulesreview.authorization.k8s.io/team-a") {
		t.Errorf("can-i --list -o name: exit %d\n%s%s", code, out, errOut)
	}

	for _, tc := range []struct {
		args     []string
		wantCode int
		want     string
	}{
		{[]string{"create", "rolebindings"}, exitOK, "yes\ninherited: RoleBinding \"platform-admins\" inherited from namespace \"org\" (parent) grants ClusterRole admin\n"},
		{[]string{"get", "pods", "web"}, exitOK, "yes\nlocal RBAC: allowed by RoleBinding \"view/team-a\"\n"},
		{[]string{"delete", "secrets"}, 1, "no\n"},
	} {
		code, out, errOut := runPlugin(t, append(append(flags, "can-i", "-n", "team-a"), tc.args...)...)
		if code != tc.wantCode || out != tc.want {
			t.Errorf("can-i %v: exit %d, output\n%s%s\nwant exit %d, output\n%s", tc.args, code, out, errOut, tc.wantCode, tc.want)
		}
	}
	if code, _, errOut := runPlugin(t, append(flags, "can-i", "--list", "get", "-n", "team-a")...); code != exitError || !strings.Contains(errOut, "--list takes no arguments") {
		t.Errorf("can-i --list get: exit %d, %s", code, errOut)
	}
}
