package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Kubectl runs kubectl (Options.Kubectl, default the one on PATH) as admin:
// "kubectl --kubeconfig=<admin kubeconfig> --cache-dir=<work dir>/kubectl-cache
// args...". A later --kubeconfig in args wins, so a kubeconfig from
// WriteUserKubeconfig runs it as another user. The discovery cache is the
// control plane's own, never the user's ~/.kube/cache: a discovery
// written there while an APIService is new (implicit.dev not listed yet)
// would make the user's next `kubectl get implicit` fail. The error, for a
// failed run, includes the command and its stderr.
func (cp *ControlPlane) Kubectl(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	return cp.KubectlWithInput(ctx, nil, args...)
}

// KubectlWithInput is Kubectl with stdin, e.g. for "apply -f -".
func (cp *ControlPlane) KubectlWithInput(ctx context.Context, stdin io.Reader, args ...string) (stdout, stderr string, err error) {
	full := append([]string{"--kubeconfig=" + cp.kubeconfigPath, "--cache-dir=" + filepath.Join(cp.workDir, "kubectl-cache")}, args...)
	cmd := exec.CommandContext(ctx, cp.opts.Kubectl, full...)
	var out, errOut bytes.Buffer
	cmd.Stdin = stdin
	cmd.Stdout = &out
	cmd.Stderr = &errOut
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), errOut.String(), err
}
