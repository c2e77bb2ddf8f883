package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// TestLocalUpExceptionCopy (issue 42): with NetworkPolicies delivered as
// copies in `make run`, an exception of a global NetworkPolicy takes its
// copy out of the namespace (an engine reading real objects stops
// enforcing it there), and at the exception's end the server's expiry mark
// brings the copy back within two seconds of the mark, while the other
// namespaces' copies never move. The server runs as its own ServiceAccount
// with the chart's RBAC: the mark is its own write, through the guards.
func TestLocalUpExceptionCopy(t *testing.T) {
	path := buildPlugin(t)
	work, stop := runLocalUp(t, "test/integration/testdata/localup-materialize.yaml")
	defer stop()
	kubeconfig := filepath.Join(work, "admin.kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := t.Context()
	admin := pluginUser{t: t, name: "admin", path: path, kubeconfig: kubeconfig, home: localUpHome(work)}

	t.Log("an unlocked global allow-dns is copied into every tenant")
	admin.expectKubectlWithInput(0, nil, netpolYAML(implicitGlobalNS, "allow-dns", "global-dns"), "apply", "-f", "-")
	deny, dns := implicitGlobalNS+":", implicitGlobalNS+":global-dns"
	both := map[string]string{"default-deny-ingress": deny, "allow-dns": dns}
	waitForCopies(t, kube, "copies of allow-dns", map[string]map[string]string{"org-platform": both, "team-a": both, "team-b": both})

	t.Log("team-a's exception of allow-dns, ending 25 s from now: team-a's copy goes, the others stay")
	admin.expectKubectl(0, nil, "implicit", "exceptions", "request", "dns-waiver", "-n", "team-a",
		"--exclude", "networkpolicies/allow-dns", "--reason", "TICKET-42: DNS through the node-local cache", "--expires", "25s")
	only := map[string]string{"default-deny-ingress": deny}
	waitForCopies(t, kube, "team-a's copy of allow-dns deleted", map[string]map[string]string{"org-platform": both, "team-a": only, "team-b": both})

	t.Log("at the end: the server's mark, then team-a's copy again")
	nsWatch, err := kube.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "team-a").String()})
	if err != nil {
		t.Fatal(err)
	}
	defer nsWatch.Stop()
	npWatch, err := kube.NetworkingV1().NetworkPolicies("team-a").Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "allow-dns").String()})
	if err != nil {
		t.Fatal(err)
	}
	defer npWatch.Stop()
	var marked, copied time.Time
	deadline := time.After(90 * time.Second)
	for marked.IsZero() || copied.IsZero() {
		select {
		case ev := <-nsWatch.ResultChan():
			if ns, ok := ev.Object.(*corev1.Namespace); ok && marked.IsZero() {
				for _, e := range merge.ExceptionsOf(merge.NamespaceOf(ns)) {
					if e.Name == "dns-waiver" && e.Expired {
						marked = time.Now()
						if !e.Ends().Before(marked) {
							t.Errorf("marked expired at %s, before its end %s", marked, e.Ends())
						}
					}
				}
			}
		case ev := <-npWatch.ResultChan():
			if np, ok := ev.Object.(*networkingv1.NetworkPolicy); ok && ev.Type == watch.Added && copied.IsZero() {
				copied = time.Now()
				if np.Labels[v1alpha1.LabelMaterialized] != "true" {
					t.Errorf("team-a's allow-dns came back without %s: %v", v1alpha1.LabelMaterialized, np.Labels)
				}
			}
		case <-deadline:
			t.Fatalf("90 s: marked %v, copied %v", !marked.IsZero(), !copied.IsZero())
		}
	}
	gap := copied.Sub(marked)
	t.Logf("the copy came back %s after the mark was seen", gap.Round(time.Millisecond))
	if gap < 0 {
		t.Errorf("the copy came back %s before the mark: something other than the mark ended the exception", -gap)
	}
	if gap > 2*time.Second {
		t.Errorf("the copy came back %s after the mark, want within 2 s", gap)
	}
	waitForCopies(t, kube, "every copy as before the exception", map[string]map[string]string{"org-platform": both, "team-a": both, "team-b": both})
	admin.expectKubectl(0, func(r pluginRun) error {
		for _, w := range []string{"dns-waiver", "Expired", "TICKET-42"} {
			if !strings.Contains(r.stdout, w) {
				return fmt.Errorf("no %q in:\n%s", w, r.stdout)
			}
		}
		return nil
	}, "implicit", "exceptions", "-n", "team-a")
	if _, err := kube.NetworkingV1().NetworkPolicies("team-a").Get(ctx, "allow-dns", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Error("team-a's copy of allow-dns is gone again")
	}
}
