package integration

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestRulesReview: "what may I do here?" (issue 26, point 2). A user who
// inherits admin in rr-child from rr-org, as a member of rr:platform-admins,
// runs `kubectl implicit can-i --list -n rr-child` and `kubectl implicit
// can-i create rolebindings -n rr-child` through the real plugin binary and
// sees the inherited rules with their binding and scope; a rules review of
// another user is refused to who may not impersonate them, and answered to
// who may.
func TestRulesReview(t *testing.T) {
	kube, adminDyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	gdNamespace(t, kube, "rr-org", nil, nil)
	gdNamespace(t, kube, "rr-child", map[string]string{"implicit.dev/parent": "rr-org"}, nil)
	gdNamespace(t, kube, "rr-other", nil, nil)

	t.Log("rr:platform-admins are admin of rr-org, inherited in rr-child")
	createRoleBinding(t, kube, "rr-org", "rr-platform-admins", "admin", "rr:platform-admins")
	azWaitViewItem(t, "rolebindings", "rr-child", "rr-platform-admins", "parent", "rr-org", nil)

	t.Log("rulesreviews is in discovery, create-only, and in OpenAPI")
	out, _, err := cp.Kubectl(t.Context(), "api-resources", "--api-group=implicit.dev", "-o", "wide")
	if err != nil || !regexp.MustCompile(`(?m)^rulesreviews\s+implicit.dev/v1alpha1\s+true\s+RulesReview\s+create\s*$`).MatchString(out) {
		t.Errorf("api-resources: no rulesreviews line (%v):\n%s", err, out)
	}
	// kube-apiserver's aggregator refreshes the group's OpenAPI v3 a while after the server serves it.
	explainEventually(t, []string{"rulesreviews.implicit.dev.status.rules.role"}, "ClusterRole or Role")

	kubeconfig, err := cp.WriteUserKubeconfig("rr-dana", "rr:platform-admins")
	if err != nil {
		t.Fatal(err)
	}
	dana := pluginUser{t: t, name: "rr-dana", path: buildPlugin(t), kubeconfig: kubeconfig, home: t.TempDir()}
	matches := func(patterns ...string) func(pluginRun) error {
		return func(r pluginRun) error {
			for _, p := range patterns {
				if !regexp.MustCompile(p).MatchString(r.stdout) {
					return fmt.Errorf("no line matching %s", p)
				}
			}
			return nil
		}
	}

	t.Log("can-i --list: kube-apiserver's own rules (rbac) beside the inherited ones, each with its binding")
	dana.expect(0, matches(
		`(?m)^RESOURCES\s+NON-RESOURCE URLS\s+RESOURCE NAMES\s+VERBS\s+SOURCE$`,
		`(?m)^rolebindings\.rbac\.authorization\.k8s\.io\s+\[\]\s+\[\]\s+\[[^]]*create[^]]*\]\s+inherited from parent rr-org/rr-platform-admins$`,
		`(?m)^rulesreviews\.implicit\.dev\s+\[\]\s+\[\]\s+\[create\]\s+inherited from parent rr-org/rr-platform-admins$`,
		`(?m)^selfsubjectrulesreviews\.authorization\.k8s\.io\s+\[\]\s+\[\]\s+\[create\]\s+rbac$`,
	), "can-i", "--list", "-n", "rr-child")

	t.Log("can-i create rolebindings: yes, through the inherited binding and its scope")
	dana.expect(0, func(r pluginRun) error {
		if !strings.HasPrefix(r.stdout, "yes\n") || !strings.Contains(r.stdout, `RoleBinding "rr-platform-admins" inherited from namespace "rr-org" (parent)`) {
			return errors.New("want yes, through rr-org/rr-platform-admins (parent)")
		}
		return nil
	}, "can-i", "create", "rolebindings", "-n", "rr-child")
	t.Log("and no in a namespace where rr:platform-admins inherit nothing")
	dana.expect(1, matches(`^no\n`), "can-i", "create", "rolebindings", "-n", "rr-other")

	review := func(dyn dynamic.Interface, spec map[string]any) (*v1alpha1.RulesReview, error) {
		u, err := dyn.Resource(viewRoleBindings.GroupVersion().WithResource("rulesreviews")).Namespace("rr-child").Create(t.Context(),
			&unstructured.Unstructured{Object: map[string]any{"apiVersion": "implicit.dev/v1alpha1", "kind": "RulesReview", "spec": spec}},
			metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		out := &v1alpha1.RulesReview{}
		return out, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)
	}
	danaConfig, err := cp.UserConfig("rr-dana", "rr:platform-admins")
	if err != nil {
		t.Fatal(err)
	}
	danaDyn, err := dynamic.NewForConfig(danaConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("rr-dana, who may not impersonate, is refused the rules of another user")
	if _, err := review(danaDyn, map[string]any{"user": "rr-sam"}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "impersonate") {
		t.Fatalf("rr-dana reviews rr-sam: %v, want Forbidden naming impersonate", err)
	}
	t.Log("the admin, who may impersonate, gets rr-dana's")
	eventually(t, "the admin reviews rr-dana's rules in rr-child", func(context.Context) error {
		rr, err := review(adminDyn, map[string]any{"user": "rr-dana", "groups": []any{"rr:platform-admins"}})
		if err != nil {
			return err
		}
		for _, r := range rr.Status.Rules {
			if r.Binding.Namespace == "rr-org" && r.Binding.Name == "rr-platform-admins" && r.Binding.Scope == "parent" &&
				r.Role.Kind == "ClusterRole" && r.Role.Name == "admin" {
				return nil
			}
		}
		return fmt.Errorf("no rule of rr-org/rr-platform-admins (parent, ClusterRole admin) in %+v", rr.Status)
	})

	// Issue 39: a ServiceAccount is impersonated as kube-apiserver
	// impersonates it, and has the groups kube-apiserver gives it.
	t.Log("rr-org grants the ServiceAccounts of rr-ci view: inherited in rr-child through their group")
	gdNamespace(t, kube, "rr-ci", nil, nil)
	const bot = "system:serviceaccount:rr-ci:rr-bot"
	createRoleBinding(t, kube, "rr-org", "rr-ci-viewers", "view", "system:serviceaccounts:rr-ci")
	azWaitViewItem(t, "rolebindings", "rr-child", "rr-ci-viewers", "parent", "rr-org", nil)
	asks := rbacv1.PolicyRule{APIGroups: []string{"implicit.dev"}, Resources: []string{"rulesreviews"}, Verbs: []string{"create"}}
	t.Log("rr-erin may impersonate the user name " + bot + " only; rr-frank the ServiceAccount rr-ci/rr-bot")
	hdGrant(t, kube, "rr-erin-impersonate", "", "rr-erin", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"users"}, Verbs: []string{"impersonate"}, ResourceNames: []string{bot},
	})
	hdGrant(t, kube, "rr-erin-asks", "rr-child", "rr-erin", asks)
	hdGrant(t, kube, "rr-frank-impersonate", "rr-ci", "rr-frank", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"serviceaccounts"}, Verbs: []string{"impersonate"}, ResourceNames: []string{"rr-bot"},
	})
	hdGrant(t, kube, "rr-frank-asks", "rr-child", "rr-frank", asks)
	userDyn := func(name string) dynamic.Interface {
		cfg, err := cp.UserConfig(name)
		if err != nil {
			t.Fatal(err)
		}
		d, err := dynamic.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	erin, frank := userDyn("rr-erin"), userDyn("rr-frank")
	hdWaitCan(t, gdUser(t, "rr-frank"), "impersonate", "serviceaccounts/rr-bot", "-n", "rr-ci")
	if !gdUser(t, "rr-erin").canI("impersonate", "serviceaccounts/rr-bot", "-n", "rr-ci") {
		t.Log("kubectl auth can-i impersonate serviceaccounts/rr-bot -n rr-ci as rr-erin: no")
	} else {
		t.Fatal("rr-erin may impersonate the ServiceAccount: the test's grants are wrong")
	}
	eventually(t, "rr-frank reviews "+bot+"'s rules in rr-child", func(context.Context) error {
		rr, err := review(frank, map[string]any{"user": bot})
		if err != nil {
			return err
		}
		want := []string{"system:serviceaccounts", "system:serviceaccounts:rr-ci", "system:authenticated"}
		if strings.Join(rr.Status.Groups, ",") != strings.Join(want, ",") {
			return fmt.Errorf("groups %v, want %v", rr.Status.Groups, want)
		}
		for _, r := range rr.Status.Rules {
			if r.Binding.Namespace == "rr-org" && r.Binding.Name == "rr-ci-viewers" && r.Role.Name == "view" {
				return nil
			}
		}
		return fmt.Errorf("no rule of rr-org/rr-ci-viewers (through the group system:serviceaccounts:rr-ci) in %+v", rr.Status)
	})
	t.Log("rr-erin, who may impersonate only the user name, is refused, as kube-apiserver would refuse her")
	if _, err := review(erin, map[string]any{"user": bot}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "serviceaccounts") {
		t.Fatalf("rr-erin reviews %s: %v, want Forbidden naming serviceaccounts", bot, err)
	}
}
