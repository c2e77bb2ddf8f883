package controlplane_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

// TestSharedEtcd runs a hub and a member cluster whose kube-apiserver keeps
// its data in the hub's etcd under /member-1, as make run-fleet does. It
// checks that the two are separate clusters, takes the hub's API away while
// the member keeps working, brings it back on the same port for the same
// clients, and stops the member with its kube-apiserver down.
func TestSharedEtcd(t *testing.T) {
	_, err := os.Stat(filepath.Join(os.Getenv(toolsBinEnv), controlplane.ControllerManagerBinary))
	withControllerManager := err == nil
	// The hub runs the member's etcd, so it must stop last: its lifetime
	// outlives t.Context() (which ends before any Cleanup) and it stops in
	// its Cleanup, after the member's (Cleanups run last in, first out).
	hub := startControlPlaneWithContext(t, context.WithoutCancel(t.Context()), controlplane.Options{StartControllerManager: withControllerManager})
	member := startControlPlane(t, controlplane.Options{
		ExternalEtcdURL:        hub.EtcdURL(),
		EtcdPrefix:             "/member-1",
		StartControllerManager: withControllerManager,
	})
	if !withControllerManager {
		t.Logf("no %s built: its reconnection and its stop without kube-apiserver are not checked", controlplane.ControllerManagerBinary)
	}
	ctx := t.Context()

	t.Log("the member runs no etcd of its own and keeps its keys under /member-1 in the hub's")
	if member.Etcd() != nil {
		t.Errorf("member.Etcd() = %s, want nil with an external etcd", member.Etcd().Name())
	}
	if member.EtcdURL() != hub.EtcdURL() {
		t.Errorf("member.EtcdURL() = %s, want the hub's %s", member.EtcdURL(), hub.EtcdURL())
	}
	if hub.EtcdPrefix() != controlplane.DefaultEtcdPrefix || member.EtcdPrefix() != "/member-1" {
		t.Errorf("EtcdPrefix: hub %q, member %q; want %q and /member-1", hub.EtcdPrefix(), member.EtcdPrefix(), controlplane.DefaultEtcdPrefix)
	}
	for _, want := range []string{"--etcd-servers=" + hub.EtcdURL(), "--etcd-prefix=/member-1"} {
		if !slices.Contains(member.KubeAPIServer().Args(), want) {
			t.Errorf("member's kube-apiserver args %q lack %q", member.KubeAPIServer().Args(), want)
		}
	}
	if slices.ContainsFunc(hub.KubeAPIServer().Args(), func(a string) bool { return strings.HasPrefix(a, "--etcd-prefix") }) {
		t.Errorf("hub's kube-apiserver args %q set --etcd-prefix; without Options.EtcdPrefix, kube-apiserver's default applies", hub.KubeAPIServer().Args())
	}

	hubClient := newClient(t, hub.AdminConfig())
	memberClient := newClient(t, member.AdminConfig())

	t.Log("a namespace created on one cluster is not visible on the other")
	createNamespace(t, hubClient, "on-hub")
	createNamespace(t, memberClient, "on-member")
	checkNamespace(t, hubClient, "hub", "on-hub", true)
	checkNamespace(t, hubClient, "hub", "on-member", false)
	checkNamespace(t, memberClient, "member", "on-member", true)
	checkNamespace(t, memberClient, "member", "on-hub", false)

	t.Log("each cluster has its own PKI: the member's admin is a stranger to the hub")
	stranger := member.AdminConfig()
	stranger.Host, stranger.CAData = hub.APIServerURL(), hub.AdminConfig().CAData
	if _, err := newClient(t, stranger).CoreV1().Namespaces().Get(ctx, "on-hub", metav1.GetOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("the member's admin against the hub: err = %v, want Unauthorized", err)
	}

	t.Log("stopping the hub's kube-apiserver")
	first := hub.KubeAPIServer()
	if err := hub.StopKubeAPIServer(); err != nil {
		t.Fatalf("StopKubeAPIServer: %v", err)
	}
	select {
	case <-first.Exited():
	default:
		t.Fatal("the hub's kube-apiserver still runs after StopKubeAPIServer")
	}
	if err := hub.StopKubeAPIServer(); err != nil {
		t.Errorf("StopKubeAPIServer again: %v, want nil", err)
	}
	if hub.KubeAPIServer() != first {
		t.Error("KubeAPIServer() after StopKubeAPIServer is not the last run")
	}
	shortCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = hubClient.CoreV1().Namespaces().Get(shortCtx, "on-hub", metav1.GetOptions{})
	cancel()
	if err == nil {
		t.Error("the hub answers with its kube-apiserver stopped")
	} else {
		t.Logf("the hub's admin client, as expected: %v", err)
	}

	t.Log("the member keeps working on the hub's etcd")
	createNamespace(t, memberClient, "during-outage")
	checkNamespace(t, memberClient, "member", "during-outage", true)
	if withControllerManager {
		select {
		case <-hub.ControllerManager().Exited():
			t.Fatalf("the hub's kube-controller-manager exited without its kube-apiserver; log ends with:\n%s", hub.ControllerManager().LogTail(20))
		default:
		}
	}

	t.Log("starting the hub's kube-apiserver again")
	url := hub.APIServerURL()
	if err := hub.StartKubeAPIServer(ctx); err != nil {
		t.Fatalf("StartKubeAPIServer: %v", err)
	}
	second := hub.KubeAPIServer()
	if second == first || second.Pid() == first.Pid() {
		t.Error("KubeAPIServer() after StartKubeAPIServer is still the first run")
	}
	if hub.APIServerURL() != url || !slices.Equal(second.Args(), first.Args()) {
		t.Errorf("after StartKubeAPIServer: URL %s (was %s), args %q (were %q); want both unchanged", hub.APIServerURL(), url, second.Args(), first.Args())
	}
	t.Log("the admin client built before the outage, and the admin kubeconfig, work again")
	checkNamespace(t, hubClient, "hub", "on-hub", true)
	if stdout, _, err := hub.Kubectl(ctx, "get", "namespace", "on-hub", "-o", "name"); err != nil || strings.TrimSpace(stdout) != "namespace/on-hub" {
		t.Errorf("kubectl get namespace on-hub with the hub's kubeconfig = %q, %v; want namespace/on-hub", stdout, err)
	}
	if err := hub.StartKubeAPIServer(ctx); err == nil {
		t.Error("StartKubeAPIServer while it runs: err = nil, want an error")
	}

	if withControllerManager {
		t.Log("the hub's kube-controller-manager kept running and reconnected: it finalizes a namespace deletion")
		if err := hubClient.CoreV1().Namespaces().Delete(ctx, "on-hub", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting namespace on-hub: %v", err)
		}
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := hubClient.CoreV1().Namespaces().Get(ctx, "on-hub", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Fatalf("namespace on-hub still there after deletion: %v", err)
		}
	}

	t.Log("Stop after StopKubeAPIServer: the member stops cleanly with its kube-apiserver down")
	procs := []*controlplane.Process{member.KubeAPIServer()}
	if withControllerManager {
		procs = append(procs, member.ControllerManager())
	}
	if err := member.StopKubeAPIServer(); err != nil {
		t.Fatalf("member's StopKubeAPIServer: %v", err)
	}
	stopStart := time.Now()
	if err := member.Stop(); err != nil {
		t.Fatalf("member's Stop after StopKubeAPIServer: %v", err)
	}
	t.Logf("member stopped in %s", time.Since(stopStart).Round(time.Millisecond))
	for _, p := range procs {
		select {
		case <-p.Exited():
		default:
			t.Errorf("member's %s still running after Stop", p.Name())
		}
		if err := syscall.Kill(-p.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group of the member's %s (%d) after Stop: kill 0 = %v, want ESRCH", p.Name(), p.Pid(), err)
		}
	}
	if err := member.StartKubeAPIServer(ctx); err == nil {
		t.Error("StartKubeAPIServer after Stop: err = nil, want an error")
	}
	t.Log("the hub still runs")
	checkNamespace(t, hubClient, "hub", "default", true)
}

func newClient(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func createNamespace(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

// checkNamespace checks that namespace name exists on cluster, or not.
func checkNamespace(t *testing.T, c kubernetes.Interface, cluster, name string, want bool) {
	t.Helper()
	_, err := c.CoreV1().Namespaces().Get(t.Context(), name, metav1.GetOptions{})
	switch {
	case want && err != nil:
		t.Errorf("namespace %s on the %s: %v, want it there", name, cluster, err)
	case !want && !apierrors.IsNotFound(err):
		t.Errorf("namespace %s on the %s: err = %v, want NotFound", name, cluster, err)
	}
}
