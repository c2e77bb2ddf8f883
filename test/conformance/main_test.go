package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

const (
	// toolsBinEnv names the directory of etcd and kube-apiserver, as
	// printed by hack/build-tools.sh.
	toolsBinEnv = "IMPLICIT_TOOLS_BIN"
	// binaryEnv names the implicit-apiserver binary under test.
	binaryEnv = "IMPLICIT_BINARY"
)

var (
	cp       *controlplane.ControlPlane
	implicit *controlplane.AggregatedServer

	// expiredNativeRV and expiredViewRV are resourceVersions each side
	// issued before its restart: older than what either can serve.
	expiredNativeRV, expiredViewRV string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	binDir, binary := os.Getenv(toolsBinEnv), os.Getenv(binaryEnv)
	if binDir == "" || binary == "" {
		fmt.Fprintf(os.Stderr, "conformance tests need %s and %s: run them with `make integration` (or `make test`)\n", toolsBinEnv, binaryEnv)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	work, err := os.MkdirTemp("", "implicit-conformance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start := time.Now()
	// No authorization webhook, guards or controller manager: every
	// request is the admin's, and the suite never deletes a namespace.
	cp, err = controlplane.Start(ctx, controlplane.Options{
		BinDir:  binDir,
		WorkDir: work,
		Logf:    func(f string, a ...any) { fmt.Printf("controlplane: "+f+"\n", a...) },
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the control plane: %v\n", err)
		return 1
	}
	defer cp.Stop()

	// A version older than kube-apiserver's watch cache: one of before a
	// restart of kube-apiserver, whose cache starts at the current version.
	if expiredNativeRV, err = nativeVersionBeforeRestart(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "an expired kube-apiserver version: %v\n%s\n", err, cp.LogTails(40))
		return 1
	}

	implicit, err = cp.StartAggregated(ctx, controlplane.AggregatedServerOptions{Binary: binary, Name: "implicit-apiserver", Args: []string{"-v=2"}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting implicit-apiserver: %v\n%s\n", err, cp.LogTails(40))
		return 1
	}
	if err := registerAndDiscover(ctx, implicit.Port()); err != nil {
		fmt.Fprintf(os.Stderr, "registering the APIService: %v\n%s\n", err, implicit.LogTail(40))
		return 1
	}
	// A version older than the view's history: one of before a restart.
	if expiredViewRV, err = viewVersionBeforeRestart(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "an expired implicit-apiserver version: %v\n%s\n", err, implicit.LogTail(40))
		return 1
	}
	fmt.Printf("control plane and implicit-apiserver ready in %s (work dir %s)\n", time.Since(start).Round(time.Millisecond), work)

	code := m.Run()
	if code != 0 {
		fmt.Printf("implicit-apiserver log tail:\n%s\nlogs in %s\n", implicit.LogTail(60), filepath.Join(work, "logs"))
		return code
	}
	cp.Stop()
	os.RemoveAll(work)
	return 0
}

// nativeVersionBeforeRestart creates and edits a RoleBinding, restarts
// kube-apiserver, and returns the version of the RoleBinding's creation.
func nativeVersionBeforeRestart(ctx context.Context) (string, error) {
	kube, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		return "", err
	}
	const ns = "conf-history"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	rb, err := kube.RbacV1().RoleBindings(ns).Create(ctx, roleBinding(ns, "old", nil), metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	rv := rb.ResourceVersion
	for i := range 3 {
		rb.Labels = map[string]string{"edit": strconv.Itoa(i)}
		if rb, err = kube.RbacV1().RoleBindings(ns).Update(ctx, rb, metav1.UpdateOptions{}); err != nil {
			return "", err
		}
	}
	if err := cp.StopKubeAPIServer(); err != nil {
		return "", err
	}
	return rv, cp.StartKubeAPIServer(ctx)
}

// viewVersionBeforeRestart lists a view, restarts implicit-apiserver, and
// returns the list's version.
func viewVersionBeforeRestart(ctx context.Context) (string, error) {
	dyn, err := dynamic.NewForConfig(cp.AdminConfig())
	if err != nil {
		return "", err
	}
	gvr := schema.GroupVersionResource{Group: "implicit.dev", Version: "v1alpha1", Resource: "rolebindings"}
	var rv string
	list := func(ctx context.Context) (bool, error) {
		l, err := dyn.Resource(gvr).Namespace("conf-history").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		rv = l.GetResourceVersion()
		return true, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, converge, true, list); err != nil {
		return "", fmt.Errorf("listing the view: %w", err)
	}
	old := rv
	if err := implicit.Restart(ctx); err != nil {
		return "", err
	}
	if err := waitAvailableAndDiscovered(ctx); err != nil {
		return "", err
	}
	// Served by the new run: its version differs.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, converge, true, func(ctx context.Context) (bool, error) {
		ok, err := list(ctx)
		return ok && rv != old, err
	})
	if err != nil {
		return "", fmt.Errorf("listing the view after the restart: %w", err)
	}
	return old, nil
}

// registerAndDiscover registers the APIService and waits until kubectl's
// discovery lists the views, not only until the APIService is Available.
func registerAndDiscover(ctx context.Context, port int) error {
	if err := cp.RegisterAPIService(ctx, port); err != nil {
		return err
	}
	return cp.WaitDiscovery(ctx)
}

// waitAvailableAndDiscovered is WaitAPIServiceAvailable, then WaitDiscovery.
func waitAvailableAndDiscovered(ctx context.Context) error {
	if err := cp.WaitAPIServiceAvailable(ctx); err != nil {
		return err
	}
	return cp.WaitDiscovery(ctx)
}
