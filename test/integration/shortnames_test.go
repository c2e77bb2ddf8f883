package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
)

// snCRD is a CustomResourceDefinition whose short names take irb, the
// RoleBindings view's.
const snCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ironbars.metal.example.com
spec:
  group: metal.example.com
  scope: Namespaced
  names: {plural: ironbars, singular: ironbar, kind: IronBar, listKind: IronBarList, shortNames: [irb]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// TestShortNameTakenByCRD: a CRD installed with a view's short name (irb)
// keeps it. While the collision lasts, implicit.dev's discovery leaves irb
// out of rolebindings.implicit.dev, so kubectl (with a fresh discovery
// cache) resolves irb to the CRD as its author meant; once the CRD is gone,
// irb is the view's again.
func TestShortNameTakenByCRD(t *testing.T) {
	kube, _ := admin(t)
	ensureNamespace(t, kube, globalNS)
	adm := pluginUser{t: t, name: "admin", path: buildPlugin(t), kubeconfig: cp.KubeconfigPath(), home: t.TempDir()}
	createNamespace(t, kube, "sn-team", nil, nil)
	createRoleBinding(t, kube, "sn-team", "sn-binding", "view", "sn-readers")
	dc, err := discovery.NewDiscoveryClientForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	viewShortNames := func() ([]string, error) {
		l, err := dc.ServerResourcesForGroupVersion("implicit.dev/v1alpha1")
		if err != nil {
			return nil, err
		}
		for _, r := range l.APIResources {
			if r.Name == "rolebindings" {
				return r.ShortNames, nil
			}
		}
		return nil, errorf("implicit.dev/v1alpha1 serves no rolebindings")
	}
	// getIRB is kubectl get irb with a discovery cache of its own, as a
	// user who never ran kubectl against this cluster would have.
	getIRB := func(ctx context.Context) pluginRun {
		return adm.kubectl(ctx, "get", "irb", "-n", "sn-team", "-o", "name", "--cache-dir="+t.TempDir())
	}
	eventually(t, "irb is the view's", func(ctx context.Context) error {
		if r := getIRB(ctx); r.code != 0 || !strings.Contains(r.stdout, "rolebinding.implicit.dev/sn-binding") {
			return errorf("kubectl get irb: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		return nil
	})

	t.Log("a CRD takes irb, and an IronBar is made")
	if r := adm.kubectlStdin(t.Context(), strings.NewReader(snCRD), "apply", "-f", "-"); r.code != 0 {
		t.Fatalf("kubectl apply the CRD: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Cleanup(func() {
		adm.kubectl(context.Background(), "delete", "crd", "ironbars.metal.example.com", "--ignore-not-found")
	})
	eventually(t, "the CRD established", func(ctx context.Context) error {
		r := adm.kubectlStdin(ctx, strings.NewReader("apiVersion: metal.example.com/v1\nkind: IronBar\nmetadata:\n  name: sn-bar\n  namespace: sn-team\n"), "apply", "-f", "-")
		if r.code != 0 {
			return errorf("kubectl apply the IronBar: exit %d\n%s", r.code, r.stderr)
		}
		return nil
	})

	t.Log("implicit.dev's discovery leaves irb out while the CRD has it; kubectl get irb lists the IronBars")
	eventually(t, "irb left out of rolebindings.implicit.dev", func(context.Context) error {
		sn, err := viewShortNames()
		if err != nil {
			return err
		}
		if slices.Contains(sn, "irb") {
			return errorf("rolebindings.implicit.dev still has the short names %v", sn)
		}
		return nil
	})
	// kube-aggregator refreshes an APIService's aggregated discovery about
	// once a minute: kubectl, even with a fresh cache, may see the old
	// short names until then.
	eventuallyWithin(t, time.Second, discoveryRefresh, "kubectl resolves irb to the CRD", func(ctx context.Context) error {
		r := getIRB(ctx)
		if r.code != 0 || !strings.Contains(r.stdout, "ironbar.metal.example.com/sn-bar") || strings.Contains(r.stdout, "rolebinding") {
			return errorf("kubectl get irb: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		t.Logf("kubectl get irb -n sn-team -o name:\n%s%s", r.stdout, r.stderr)
		return nil
	})

	t.Log("the CRD is deleted: irb is the view's again")
	if r := adm.kubectl(t.Context(), "delete", "crd", "ironbars.metal.example.com", "--wait=true"); r.code != 0 {
		t.Fatalf("kubectl delete crd: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	eventually(t, "irb back in rolebindings.implicit.dev", func(context.Context) error {
		sn, err := viewShortNames()
		if err != nil {
			return err
		}
		if !slices.Contains(sn, "irb") {
			return errorf("rolebindings.implicit.dev has the short names %v", sn)
		}
		return nil
	})
	eventuallyWithin(t, time.Second, discoveryRefresh, "kubectl resolves irb to the view", func(ctx context.Context) error {
		if r := getIRB(ctx); r.code != 0 || !strings.Contains(r.stdout, "rolebinding.implicit.dev/sn-binding") {
			return errorf("kubectl get irb: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		return nil
	})
}
