package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestLocalUpAdminOverCopy runs `make run` with NetworkPolicies delivered
// as copies (IMPLICIT_CONFIG=test/integration/testdata/localup-materialize.yaml)
// and writes over the copies as the README's admin does, with kubectl.
// implicit-apiserver runs as its own ServiceAccount with the shipped RBAC,
// so the admin's writes are the admin's, and follow DESIGN's merge rules:
//
//   - org-platform's own NetworkPolicy applied over the copy of an unlocked
//     global one shadows it: it becomes org-platform's own, its children
//     inherit it and their copies follow it, and nothing writes it back;
//   - a label set by the admin on a copy makes the copy team-b's own, and
//     stays;
//   - the same apply over the copy of the locked default-deny-ingress is
//     refused at admission, naming the lock, and the copy is unchanged.
//
// On 762348b the server ran with the admin's credentials: each of these
// writes was admitted as the server's own and silently reverted.
func TestLocalUpAdminOverCopy(t *testing.T) {
	path := buildPlugin(t)
	work, stop := runLocalUp(t, "test/integration/testdata/localup-materialize.yaml")
	defer stop()
	t.Cleanup(func() {
		if err := checkNoForbidden(filepath.Join(work, "logs", "implicit-apiserver.log")); err != nil {
			t.Errorf("make run's implicit-apiserver: %v", err)
		}
	})

	kubeconfig := filepath.Join(work, "admin.kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := t.Context()
	admin := pluginUser{t: t, name: "admin", path: path, kubeconfig: kubeconfig, home: localUpHome(work)}

	t.Log("implicit-apiserver runs as its ServiceAccount, not as the admin")
	serverLog := filepath.Join(work, "logs", "implicit-apiserver.log")
	identity := `"The server's own identity: only it writes materialized copies" user="system:serviceaccount:` +
		controlplane.IdentityNamespace + ":" + controlplane.IdentityServiceAccount + `"`
	eventually(t, "the server logs its own identity", func(context.Context) error {
		if !logContains(serverLog, identity) {
			return fmt.Errorf("no %s in %s", identity, serverLog)
		}
		return nil
	})

	t.Log("the examples' locked global default-deny-ingress is copied into org-platform, team-a and team-b")
	deny := implicitGlobalNS + ":"
	waitForCopies(t, kube, "copies of default-deny-ingress", map[string]map[string]string{
		"org-platform": {"default-deny-ingress": deny}, "team-a": {"default-deny-ingress": deny}, "team-b": {"default-deny-ingress": deny},
	})

	t.Log("the admin adds an unlocked global allow-dns; every tenant gets a copy")
	admin.expectKubectlWithInput(0, nil, netpolYAML(implicitGlobalNS, "allow-dns", "global-dns"), "apply", "-f", "-")
	global := map[string]string{"default-deny-ingress": deny, "allow-dns": implicitGlobalNS + ":global-dns"}
	waitForCopies(t, kube, "copies of allow-dns", map[string]map[string]string{"org-platform": global, "team-a": global, "team-b": global})

	t.Log("the admin applies org-platform's own allow-dns over its copy: it becomes org-platform's own")
	r := admin.expectKubectlWithInput(0, nil, netpolYAML("org-platform", "allow-dns", "org-dns"), "apply", "-f", "-")
	if !strings.Contains(r.stderr, "was a materialized copy of "+implicitGlobalNS+"/allow-dns") {
		t.Errorf("the apply does not say the copy became org-platform's own; stderr:\n%s", r.stderr)
	}
	waitForView(t, dyn, viewNetworkPolicies, "org-platform", "allow-dns", map[string]viewItem{"allow-dns": {Scope: "local", Source: "org-platform"}})
	waitForView(t, dyn, viewNetworkPolicies, "team-a", "allow-dns", map[string]viewItem{"allow-dns": {Scope: "parent", Source: "org-platform"}})
	org := map[string]string{"default-deny-ingress": deny, "allow-dns": "org-platform:org-dns"}
	waitForCopies(t, kube, "team-a's and team-b's copies follow org-platform's allow-dns", map[string]map[string]string{
		"org-platform": {"default-deny-ingress": deny}, "team-a": org, "team-b": org,
	})
	checkOwn(t, kube, "org-platform", "allow-dns", "app", "org-dns")

	t.Log("the admin labels team-b's copy of allow-dns: the copy becomes team-b's own, the label stays")
	admin.expectKubectl(0, nil, "label", "networkpolicy", "allow-dns", "-n", "team-b", "reviewed=yes")
	waitForView(t, dyn, viewNetworkPolicies, "team-b", "allow-dns", map[string]viewItem{"allow-dns": {Scope: "local", Source: "team-b"}})
	checkOwn(t, kube, "team-b", "allow-dns", "reviewed", "yes")

	t.Log("the same apply over the copy of the locked default-deny-ingress is refused, naming the lock")
	r = admin.kubectlWithInput(ctx, netpolYAML("org-platform", "default-deny-ingress", "org-deny"), "apply", "-f", "-")
	t.Logf("$ kubectl apply -f - (org-platform/default-deny-ingress)  (exit %d)\n%s%s", r.code, r.stdout, r.stderr)
	if r.code == 0 || !strings.Contains(r.stderr, "denied the request") || !strings.Contains(r.stderr, v1alpha1.AnnotationLocked) {
		t.Errorf("the apply over the locked item's copy: exit %d, want a refusal naming %s", r.code, v1alpha1.AnnotationLocked)
	}
	np, err := kube.NetworkingV1().NetworkPolicies("org-platform").Get(ctx, "default-deny-ingress", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !v1alpha1.IsMaterialized(np.Labels) || len(np.Spec.PodSelector.MatchLabels) != 0 {
		t.Errorf("org-platform/default-deny-ingress changed: labels %v, selector %v", np.Labels, np.Spec.PodSelector.MatchLabels)
	}

	t.Log("a new global allow-metrics reaches every tenant's copies: the materializer has compared each namespace since the writes, and left the admin's objects theirs")
	admin.expectKubectlWithInput(0, nil, netpolYAML(implicitGlobalNS, "allow-metrics", "global-metrics"), "apply", "-f", "-")
	metrics := implicitGlobalNS + ":global-metrics"
	waitForCopies(t, kube, "copies of allow-metrics beside the admin's objects", map[string]map[string]string{
		"org-platform": {"default-deny-ingress": deny, "allow-metrics": metrics},
		"team-a":       {"default-deny-ingress": deny, "allow-dns": "org-platform:org-dns", "allow-metrics": metrics},
		"team-b":       {"default-deny-ingress": deny, "allow-metrics": metrics},
	})
	checkOwn(t, kube, "org-platform", "allow-dns", "app", "org-dns")
	checkOwn(t, kube, "team-b", "allow-dns", "reviewed", "yes")
}

// implicitGlobalNS is the examples' global namespace.
const implicitGlobalNS = "implicit-global"

// checkOwn fails t unless namespace/name is no copy (no materialized label,
// no provenance) and has the label or pod selector key=value the admin
// wrote ("app" is looked up in the pod selector, anything else in the
// labels).
func checkOwn(t *testing.T, kube kubernetes.Interface, namespace, name, key, value string) {
	t.Helper()
	np, err := kube.NetworkingV1().NetworkPolicies(namespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := np.Labels[key]
	if key == "app" {
		got = np.Spec.PodSelector.MatchLabels[key]
	}
	if v1alpha1.IsMaterialized(np.Labels) || np.Labels[v1alpha1.LabelScope] != "" || np.Annotations[v1alpha1.AnnotationSourceUID] != "" || got != value {
		t.Errorf("%s/%s is not the admin's (%s=%s): labels %v, annotations %v, selector %v",
			namespace, name, key, value, np.Labels, np.Annotations, np.Spec.PodSelector.MatchLabels)
	}
}

// netpolYAML is a NetworkPolicy selecting pods labeled app.
func netpolYAML(namespace, name, app string) string {
	return fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: %s
  namespace: %s
spec:
  podSelector:
    matchLabels:
      app: %s
  policyTypes: [Ingress]
`, name, namespace, app)
}

// kubectlWithInput is kubectl with stdin.
func (u pluginUser) kubectlWithInput(ctx context.Context, stdin string, args ...string) pluginRun {
	return u.kubectlStdin(ctx, strings.NewReader(stdin), args...)
}

// expectKubectlWithInput is expectKubectl with stdin.
func (u pluginUser) expectKubectlWithInput(code int, check func(pluginRun) error, stdin string, args ...string) pluginRun {
	u.t.Helper()
	var last pluginRun
	eventually(u.t, u.name+": kubectl "+strings.Join(args, " "), func(ctx context.Context) error {
		last = u.kubectlWithInput(ctx, stdin, args...)
		if last.code != code {
			return fmt.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", last.code, code, last.stdout, last.stderr)
		}
		if check != nil {
			return check(last)
		}
		return nil
	})
	u.t.Logf("%s$ kubectl %s  (exit %d)\n%s%s", u.name, strings.Join(args, " "), last.code, last.stdout, last.stderr)
	return last
}
