package controlplane_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

// toolsBinEnv names the directory of etcd, kube-apiserver and
// kube-controller-manager (hack/build-tools.sh prints it; the Makefile sets
// the variable).
const toolsBinEnv = "IMPLICIT_TOOLS_BIN"

func TestMain(m *testing.M) {
	if slices.Contains(os.Args[1:], fakeAggregatedFlag) {
		if err := runFakeAggregated(); err != nil {
			fmt.Fprintln(os.Stderr, "fake aggregated server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startControlPlane starts a control plane for t from the binaries in
// $IMPLICIT_TOOLS_BIN, skipping t when it is unset, and stops it when t
// ends, printing the logs' tails if t failed.
func startControlPlane(t *testing.T, opts controlplane.Options) *controlplane.ControlPlane {
	t.Helper()
	return startControlPlaneWithContext(t, t.Context(), opts)
}

// startControlPlaneWithContext is startControlPlane with ctx as the control
// plane's lifetime (see controlplane.Start) instead of t.Context(), which
// ends before any Cleanup runs.
func startControlPlaneWithContext(t *testing.T, ctx context.Context, opts controlplane.Options) *controlplane.ControlPlane {
	t.Helper()
	opts.BinDir = os.Getenv(toolsBinEnv)
	if opts.BinDir == "" {
		t.Skipf("%s is not set; run hack/build-tools.sh and set it to the directory it prints", toolsBinEnv)
	}
	opts.WorkDir = t.TempDir()
	opts.Logf = t.Logf
	start := time.Now()
	cp, err := controlplane.Start(ctx, opts)
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Logf("control plane started in %s", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", cp.LogTails(30))
		}
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	return cp
}

// TestControlPlane starts a real etcd and kube-apiserver (and
// kube-controller-manager when it has been built), talks to them with
// client-go and kubectl, and stops them.
func TestControlPlane(t *testing.T) {
	_, err := os.Stat(filepath.Join(os.Getenv(toolsBinEnv), controlplane.ControllerManagerBinary))
	withControllerManager := err == nil
	cp := startControlPlane(t, controlplane.Options{StartControllerManager: withControllerManager})
	if !withControllerManager {
		t.Logf("no %s built: namespace deletion is not checked", controlplane.ControllerManagerBinary)
	}
	ctx := t.Context()

	if _, err := os.Stat(cp.KubeconfigPath()); err != nil {
		t.Fatalf("admin kubeconfig: %v", err)
	}
	client, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}

	t.Log("creating a namespace with client-go")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}

	t.Log("listing namespaces with kubectl")
	stdout, stderr, err := cp.Kubectl(ctx, "get", "namespaces", "-o", "name")
	if err != nil {
		t.Fatalf("kubectl: %v", err)
	}
	if !strings.Contains(stdout, "namespace/team-a") {
		t.Errorf("kubectl get namespaces = %q (stderr %q), want namespace/team-a in it", stdout, stderr)
	}

	t.Log("a user without RBAC grants is authenticated but forbidden")
	userCfg, err := cp.UserConfig("alice", "tenants")
	if err != nil {
		t.Fatal(err)
	}
	userClient, err := kubernetes.NewForConfig(userCfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = userClient.CoreV1().Namespaces().Get(ctx, "team-a", metav1.GetOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `"alice"`) {
		t.Errorf("get namespace as alice: err = %v, want Forbidden for alice", err)
	}

	if withControllerManager {
		t.Log("deleting the namespace; kube-controller-manager finalizes it")
		if err := client.CoreV1().Namespaces().Delete(ctx, "team-a", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting namespace: %v", err)
		}
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := client.CoreV1().Namespaces().Get(ctx, "team-a", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Fatalf("namespace team-a still there after deletion: %v", err)
		}
	}

	t.Log("stopping")
	procs := []*controlplane.Process{cp.Etcd(), cp.KubeAPIServer()}
	if withControllerManager {
		procs = append(procs, cp.ControllerManager())
	}
	stopStart := time.Now()
	if err := cp.Stop(); err != nil {
		t.Fatalf("stopping: %v", err)
	}
	t.Logf("stopped in %s", time.Since(stopStart).Round(time.Millisecond))
	for _, p := range procs {
		select {
		case <-p.Exited():
		default:
			t.Errorf("%s still running after Stop", p.Name())
		}
		if err := syscall.Kill(-p.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group of %s (%d) after Stop: kill 0 = %v, want ESRCH", p.Name(), p.Pid(), err)
		}
	}
	if _, err := os.Stat(cp.Etcd().LogPath()); err != nil {
		t.Errorf("etcd's log should stay after Stop: %v", err)
	}
}

// TestAggregatedServer runs this test binary as a fake aggregated server
// (see fake_aggregated_test.go) behind the aggregation layer, restarts it,
// and checks what kube-apiserver's proxy tells it about the user.
func TestAggregatedServer(t *testing.T) {
	cp := startControlPlane(t, controlplane.Options{})
	ctx := t.Context()

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Log("starting the fake aggregated server")
	a, err := cp.StartAggregated(ctx, controlplane.AggregatedServerOptions{Binary: self, Args: []string{fakeAggregatedFlag}, Name: "fake-aggregated"})
	if err != nil {
		t.Fatalf("StartAggregated: %v", err)
	}
	for _, want := range []string{"--secure-port=" + strconv.Itoa(a.Port()), "--kubeconfig=" + cp.KubeconfigPath(), "--cert-dir=" + a.CertDir()} {
		if !slices.Contains(a.Args(), want) {
			t.Errorf("aggregated server args %q lack %q", a.Args(), want)
		}
	}

	t.Log("registering it")
	if err := cp.RegisterAPIService(ctx, a.Port()); err != nil {
		t.Fatalf("RegisterAPIService: %v", err)
	}
	checkWhoami(t, cp)
	stdout, _, err := cp.Kubectl(ctx, "api-versions")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, controlplane.APIGroup+"/"+controlplane.APIVersion) {
		t.Errorf("kubectl api-versions = %q, want %s/%s in it", stdout, controlplane.APIGroup, controlplane.APIVersion)
	}

	t.Log("restarting it on the same port")
	port, first := a.Port(), a.Process()
	if err := a.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	select {
	case <-first.Exited():
	default:
		t.Error("the first run still runs after Restart")
	}
	if a.Port() != port || a.Process() == first {
		t.Errorf("after Restart: port %d (was %d), new process: %v", a.Port(), port, a.Process() != first)
	}
	if err := cp.WaitAPIServiceAvailable(ctx); err != nil {
		t.Fatal(err)
	}
	checkWhoami(t, cp)

	t.Log("registering again is an update")
	if err := cp.RegisterAPIService(ctx, a.Port()); err != nil {
		t.Fatalf("second RegisterAPIService: %v", err)
	}
}

// checkWhoami asks the fake aggregated server, through kube-apiserver, who
// the caller is: admin in system:masters, proxied with the front-proxy
// client certificate.
func checkWhoami(t *testing.T, cp *controlplane.ControlPlane) {
	t.Helper()
	stdout, _, err := cp.Kubectl(t.Context(), "get", "--raw", whoamiPath)
	if err != nil {
		t.Fatalf("whoami through the aggregation layer: %v", err)
	}
	var got whoami
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("decoding %q: %v", stdout, err)
	}
	if got.User != "admin" || !slices.Contains(got.Groups, "system:masters") || got.ProxyCN != "front-proxy-client" || got.ProxyIssuer != "implicit-dev-front-proxy-ca" {
		t.Errorf("whoami = %+v, want admin in system:masters proxied by front-proxy-client (issuer implicit-dev-front-proxy-ca)", got)
	}
}
