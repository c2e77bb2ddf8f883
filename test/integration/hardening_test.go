package integration

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
)

// The hierarchy and lock hardening of issue 13, as a tenant meets it: a
// parent is the namespace meant when the label was set (its uid is
// recorded), a tenant can't drop locked inherited items by opting out or
// leaving its parent, and a locked source can't be changed through its
// status subresource without unlock.

const (
	hdParent    = "implicit.dev/parent"
	hdParentUID = "implicit.dev/parent-uid"
)

// hdGrant gives user rules: in namespace with a Role, or cluster-wide with a
// ClusterRole when namespace is "". Everything goes when the test ends.
func hdGrant(t *testing.T, kube kubernetes.Interface, name, namespace, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := t.Context()
	subjects := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}
	var err error
	if namespace == "" {
		_, err = kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
		if err == nil {
			_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			}, metav1.CreateOptions{})
		}
	} else {
		_, err = kube.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
		if err == nil {
			_, err = kube.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			}, metav1.CreateOptions{})
		}
	}
	if err != nil {
		t.Fatalf("granting %s to %s: %v", name, user, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		var errs []error
		if namespace == "" {
			errs = append(errs, kube.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{}),
				kube.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{}))
		} else {
			errs = append(errs, kube.RbacV1().RoleBindings(namespace).Delete(ctx, name, metav1.DeleteOptions{}),
				kube.RbacV1().Roles(namespace).Delete(ctx, name, metav1.DeleteOptions{}))
		}
		for _, err := range errs {
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("revoking %s: %v", name, err)
			}
		}
	})
}

// hdWaitCan waits until k may do args (kubectl auth can-i).
func hdWaitCan(t *testing.T, k gdKubectl, args ...string) {
	t.Helper()
	eventually(t, k.who+" may "+strings.Join(args, " "), func(ctx context.Context) error {
		if !k.canI(args...) {
			return errorf("not yet")
		}
		return nil
	})
}

// hdNamespaceUID returns namespace's uid and its parent-uid annotation.
func hdNamespaceUID(t *testing.T, kube kubernetes.Interface, name string) (uid, parentUID string, recorded bool) {
	t.Helper()
	ns, err := kube.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	parentUID, recorded = ns.Annotations[hdParentUID]
	return string(ns.UID), parentUID, recorded
}

// TestParentUIDRecorded checks the parent-uid webhook: a parent label
// records the parent's uid, a tenant can't write another, the annotation
// goes with the label, and a parent that does not exist is refused.
func TestParentUIDRecorded(t *testing.T) {
	kube, _ := admin(t)
	adm := gdAdmin(t)
	gdNamespace(t, kube, "hd-uid-org", nil, nil)
	gdNamespace(t, kube, "hd-uid-org2", nil, nil)
	orgUID, _, _ := hdNamespaceUID(t, kube, "hd-uid-org")
	org2UID, _, _ := hdNamespaceUID(t, kube, "hd-uid-org2")

	t.Log("creating hd-uid-team with parent hd-uid-org records hd-uid-org's uid")
	gdNamespace(t, kube, "hd-uid-team", map[string]string{hdParent: "hd-uid-org"}, map[string]string{hdParentUID: "forged"})
	if _, got, ok := hdNamespaceUID(t, kube, "hd-uid-team"); !ok || got != orgUID {
		t.Fatalf("hd-uid-team's %s = %q (set %v), want hd-uid-org's uid %s", hdParentUID, got, ok, orgUID)
	}

	t.Log("a tenant of hd-uid-team, which may update it, can't rewrite the recorded uid")
	tenant := gdUser(t, "hd-uid-tenant")
	hdGrant(t, kube, "hd-uid-tenant", "", "hd-uid-tenant", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch"}, ResourceNames: []string{"hd-uid-team"},
	})
	hdWaitCan(t, tenant, "patch", "namespaces/hd-uid-team")
	tenant.ok("annotate", "namespace", "hd-uid-team", hdParentUID+"="+org2UID, "--overwrite")
	if _, got, _ := hdNamespaceUID(t, kube, "hd-uid-team"); got != orgUID {
		t.Fatalf("after the tenant's annotate, %s = %q, want hd-uid-org's uid %s", hdParentUID, got, orgUID)
	}

	t.Log("changing the parent records the new parent's uid")
	adm.ok("label", "namespace", "hd-uid-team", hdParent+"=hd-uid-org2", "--overwrite")
	if _, got, _ := hdNamespaceUID(t, kube, "hd-uid-team"); got != org2UID {
		t.Fatalf("after the new parent, %s = %q, want hd-uid-org2's uid %s", hdParentUID, got, org2UID)
	}

	t.Log("removing the parent removes the uid")
	adm.ok("label", "namespace", "hd-uid-team", hdParent+"-")
	if _, got, ok := hdNamespaceUID(t, kube, "hd-uid-team"); ok {
		t.Fatalf("after the label went, %s = %q, want none", hdParentUID, got)
	}

	t.Log("a parent that does not exist is refused: nobody meant it yet")
	adm.refused([]string{`admission webhook "parents.implicit.dev" denied the request`, `namespace "hd-uid-ghost" does not exist`},
		"label", "namespace", "hd-uid-team", hdParent+"=hd-uid-ghost")
}

