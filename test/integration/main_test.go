package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

const (
	// toolsBinEnv names the directory of etcd, kube-apiserver and
	// kube-controller-manager, as printed by hack/build-tools.sh.
	toolsBinEnv = "IMPLICIT_TOOLS_BIN"
	// binaryEnv names the implicit-apiserver binary under test.
	binaryEnv = "IMPLICIT_BINARY"

	globalNS = "implicit-global"

	// configFile is the suite's ImplicitConfiguration: the defaults and
	// guardrails.policy.example.com, whose CRD the suite creates.
	configFile = "testdata/implicit-config.yaml"
)

var (
	cp       *controlplane.ControlPlane
	implicit *controlplane.AggregatedServer
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	binDir, binary := os.Getenv(toolsBinEnv), os.Getenv(binaryEnv)
	if binDir == "" || binary == "" {
		fmt.Fprintf(os.Stderr, "integration tests need %s and %s: run them with `make integration` (or `make test`)\n", toolsBinEnv, binaryEnv)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	work, err := os.MkdirTemp("", "implicit-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// kube-apiserver asks implicit-apiserver's authorization webhook after
	// Node and RBAC: its port and certificate are fixed before either starts.
	webhook, err := controlplane.PrepareAuthorizationWebhook(work, "implicit-apiserver", authz.Path,
		authz.MatchCondition(globalNS, []string{"kube-system", "kube-public", "kube-node-lease"}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start := time.Now()
	cp, err = controlplane.Start(ctx, controlplane.Options{
		BinDir:                 binDir,
		WorkDir:                work,
		KubeAPIServerArgs:      webhook.KubeAPIServerArgs,
		StartControllerManager: true,
		Logf:                   func(f string, a ...any) { fmt.Printf("controlplane: "+f+"\n", a...) },
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the control plane: %v\n", err)
		return 1
	}
	defer cp.Stop()

	config, err := filepath.Abs(configFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The server runs as its Deployment does: as its ServiceAccount, with
	// the shipped RBAC only (identity_test.go).
	identity, err := deploymentIdentity(ctx, cp)
	if err != nil {
		fmt.Fprintf(os.Stderr, "setting up the server's identity: %v\n", err)
		return 1
	}
	args := append([]string{"-v=2", "--webhook-configuration=" + controlplane.GuardsConfiguration, "--config=" + config}, cp.WebhookServerArgs()...)
	implicit, err = cp.StartAggregated(ctx, controlplane.AggregatedServerOptions{Binary: binary, Name: "implicit-apiserver", Port: webhook.Port, Args: append(args, identityArgs(identity)...)})
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting implicit-apiserver: %v\n%s\n", err, cp.LogTails(40))
		return 1
	}
	if err := cp.RegisterAPIService(ctx, implicit.Port()); err != nil {
		fmt.Fprintf(os.Stderr, "registering the APIService: %v\n%s\n", err, implicit.LogTail(40))
		return 1
	}
	if err := cp.RegisterGuards(ctx, implicit, servedSources()); err != nil {
		fmt.Fprintf(os.Stderr, "registering the admission guards: %v\n", err)
		return 1
	}
	fmt.Printf("control plane and implicit-apiserver ready in %s (work dir %s)\n", time.Since(start).Round(time.Millisecond), work)

	code := m.Run()
	if code == 0 {
		if err := checkNoForbidden(implicit.LogPath()); err != nil {
			fmt.Println(err)
			code = 1
		}
	}
	if code != 0 {
		fmt.Printf("implicit-apiserver log tail:\n%s\nlogs in %s\n", implicit.LogTail(60), filepath.Join(work, "logs"))
		return code
	}
	cp.Stop()
	os.RemoveAll(work)
	return 0
}

// servedSources are the source resources of the default views.
func servedSources() []schema.GroupResource {
	var out []schema.GroupResource
	for _, k := range kinds.BuiltIns() {
		out = append(out, k.Source.GroupResource())
	}
	return out
}
