package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestMergedViews builds a hierarchy with every merge rule of DESIGN.md and
// checks each namespace's view through the aggregator.
func TestMergedViews(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)

	t.Log("hierarchy: mv-org <- mv-dept <- mv-team; mv-org <- mv-excl (excludes rolebindings/mv-ci-bot); mv-cyc-a <-> mv-cyc-b; mv-orphan -> missing; mv-sandbox is no tenant")
	createNamespace(t, kube, "mv-org", nil, nil)
	createNamespace(t, kube, "mv-dept", map[string]string{"implicit.dev/parent": "mv-org"}, nil)
	createNamespace(t, kube, "mv-team", map[string]string{"implicit.dev/parent": "mv-dept"}, nil)
	createNamespace(t, kube, "mv-excl", map[string]string{"implicit.dev/parent": "mv-org"}, map[string]string{"implicit.dev/exclude": "rolebindings/mv-ci-bot, rolebindings/mv-sec"})
	createNamespace(t, kube, "mv-excl-child", map[string]string{"implicit.dev/parent": "mv-excl"}, nil)
	withoutGuards(t, func() {
		t.Log("a parent cycle, made while the parent guard is not registered")
		createNamespace(t, kube, "mv-cyc-a", map[string]string{"implicit.dev/parent": "mv-cyc-b"}, nil)
		createNamespace(t, kube, "mv-cyc-b", map[string]string{"implicit.dev/parent": "mv-cyc-a"}, nil)
		t.Log("a missing parent: the parent guard refuses a label naming a namespace that does not exist")
		createNamespace(t, kube, "mv-orphan", map[string]string{"implicit.dev/parent": "mv-ghost"}, nil)
	})
	createNamespace(t, kube, "mv-sandbox", map[string]string{"implicit.dev/inherit": "false"}, nil)

	t.Log("parent sources: mv-org shadows mv-org-viewers and adds mv-platform-admins; mv-dept adds mv-dept-ops")
	createRoleBinding(t, kube, "mv-org", "mv-org-viewers", "view", "platform:viewers")
	createRoleBinding(t, kube, "mv-org", "mv-platform-admins", "admin", "platform:admins")
	createRoleBinding(t, kube, "mv-dept", "mv-dept-ops", "edit", "dept:ops")
	t.Log("local sources: mv-team adds mv-team-devs and its own mv-sec, before the global mv-sec is locked (the shadow guard refuses new shadows of locked items)")
	createRoleBinding(t, kube, "mv-team", "mv-team-devs", "edit", "team:devs")
	createRoleBinding(t, kube, "mv-team", "mv-sec", "admin", "team:devs")
	t.Log("global sources: mv-org-viewers, mv-ci-bot, and mv-sec, locked")
	createRoleBinding(t, kube, globalNS, "mv-org-viewers", "view", "org:viewers", withLabel("team", "org"))
	createRoleBinding(t, kube, globalNS, "mv-ci-bot", "edit", "ci:bots")
	globalSec := createRoleBinding(t, kube, globalNS, "mv-sec", "view", "org:security", locked)
	createRoleBinding(t, kube, "mv-sandbox", "mv-sandbox-local", "edit", "sandbox:devs")

	g := viewItem{Scope: "global", Source: globalNS}
	org := viewItem{Scope: "parent", Source: "mv-org"}

	t.Log("mv-team: local over nearest parent over farther parent over global; the locked global mv-sec is kept")
	team := waitForView(t, dyn, viewRoleBindings, "mv-team", "mv-", map[string]viewItem{
		"mv-org-viewers":     org,
		"mv-platform-admins": org,
		"mv-dept-ops":        {Scope: "parent", Source: "mv-dept"},
		"mv-team-devs":       {Scope: "local", Source: "mv-team"},
		"mv-ci-bot":          g,
		"mv-sec":             g,
	})
	conflict := team["mv-sec"].GetAnnotations()["implicit.dev/conflict"]
	if !strings.Contains(conflict, "mv-team/mv-sec") || !strings.Contains(conflict, "locked") {
		t.Errorf("mv-sec in mv-team: implicit.dev/conflict = %q, want it to name the blocked local mv-team/mv-sec and the lock", conflict)
	}
	t.Logf("mv-sec conflict: %s", conflict)

	t.Log("mv-excl excludes mv-ci-bot (removed) and mv-sec (locked: kept, with a conflict); its child inherits the exclusion")
	for _, ns := range []string{"mv-excl", "mv-excl-child"} {
		items := waitForView(t, dyn, viewRoleBindings, ns, "mv-", map[string]viewItem{
			"mv-org-viewers":     org,
			"mv-platform-admins": org,
			"mv-sec":             g,
		})
		if c := items["mv-sec"].GetAnnotations()["implicit.dev/conflict"]; !strings.Contains(c, "exclusion rolebindings/mv-sec in namespace mv-excl") {
			t.Errorf("mv-sec in %s: implicit.dev/conflict = %q, want the blocked exclusion", ns, c)
		}
	}

	t.Log("a cycle, a missing parent: global items only, never a crash")
	globalOnly := map[string]viewItem{"mv-org-viewers": g, "mv-ci-bot": g, "mv-sec": g}
	for _, ns := range []string{"mv-cyc-a", "mv-cyc-b", "mv-orphan"} {
		waitForView(t, dyn, viewRoleBindings, ns, "mv-", globalOnly)
	}

	t.Log("non-tenants see their local objects only: mv-sandbox and the global namespace itself")
	waitForView(t, dyn, viewRoleBindings, "mv-sandbox", "mv-", map[string]viewItem{"mv-sandbox-local": {Scope: "local", Source: "mv-sandbox"}})
	waitForView(t, dyn, viewRoleBindings, globalNS, "mv-", map[string]viewItem{
		"mv-org-viewers": {Scope: "local", Source: globalNS},
		"mv-ci-bot":      {Scope: "local", Source: globalNS},
		"mv-sec":         {Scope: "local", Source: globalNS},
	})

	t.Log("provenance of mv-sec in mv-team: namespace, stable derived uid, source uid and resourceVersion, source labels kept")
	it := team["mv-sec"]
	if it.GetNamespace() != "mv-team" || it.GetName() != "mv-sec" {
		t.Errorf("item is %s/%s, want mv-team/mv-sec", it.GetNamespace(), it.GetName())
	}
	if it.GetUID() == "" || it.GetUID() == globalSec.UID {
		t.Errorf("uid %q: want a derived uid, not empty nor the source's %q", it.GetUID(), globalSec.UID)
	}
	ann := it.GetAnnotations()
	if ann["implicit.dev/source-uid"] != string(globalSec.UID) || ann["implicit.dev/source-resource-version"] != globalSec.ResourceVersion {
		t.Errorf("annotations %v: want source-uid %s and source-resource-version %s", ann, globalSec.UID, globalSec.ResourceVersion)
	}
	again, err := dyn.Resource(viewRoleBindings).Namespace("mv-team").Get(t.Context(), "mv-sec", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get mv-sec in mv-team: %v", err)
	}
	if again.GetUID() != it.GetUID() {
		t.Errorf("uid changed between list and get: %s then %s", it.GetUID(), again.GetUID())
	}
	other, err := dyn.Resource(viewRoleBindings).Namespace("mv-orphan").Get(t.Context(), "mv-sec", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get mv-sec in mv-orphan: %v", err)
	}
	if other.GetUID() == it.GetUID() {
		t.Errorf("the same uid %s in two namespaces' views", it.GetUID())
	}
	if got := team["mv-ci-bot"].GetLabels(); got["implicit.dev/scope"] != "global" {
		t.Errorf("mv-ci-bot labels %v", got)
	}
	if got := waitForView(t, dyn, viewRoleBindings, "mv-cyc-a", "mv-org-viewers", map[string]viewItem{"mv-org-viewers": g})["mv-org-viewers"].GetLabels(); got["team"] != "org" {
		t.Errorf("mv-org-viewers lost the source's own label team=org: %v", got)
	}

	t.Log("a view item decodes into the source type, rbac.authorization.k8s.io RoleBinding")
	var rb rbacv1.RoleBinding
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(it.Object, &rb); err != nil {
		t.Fatalf("decoding the view item into rbacv1.RoleBinding: %v", err)
	}
	if rb.RoleRef.Name != "view" || len(rb.Subjects) != 1 || rb.Subjects[0].Name != "org:security" {
		t.Errorf("decoded view item: roleRef %v subjects %v, want the locked global binding", rb.RoleRef, rb.Subjects)
	}

	t.Log("get of an item a namespace does not inherit: NotFound")
	_, err = dyn.Resource(viewRoleBindings).Namespace("mv-excl").Get(t.Context(), "mv-ci-bot", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("get excluded mv-ci-bot in mv-excl: %v, want NotFound", err)
	}
	_, err = dyn.Resource(viewRoleBindings).Namespace("mv-does-not-exist").Get(t.Context(), "mv-ci-bot", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("get in a namespace that does not exist: %v, want NotFound", err)
	}

	t.Log("a cycle is reported as a Warning Event on the namespaces of the cycle (kubectl describe namespace shows it)")
	eventually(t, "hierarchy event for mv-cyc-a", func(ctx context.Context) error {
		evs, err := kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Namespace,involvedObject.name=mv-cyc-a"})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "HierarchyCycle" && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no HierarchyCycle event among %d events", len(evs.Items))
	})
}

// TestRolesAndNetworkPolicies checks the two other default views.
func TestRolesAndNetworkPolicies(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	createNamespace(t, kube, "rn-org", nil, nil)
	createNamespace(t, kube, "rn-team", map[string]string{"implicit.dev/parent": "rn-org"}, nil)

	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "rn-config-reader", Namespace: globalNS},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}},
	}
	if _, err := kube.RbacV1().Roles(globalNS).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kube.RbacV1().Roles(globalNS).Delete(context.Background(), role.Name, metav1.DeleteOptions{}) })
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "rn-default-deny", Namespace: "rn-org"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
	if _, err := kube.NetworkingV1().NetworkPolicies("rn-org").Create(t.Context(), np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	waitForView(t, dyn, viewRoles, "rn-team", "rn-", map[string]viewItem{"rn-config-reader": {Scope: "global", Source: globalNS}})
	items := waitForView(t, dyn, viewNetworkPolicies, "rn-team", "rn-", map[string]viewItem{"rn-default-deny": {Scope: "parent", Source: "rn-org"}})
	var got networkingv1.NetworkPolicy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(items["rn-default-deny"].Object, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.PolicyTypes) != 1 || got.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("policy types %v, want [Ingress]", got.Spec.PolicyTypes)
	}
}