// TestSquatterDoesNotAdoptChildren checks issue 13's squatting: a parent is
// deleted, and whoever creates a namespace of its name gets none of its
// children: a RoleBinding there is in no child's view.
func TestSquatterDoesNotAdoptChildren(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	gdNamespace(t, kube, "hd-sq-parent", nil, nil)
	gdNamespace(t, kube, "hd-sq-child", map[string]string{hdParent: "hd-sq-parent"}, nil)
	createRoleBinding(t, kube, "hd-sq-parent", "hd-sq-orig", "view", "sq:orig")
	parentUID, _, _ := hdNamespaceUID(t, kube, "hd-sq-parent")
	if _, got, ok := hdNamespaceUID(t, kube, "hd-sq-child"); !ok || got != parentUID {
		t.Fatalf("hd-sq-child's %s = %q (set %v), want hd-sq-parent's uid %s", hdParentUID, got, ok, parentUID)
	}
	waitForView(t, dyn, viewRoleBindings, "hd-sq-child", "hd-sq-", map[string]viewItem{"hd-sq-orig": {Scope: "parent", Source: "hd-sq-parent"}})

	t.Log("deleting hd-sq-parent; the label on hd-sq-child now names a namespace that does not exist")
	if err := kube.CoreV1().Namespaces().Delete(t.Context(), "hd-sq-parent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "hd-sq-parent is gone", func(ctx context.Context) error {
		_, err := kube.CoreV1().Namespaces().Get(ctx, "hd-sq-parent", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errorf("still there: %v", err)
	})
	waitForView(t, dyn, viewRoleBindings, "hd-sq-child", "hd-sq-", map[string]viewItem{})

	t.Log("a squatter creates hd-sq-parent again and binds there")
	createNamespace(t, kube, "hd-sq-parent", nil, nil)
	createRoleBinding(t, kube, "hd-sq-parent", "hd-sq-squat", "admin", "sq:squatter")
	t.Log("then a global marker: the RoleBinding informer delivers in order, so once the child's view shows the marker it has judged the squatter's binding")
	createRoleBinding(t, kube, globalNS, "hd-sq-marker", "view", "sq:marker")
	items := waitForView(t, dyn, viewRoleBindings, "hd-sq-child", "hd-sq-", map[string]viewItem{"hd-sq-marker": {Scope: "global", Source: globalNS}})
	if _, ok := items["hd-sq-squat"]; ok {
		t.Fatalf("hd-sq-child's view shows the squatter's hd-sq-squat")
	}
}

