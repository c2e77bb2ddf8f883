package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

// gnsConfigFile gives networkpolicies the global namespace gnsNetGlobal.
const (
	gnsConfigFile = "testdata/globalns-config.yaml"
	gnsNetGlobal  = "gns-net-global"
)

// TestPerKindGlobalNamespace runs a second implicit-apiserver whose
// configuration gives networkpolicies their own global namespace: tenants
// inherit global NetworkPolicies from gns-net-global only, while
// RoleBindings still come from implicit-global; gns-net-global is never a
// tenant, so its views hold its own objects and it can't be a parent.
func TestPerKindGlobalNamespace(t *testing.T) {
	kube, _ := admin(t)
	ensureNamespace(t, kube, globalNS)

	config, err := filepath.Abs(gnsConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("starting a second implicit-apiserver with networkpolicies' globalNamespace: " + gnsNetGlobal)
	server, err := cp.StartAggregated(t.Context(), controlplane.AggregatedServerOptions{
		Binary: os.Getenv(binaryEnv), Name: "implicit-globalns",
		Args: []string{"-v=2", "--webhook-configuration=", "--config=" + config},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("implicit-globalns log tail:\n%s", server.LogTail(40))
		}
		if err := server.Stop(); err != nil {
			t.Errorf("stopping implicit-globalns: %v", err)
		}
	})
	dyn := directClient(t, server.URL())

	t.Log("gns-net-global holds gns-deny; implicit-global holds gns-old (a NetworkPolicy) and gns-rb (a RoleBinding)")
	createNamespace(t, kube, gnsNetGlobal, nil, nil)
	createNamespace(t, kube, "gns-tenant", nil, nil)
	createNamespace(t, kube, "gns-child", map[string]string{"implicit.dev/parent": gnsNetGlobal}, nil)
	createNetworkPolicy(t, kube, gnsNetGlobal, "gns-deny")
	createNetworkPolicy(t, kube, globalNS, "gns-old")
	createNetworkPolicy(t, kube, "gns-tenant", "gns-local")
	createRoleBinding(t, kube, globalNS, "gns-rb", "view", "gns:viewers")
	createRoleBinding(t, kube, gnsNetGlobal, "gns-rb-net", "view", "gns:net")

	netGlobal := viewItem{Scope: "global", Source: gnsNetGlobal}
	rbGlobal := viewItem{Scope: "global", Source: globalNS}
	local := func(ns string) viewItem { return viewItem{Scope: "local", Source: ns} }

	// implicit-global is no tenant either: its view holds its own objects.
	// Seeing gns-old there proves the server's cache has it, so its absence
	// from the tenants' views below is the merge's doing, not a lag.
	t.Log("the server has seen gns-old: implicit-global's own view shows it as local")
	waitForView(t, dyn, viewNetworkPolicies, globalNS, "gns-", map[string]viewItem{"gns-old": local(globalNS)})

	t.Log("gns-tenant inherits gns-deny from gns-net-global, not gns-old from implicit-global")
	items := waitForView(t, dyn, viewNetworkPolicies, "gns-tenant", "gns-", map[string]viewItem{
		"gns-deny": netGlobal, "gns-local": local("gns-tenant"),
	})
	if got := items["gns-deny"].GetNamespace(); got != "gns-tenant" {
		t.Errorf("gns-deny in gns-tenant's view has namespace %q, want gns-tenant", got)
	}
	t.Log("gns-tenant still inherits RoleBindings from implicit-global, not from gns-net-global")
	waitForView(t, dyn, viewRoleBindings, "gns-tenant", "gns-", map[string]viewItem{"gns-rb": rbGlobal})

	t.Log("gns-net-global is not a tenant: its views hold its own objects only, as local")
	waitForView(t, dyn, viewNetworkPolicies, gnsNetGlobal, "gns-", map[string]viewItem{"gns-deny": local(gnsNetGlobal)})
	waitForView(t, dyn, viewRoleBindings, gnsNetGlobal, "gns-", map[string]viewItem{"gns-rb-net": local(gnsNetGlobal)})

	t.Log("gns-child names gns-net-global as parent: no parent, gns-deny stays global and gns-rb-net is not inherited")
	waitForView(t, dyn, viewNetworkPolicies, "gns-child", "gns-", map[string]viewItem{"gns-deny": netGlobal})
	waitForView(t, dyn, viewRoleBindings, "gns-child", "gns-", map[string]viewItem{"gns-rb": rbGlobal})

	t.Log("the server reports gns-child's parent as invalid")
	eventually(t, "InvalidParent for gns-child in the server's log", func(context.Context) error {
		log, err := os.ReadFile(server.LogPath())
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, `"Hierarchy problem"`) && strings.Contains(line, `namespace="gns-child"`) && strings.Contains(line, `reason="InvalidParent"`) {
				return nil
			}
		}
		return errorf("no Hierarchy problem InvalidParent logged for gns-child")
	})
}

// directClient is a dynamic client that talks to the implicit-apiserver at
// url itself, not through the aggregator: as admin, with the client
// certificate the cluster's client CA signed, trusting the server's
// self-signed serving certificate.
func directClient(t *testing.T, url string) dynamic.Interface {
	t.Helper()
	return directClientOf(t, cp, url)
}

// directClientOf is directClient for a server of the control plane c.
func directClientOf(t *testing.T, c *controlplane.ControlPlane, url string) dynamic.Interface {
	t.Helper()
	cfg := c.AdminConfig()
	cfg.Host = url
	cfg.TLSClientConfig = rest.TLSClientConfig{
		Insecure: true,
		CertData: cfg.CertData, KeyData: cfg.KeyData,
		CertFile: cfg.CertFile, KeyFile: cfg.KeyFile,
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// createNetworkPolicy creates a deny-all-ingress NetworkPolicy and deletes it
// when the test ends.
func createNetworkPolicy(t *testing.T, kube kubernetes.Interface, namespace, name string) {
	t.Helper()
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
	if _, err := kube.NetworkingV1().NetworkPolicies(namespace).Create(t.Context(), np, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating networkpolicy %s/%s: %v", namespace, name, err)
	}
	t.Cleanup(func() {
		err := kube.NetworkingV1().NetworkPolicies(namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting networkpolicy %s/%s: %v", namespace, name, err)
		}
	})
}
