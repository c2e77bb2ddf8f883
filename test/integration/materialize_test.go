package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// matGlobal is the global namespace of networkpolicies for the
// materializing servers: their global scope is the test's own, so global
// NetworkPolicies of other tests are not copied around.
const matGlobal = "mat-global"

// matConfig materializes NetworkPolicies.
const matConfig = `apiVersion: config.implicit.dev/v1alpha1
kind: ImplicitConfiguration
resources:
- {group: rbac.authorization.k8s.io, version: v1, resource: rolebindings}
- {group: rbac.authorization.k8s.io, version: v1, resource: roles}
- {group: networking.k8s.io, version: v1, resource: networkpolicies, globalNamespace: ` + matGlobal + `, delivery: Materialize}
`

// matConverge bounds a materialization, a leader change included: the
// Lease of a killed leader expires after 15s.
const matConverge = 90 * time.Second

// TestMaterialize runs two implicit-apiservers that materialize
// NetworkPolicies (delivery: Materialize), as the Deployment's ServiceAccount
// with the shipped RBAC, campaigning for one Lease; the suite's server
// answers the guards. It shows:
//   - a global default-deny appears as a real NetworkPolicy in every tenant
//     and in no excluded namespace;
//   - a parent's item wins over the global one, and a local item is untouched;
//   - copies are never sources: the suite's server's views ignore them;
//   - a tenant's edit of a copy makes it the tenant's own (owncopy_test.go
//     shows the rest); its deletion of a copy, or a forged label, is refused;
//   - a tenant's own object holding a locked inherited name is never
//     overwritten, and the conflict is reported (an Event on the namespace);
//   - a copy deleted or changed while the guards were down comes back;
//   - killing the leader mid-way converges, nothing lost, nothing left behind;
//   - deleting the sources removes every copy.
func TestMaterialize(t *testing.T) {
	kube, dyn := admin(t)
	ctx := t.Context()

	createNamespace(t, kube, matGlobal, nil, nil)
	createNamespace(t, kube, "mat-org", nil, nil)
	createNamespace(t, kube, "mat-team-a", map[string]string{v1alpha1.LabelParent: "mat-org"}, nil)
	createNamespace(t, kube, "mat-team-b", nil, nil)
	createNamespace(t, kube, "mat-excluded", map[string]string{v1alpha1.LabelInherit: "false"}, nil)
	tenants := []string{"mat-org", "mat-team-a", "mat-team-b"}
	t.Cleanup(func() { deleteAllCopies(t, kube) })

	config := filepath.Join(t.TempDir(), "materialize.yaml")
	if err := os.WriteFile(config, []byte(matConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(cp.WorkDir(), "implicit-apiserver-sa.kubeconfig")
	var servers []*controlplane.AggregatedServer
	for i := range 2 {
		name := fmt.Sprintf("implicit-mat-%d", i+1)
		t.Logf("starting %s: networkpolicies delivered as copies, as the ServiceAccount, campaigning for the materializer's Lease", name)
		s, err := cp.StartAggregated(ctx, controlplane.AggregatedServerOptions{
			Binary: os.Getenv(binaryEnv), Name: name,
			Args: append([]string{"-v=2", "--webhook-configuration=", "--config=" + config}, identityArgs(kubeconfig)...),
		})
		if err != nil {
			t.Fatal(err)
		}
		servers = append(servers, s)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s log tail:\n%s", name, s.LogTail(40))
			}
			_ = s.Stop()
			if err := checkNoForbidden(s.LogPath()); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		})
	}

	t.Log("sources: mat-global holds mat-deny (every pod) and mat-web; mat-org its own mat-web; mat-team-a a policy of its own")
	createPolicy(t, kube, matGlobal, "mat-deny", "")
	createPolicy(t, kube, matGlobal, "mat-web", "global-web")
	createPolicy(t, kube, "mat-org", "mat-web", "org-web")
	createPolicy(t, kube, "mat-team-a", "mat-own", "own")

	want := map[string]map[string]string{
		"mat-org":    {"mat-deny": matGlobal + ":"}, // mat-org's own mat-web shadows the global one
		"mat-team-a": {"mat-deny": matGlobal + ":", "mat-web": "mat-org:org-web"},
		"mat-team-b": {"mat-deny": matGlobal + ":", "mat-web": matGlobal + ":global-web"},
	}
	waitForCopies(t, kube, "every tenant has the global default-deny; mat-team-a has its parent's mat-web", want)

	t.Log("mat-team-a's and mat-org's own policies are untouched; the excluded and the global namespaces have no copies")
	own, err := kube.NetworkingV1().NetworkPolicies("mat-team-a").Get(ctx, "mat-own", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v1alpha1.IsMaterialized(own.Labels) || own.Spec.PodSelector.MatchLabels["app"] != "own" {
		t.Errorf("mat-team-a/mat-own was changed: labels %v, selector %v", own.Labels, own.Spec.PodSelector.MatchLabels)
	}
	orgWeb, err := kube.NetworkingV1().NetworkPolicies("mat-org").Get(ctx, "mat-web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v1alpha1.IsMaterialized(orgWeb.Labels) || orgWeb.Spec.PodSelector.MatchLabels["app"] != "org-web" {
		t.Errorf("mat-org/mat-web (a source, local in mat-org) was changed: labels %v, selector %v", orgWeb.Labels, orgWeb.Spec.PodSelector.MatchLabels)
	}
	for _, ns := range []string{"mat-excluded", matGlobal} {
		if c := copiesIn(t, kube, ns); len(c) != 0 {
			t.Errorf("%s holds copies %v, want none", ns, c)
		}
	}
	deny, err := kube.NetworkingV1().NetworkPolicies("mat-team-b").Get(ctx, "mat-deny", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if deny.Labels[v1alpha1.LabelScope] != "global" || deny.Annotations[v1alpha1.AnnotationSourceUID] == "" {
		t.Errorf("the copy mat-team-b/mat-deny lacks its provenance: labels %v, annotations %v", deny.Labels, deny.Annotations)
	}
	managers := []string{}
	for _, f := range deny.ManagedFields {
		managers = append(managers, f.Manager+"/"+string(f.Operation))
	}
	// Created with Create (an Update entry), never applied over a name.
	if !slices.Contains(managers, "implicit-apiserver/Update") {
		t.Errorf("the copy's field managers are %v, want implicit-apiserver/Update", managers)
	}

	t.Log("copies are never sources: the suite's server (global namespace implicit-global, where mat-global is no global scope) " +
		"shows mat-team-a's own policy and mat-org's mat-web, and neither copy as a local item")
	waitForView(t, dyn, viewNetworkPolicies, "mat-team-a", "mat-", map[string]viewItem{
		"mat-own": {Scope: "local", Source: "mat-team-a"},
		"mat-web": {Scope: "parent", Source: "mat-org"},
	})

	t.Log("a tenant's (admin of mat-team-b) edit of a copy makes it the tenant's own (dry run: nothing kept); it may not delete a copy, nor forge the label")
	createRoleBinding(t, kube, "mat-team-b", "mat-tenant-admin", "admin", "mat:tenants")
	tenantCfg, err := cp.UserConfig("mat-tenant", "mat:tenants")
	if err != nil {
		t.Fatal(err)
	}
	tenant := kubernetes.NewForConfigOrDie(tenantCfg)
	eventually(t, "the tenant's edit of a copy makes it the tenant's own", func(ctx context.Context) error {
		c, err := tenant.NetworkingV1().NetworkPolicies("mat-team-b").Get(ctx, "mat-deny", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Spec.PodSelector.MatchLabels = map[string]string{"app": "nothing"}
		got, err := tenant.NetworkingV1().NetworkPolicies("mat-team-b").Update(ctx, c, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return errorf("update: %v, want it admitted", err)
		}
		if v1alpha1.IsMaterialized(got.Labels) || got.Labels[v1alpha1.LabelScope] != "" {
			return errorf("the edited copy keeps the label or its provenance: %v", got.Labels)
		}
		return nil
	})
	if err := tenant.NetworkingV1().NetworkPolicies("mat-team-b").Delete(ctx, "mat-deny", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant's delete of a copy: %v, want Forbidden", err)
	}
	forged := policy("mat-team-b", "mat-forged", "x")
	forged.Labels = map[string]string{v1alpha1.LabelMaterialized: "true"}
	if _, err := tenant.NetworkingV1().NetworkPolicies("mat-team-b").Create(ctx, forged, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the tenant's create with the label: %v, want Forbidden", err)
	}

	t.Log("mat-team-b holds a policy of its own named mat-locked; then mat-global adds a locked mat-locked: " +
		"the lock keeps it in mat-team-b's view (the view item's conflict names the blocked shadow), but the tenant's object is never overwritten")
	createPolicy(t, kube, "mat-team-b", "mat-locked", "team-b-own")
	locked := policy(matGlobal, "mat-locked", "global-locked")
	locked.Annotations = map[string]string{v1alpha1.AnnotationLocked: "true"}
	if _, err := kube.NetworkingV1().NetworkPolicies(matGlobal).Create(ctx, locked, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := kube.NetworkingV1().NetworkPolicies(matGlobal).Delete(context.Background(), "mat-locked", metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting networkpolicy %s/mat-locked: %v", matGlobal, err)
		}
	})
	want["mat-org"]["mat-locked"] = matGlobal + ":global-locked"
	want["mat-team-a"]["mat-locked"] = matGlobal + ":global-locked"
	waitForCopies(t, kube, "the locked policy is copied where no object of the tenant's holds its name, and not into mat-team-b", want)
	eventually(t, "a MaterializeConflict Event on mat-team-b names the object and the source", func(ctx context.Context) error {
		events, err := kube.CoreV1().Events("mat-team-b").List(ctx, metav1.ListOptions{FieldSelector: "reason=MaterializeConflict"})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if strings.Contains(e.Message, "mat-locked") && strings.Contains(e.Message, matGlobal+"/mat-locked") {
				t.Logf("event: %s", e.Message)
				return nil
			}
		}
		return errorf("%d MaterializeConflict events, none names mat-locked from %s", len(events.Items), matGlobal)
	})
	own, err = kube.NetworkingV1().NetworkPolicies("mat-team-b").Get(ctx, "mat-locked", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v1alpha1.IsMaterialized(own.Labels) || own.Spec.PodSelector.MatchLabels["app"] != "team-b-own" {
		t.Errorf("mat-team-b's own mat-locked was overwritten: labels %v, selector %v", own.Labels, own.Spec.PodSelector.MatchLabels)
	}

	t.Log("with the guards down, one copy is deleted and another changed: both are repaired")
	withoutGuards(t, func() {
		withoutOwnCopy(t)
		if err := kube.NetworkingV1().NetworkPolicies("mat-team-b").Delete(ctx, "mat-deny", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		c, err := kube.NetworkingV1().NetworkPolicies("mat-team-a").Get(ctx, "mat-web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.Spec.PodSelector.MatchLabels = map[string]string{"app": "tampered"}
		if _, err := kube.NetworkingV1().NetworkPolicies("mat-team-a").Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	waitForCopies(t, kube, "the deleted copy is back and the changed one repaired", want)

	leader, other := leaderOf(t, servers)
	t.Logf("%s leads; five new global policies, then it is killed mid-way", leader.LogPath())
	var extra []string
	for i := range 5 {
		name := fmt.Sprintf("mat-extra-%d", i)
		extra = append(extra, name)
		createPolicy(t, kube, matGlobal, name, name)
	}
	if err := syscall.Kill(leader.Process().Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Log("and mat-global's mat-web is deleted while nobody leads")
	if err := kube.NetworkingV1().NetworkPolicies(matGlobal).Delete(ctx, "mat-web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range tenants {
		for _, name := range extra {
			want[ns][name] = matGlobal + ":" + name
		}
	}
	delete(want["mat-org"], "mat-web")
	delete(want["mat-team-b"], "mat-web")
	start := time.Now()
	waitForCopies(t, kube, "the other replica takes over: every extra policy everywhere, the global mat-web gone, mat-team-a's from mat-org kept", want)
	t.Logf("converged %s after the leader was killed", time.Since(start).Round(100*time.Millisecond))
	if !logContains(other.LogPath(), "Leading the materializer") {
		t.Errorf("%s never led the materializer", other.LogPath())
	}

	t.Log("deleting every source removes every copy")
	for _, name := range append([]string{"mat-deny", "mat-locked"}, extra...) {
		if err := kube.NetworkingV1().NetworkPolicies(matGlobal).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := kube.NetworkingV1().NetworkPolicies("mat-org").Delete(ctx, "mat-web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForCopies(t, kube, "no copies left", map[string]map[string]string{"mat-org": {}, "mat-team-a": {}, "mat-team-b": {}})
	if _, err := kube.NetworkingV1().NetworkPolicies("mat-team-a").Get(ctx, "mat-own", metav1.GetOptions{}); err != nil {
		t.Errorf("mat-team-a's own policy: %v", err)
	}
}

// withoutOwnCopy removes the own-copy webhook from the mutating
// configuration: a write to a copy then keeps the label, as behind every
// guard. withoutGuards registers it again with the others.
func withoutOwnCopy(t *testing.T) {
	t.Helper()
	kube, _ := admin(t)
	client := kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	cfg, err := client.Get(t.Context(), controlplane.GuardsConfiguration, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Webhooks = slices.DeleteFunc(cfg.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool {
		return w.Name == webhookconfig.WebhookOwnCopy
	})
	if _, err := client.Update(t.Context(), cfg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "kube-apiserver no longer calls the own-copy webhook", func(ctx context.Context) error {
		copies, err := kube.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{
			LabelSelector: labels.SelectorFromSet(labels.Set{v1alpha1.LabelMaterialized: "true"}).String(), Limit: 1,
		})
		if err != nil || len(copies.Items) == 0 {
			return errorf("no copy to try: %v", err)
		}
		c := &copies.Items[0]
		c.Annotations = map[string]string{"try": "x"}
		got, err := kube.NetworkingV1().NetworkPolicies(c.Namespace).Update(ctx, c, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return err
		}
		if !v1alpha1.IsMaterialized(got.Labels) {
			return errorf("a dry-run update of %s/%s still loses the label", c.Namespace, c.Name)
		}
		return nil
	})
}

// policy is a NetworkPolicy for pods labelled app (every pod when "").
func policy(namespace, name, app string) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
	if app != "" {
		np.Spec.PodSelector.MatchLabels = map[string]string{"app": app}
	}
	return np
}

func createPolicy(t *testing.T, kube kubernetes.Interface, namespace, name, app string) {
	t.Helper()
	if _, err := kube.NetworkingV1().NetworkPolicies(namespace).Create(t.Context(), policy(namespace, name, app), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating networkpolicy %s/%s: %v", namespace, name, err)
	}
	t.Cleanup(func() {
		err := kube.NetworkingV1().NetworkPolicies(namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting networkpolicy %s/%s: %v", namespace, name, err)
		}
	})
}

// copiesIn describes the copies of namespace: name -> "source-namespace:app".
func copiesIn(t *testing.T, kube kubernetes.Interface, namespace string) map[string]string {
	t.Helper()
	list, err := kube.NetworkingV1().NetworkPolicies(namespace).List(t.Context(), metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{v1alpha1.LabelMaterialized: "true"}).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, np := range list.Items {
		out[np.Name] = np.Labels[v1alpha1.LabelSourceNamespace] + ":" + np.Spec.PodSelector.MatchLabels["app"]
	}
	return out
}

// waitForCopies waits until each namespace's copies are want's (name ->
// "source-namespace:app").
func waitForCopies(t *testing.T, kube kubernetes.Interface, what string, want map[string]map[string]string) {
	t.Helper()
	eventuallyWithin(t, 250*time.Millisecond, matConverge, what, func(context.Context) error {
		for ns, w := range want {
			got := copiesIn(t, kube, ns)
			if len(got) != len(w) {
				return errorf("%s: copies %v, want %v", ns, got, w)
			}
			for name, desc := range w {
				if got[name] != desc {
					return errorf("%s: copies %v, want %v", ns, got, w)
				}
			}
		}
		return nil
	})
}

// leaderOf returns the server that leads the materializer, and the other.
func leaderOf(t *testing.T, servers []*controlplane.AggregatedServer) (leader, other *controlplane.AggregatedServer) {
	t.Helper()
	eventually(t, "one server leads the materializer", func(context.Context) error {
		for i, s := range servers {
			if logContains(s.LogPath(), "Leading the materializer") {
				leader, other = s, servers[1-i]
				return nil
			}
		}
		return errorf("no server logged that it leads")
	})
	return leader, other
}

func logContains(path, s string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), s)
}

// deleteAllCopies deletes, as admin, every copy left in the cluster: the
// test's servers copied parents' NetworkPolicies of other tests' namespaces
// too, and are gone.
func deleteAllCopies(t *testing.T, kube kubernetes.Interface) {
	list, err := kube.NetworkingV1().NetworkPolicies("").List(context.Background(), metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{v1alpha1.LabelMaterialized: "true"}).String(),
	})
	if err != nil {
		t.Errorf("listing copies left: %v", err)
		return
	}
	// The guards let admin delete them: it may delete their sources.
	for _, np := range list.Items {
		err := kube.NetworkingV1().NetworkPolicies(np.Namespace).Delete(context.Background(), np.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting copy %s/%s: %v", np.Namespace, np.Name, err)
		}
	}
}