// TestTenantCannotDropLocks checks that a tenant who may label its
// namespace can't drop a locked inherited item by opting out or by leaving
// its parent without unlock on it, and can with it.
func TestTenantCannotDropLocks(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	gdNamespace(t, kube, "hd-lk-org", nil, nil)
	gdNamespace(t, kube, "hd-lk-team", map[string]string{hdParent: "hd-lk-org"}, nil)
	createRoleBinding(t, kube, "hd-lk-org", "hd-lk-sec", "view", "org:security", locked)
	waitForView(t, dyn, viewRoleBindings, "hd-lk-team", "hd-lk-sec", map[string]viewItem{"hd-lk-sec": {Scope: "parent", Source: "hd-lk-org"}})

	t.Log("hd-lk-tenant is admin of hd-lk-team and may update the namespace itself")
	tenant := gdUser(t, "hd-lk-tenant")
	gdBindUser(t, kube, "hd-lk-team", "hd-lk-tenant-admin", "ClusterRole", "admin", "hd-lk-tenant")
	hdGrant(t, kube, "hd-lk-tenant-ns", "", "hd-lk-tenant", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch"}, ResourceNames: []string{"hd-lk-team"},
	})
	hdWaitCan(t, tenant, "patch", "namespaces/hd-lk-team")

	t.Log(`as hd-lk-tenant: implicit.dev/inherit: "false" would drop the locked hd-lk-sec`)
	tenant.refused([]string{`admission webhook "parents.implicit.dev" denied the request`, "implicit.dev/inherit: \"false\"", "hd-lk-org/hd-lk-sec", `"unlock"`},
		"label", "namespace", "hd-lk-team", "implicit.dev/inherit=false")
	t.Log("as hd-lk-tenant: removing the parent would drop it too")
	tenant.refused([]string{`admission webhook "parents.implicit.dev" denied the request`, "removing implicit.dev/parent: hd-lk-org", "hd-lk-org/hd-lk-sec"},
		"label", "namespace", "hd-lk-team", hdParent+"-")
	waitForView(t, dyn, viewRoleBindings, "hd-lk-team", "hd-lk-sec", map[string]viewItem{"hd-lk-sec": {Scope: "parent", Source: "hd-lk-org"}})

	t.Log("hd-lk-tenant is granted unlock on the source kinds (other tests' locked global items may be there too)")
	hdGrant(t, kube, "hd-lk-tenant-unlock", "", "hd-lk-tenant", rbacv1.PolicyRule{
		APIGroups: []string{"rbac.authorization.k8s.io", "networking.k8s.io", "policy.example.com"},
		Resources: []string{"rolebindings", "roles", "networkpolicies", "guardrails"}, Verbs: []string{admission.UnlockVerb},
	})
	hdWaitCan(t, tenant, admission.UnlockVerb, "rolebindings/hd-lk-sec", "-n", "hd-lk-org")
	tenant.ok("label", "namespace", "hd-lk-team", "implicit.dev/inherit=false")
	waitForView(t, dyn, viewRoleBindings, "hd-lk-team", "hd-lk-sec", map[string]viewItem{})
	t.Log("opting back in takes nothing away: no unlock asked")
	tenant.ok("label", "namespace", "hd-lk-team", "implicit.dev/inherit-")
	waitForView(t, dyn, viewRoleBindings, "hd-lk-team", "hd-lk-sec", map[string]viewItem{"hd-lk-sec": {Scope: "parent", Source: "hd-lk-org"}})
	tenant.ok("label", "namespace", "hd-lk-team", hdParent+"-")
	waitForView(t, dyn, viewRoleBindings, "hd-lk-team", "hd-lk-sec", map[string]viewItem{})
}

// TestLockedStatusNeedsUnlock checks that the status subresource of a locked
// source of a configured kind is guarded like the object.
func TestLockedStatusNeedsUnlock(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	hdGuardrailsWithStatus(t, dyn)

	t.Log("waiting until the locks webhook's rules list guardrails/status (ConditionSync follows the served kinds)")
	eventually(t, "the locks webhook guards guardrails/status", func(ctx context.Context) error {
		cfg, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, controlplane.GuardsConfiguration, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, w := range cfg.Webhooks {
			if w.Name == webhookconfig.WebhookLocks && hdRulesHave(w.Rules, "guardrails/status") {
				return nil
			}
		}
		return errorf("no rule for guardrails/status yet")
	})

	gr := testfixture.Guardrail(globalNS, "hd-st-locked", true, map[string]any{"action": "Enforce", "rules": testfixture.GuardrailRules("a")})
	if _, err := dyn.Resource(testfixture.Guardrails).Namespace(globalNS).Create(t.Context(), gr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(testfixture.Guardrails).Namespace(globalNS).Delete(context.Background(), "hd-st-locked", metav1.DeleteOptions{})
	})

	t.Log("hd-st-writer may update guardrails/status in the global namespace, but not unlock")
	writer := gdUser(t, "hd-st-writer")
	hdGrant(t, kube, "hd-st-writer", globalNS, "hd-st-writer",
		rbacv1.PolicyRule{APIGroups: []string{"policy.example.com"}, Resources: []string{"guardrails", "guardrails/status"}, Verbs: []string{"get", "update", "patch"}})
	hdWaitCan(t, writer, "patch", "guardrails.policy.example.com/hd-st-locked", "--subresource=status", "-n", globalNS)
	status := []string{"patch", "guardrails.policy.example.com", "hd-st-locked", "-n", globalNS, "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Tampered"}}`}
	writer.refused([]string{`admission webhook "locks.implicit.dev" denied the request`, "updating its status subresource", `"unlock"`}, status...)

	t.Log("with unlock on it, the same status update goes through")
	hdGrant(t, kube, "hd-st-writer-unlock", globalNS, "hd-st-writer",
		rbacv1.PolicyRule{APIGroups: []string{"policy.example.com"}, Resources: []string{"guardrails"}, Verbs: []string{admission.UnlockVerb}, ResourceNames: []string{"hd-st-locked"}})
	hdWaitCan(t, writer, admission.UnlockVerb, "guardrails.policy.example.com/hd-st-locked", "-n", globalNS)
	writer.ok(status...)
}

// hdGuardrailsWithStatus makes sure the suite's guardrails CRD exists and
// has a status subresource (TestConfiguredKindOverlay creates it without
// one, and it stays for the rest of the suite, as it does after this).
func hdGuardrailsWithStatus(t *testing.T, dyn dynamic.Interface) {
	t.Helper()
	crds := dyn.Resource(testfixture.CRDs)
	if _, err := crds.Create(t.Context(), testfixture.GuardrailCRD(false), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	eventually(t, "the guardrails CRD has a status subresource", func(ctx context.Context) error {
		crd, err := crds.Get(ctx, "guardrails.policy.example.com", metav1.GetOptions{})
		if err != nil {
			return err
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		changed := false
		for i, v := range versions {
			m := v.(map[string]any)
			if _, ok, _ := unstructured.NestedMap(m, "subresources", "status"); !ok {
				if err := unstructured.SetNestedMap(m, map[string]any{}, "subresources", "status"); err != nil {
					return err
				}
				if err := unstructured.SetNestedMap(m, map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}, "schema", "openAPIV3Schema", "properties", "status"); err != nil {
					return err
				}
				versions[i], changed = m, true
			}
		}
		if !changed {
			return nil
		}
		if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
			return err
		}
		if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
			return err
		}
		return errorf("updated; checking again")
	})
	eventually(t, "guardrails.implicit.dev is served", func(ctx context.Context) error {
		_, err := dyn.Resource(testfixture.GuardrailViews).Namespace(globalNS).List(ctx, metav1.ListOptions{})
		return err
	})
}

func hdRulesHave(rules []admissionregistrationv1.RuleWithOperations, resource string) bool {
	for _, r := range rules {
		for _, res := range r.Resources {
			if res == resource {
				return true
			}
		}
	}
	return false
}

// TestMutatingWebhookArtifact keeps artifacts/base's
// MutatingWebhookConfiguration equal to what the code generates
// (hack/gen-webhooks -mutating).
func TestMutatingWebhookArtifact(t *testing.T) {
	checkGenerated(t, "artifacts/base/mutatingwebhookconfiguration.yaml", webhookconfig.InClusterMutatingConfiguration(), "go run ./hack/gen-webhooks -mutating")
}
