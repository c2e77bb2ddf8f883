package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// localUpStart bounds how long local-up may take to print "Everything
// runs." (about 40 s on a quiet machine with the tools built).
const localUpStart = 4 * time.Minute

// TestLocalUpTenant runs `make run`'s local-up (hack/local-up, with the
// flags the Makefile passes) on a control plane of its own, and runs the
// README tour's tenant half as a user types it: `kubectl get implicit`,
// `kubectl implicit why` and `kubectl implicit tree`, impersonating a
// namespace admin of the examples with --as and --as-group, the plugin
// found on PATH. The admin of a namespace reads its views and asks its
// questions only through the ClusterRoles the chart installs for users
// (artifacts/base/clusterrole-implicit-*.yaml), which local-up applies: if
// it stops applying them, this test fails with Forbidden.
func TestLocalUpTenant(t *testing.T) {
	path := buildPlugin(t)
	work, stopLocalUp := runLocalUp(t, "")
	defer stopLocalUp()

	kubeconfig := filepath.Join(work, "admin.kubeconfig")
	t.Log("local-up's own kubectl runs leave no discovery cache in its HOME: one written while implicit.dev was not listed yet would be the user's kubectl's next answer")
	if _, err := os.Stat(filepath.Join(localUpHome(work), ".kube", "cache")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("local-up wrote %s/.kube/cache (stat: %v); its kubectl runs should keep their cache in the work directory", localUpHome(work), err)
	}
	t.Log("as soon as local-up says everything runs, `kubectl get implicit` works at the first try, with the kubectl cache of local-up's HOME and with none")
	for _, home := range []string{localUpHome(work), t.TempDir()} {
		first := pluginUser{t: t, name: "admin", path: path, kubeconfig: kubeconfig, home: home}
		r := first.kubectl(t.Context(), "get", "implicit", "-n", "team-a")
		t.Logf("$ HOME=%s kubectl get implicit -n team-a  (exit %d)\n%s%s", home, r.code, r.stdout, r.stderr)
		if r.code != 0 || !strings.Contains(r.stdout, "rolebinding.implicit.dev/team-a-devs") {
			t.Errorf("kubectl get implicit right after local-up said everything runs: exit %d, want 0 and team-a's views", r.code)
		}
	}

	// The examples' platform:admins are admin of org-platform (its
	// RoleBinding platform-admins), and so of team-a and team-b, which
	// inherit the binding (the authorization webhook grants it there).
	asAdmin := []string{"--as=pat", "--as-group=platform:admins"}
	u := pluginUser{t: t, name: "pat", path: path, kubeconfig: kubeconfig, home: t.TempDir()}
	contains := func(wants ...string) func(pluginRun) error {
		return func(r pluginRun) error {
			for _, w := range wants {
				if !strings.Contains(r.stdout, w) {
					return fmt.Errorf("no %q in the output", w)
				}
			}
			return nil
		}
	}

	t.Log("a namespace admin lists every view of team-a")
	u.expectKubectl(0, contains(
		"rolebinding.implicit.dev/team-a-devs", "rolebinding.implicit.dev/platform-admins",
		"role.implicit.dev/org-config-reader", "networkpolicy.implicit.dev/default-deny-ingress",
	), append([]string{"get", "implicit", "-n", "team-a"}, asAdmin...)...)

	t.Log("... asks why ci-bot is not in team-b's view")
	u.expectKubectl(0, contains("rolebindings/ci-bot is not in the view of team-b", "Excluded"),
		append([]string{"implicit", "why", "rolebinding", "ci-bot", "-n", "team-b"}, asAdmin...)...)

	t.Log("... and prints org-platform's tree")
	u.expectKubectl(0, contains("org-platform\n├── team-a\n└── team-b\n"),
		append([]string{"implicit", "tree", "-n", "org-platform"}, asAdmin...)...)

	t.Log("without -n, the plugin asks about the kubeconfig's namespace, not default")
	teamA := filepath.Join(t.TempDir(), "team-a.kubeconfig")
	b, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(teamA, b, 0o600); err != nil {
		t.Fatal(err)
	}
	inTeamA := u
	inTeamA.kubeconfig = teamA
	inTeamA.expectKubectl(0, nil, "config", "set-context", "--current", "--namespace=team-a")
	inTeamA.expectKubectl(0, contains("org-platform\n└── team-a\n"), append([]string{"implicit", "tree"}, asAdmin...)...)
	inTeamA.expectKubectl(0, contains("rolebindings/ci-bot is in the view of team-a"),
		append([]string{"implicit", "why", "rolebinding", "ci-bot"}, asAdmin...)...)

	t.Log("naming no namespace the admin may read says how to name one")
	u.expectKubectl(1, func(r pluginRun) error {
		if !strings.Contains(r.stderr, `hierarchies.implicit.dev "default" is forbidden`) || !strings.Contains(r.stderr, "kubectl implicit tree NAMESPACE") {
			return fmt.Errorf("stderr %q: want the Forbidden and how to name a namespace", r.stderr)
		}
		return nil
	}, append([]string{"implicit", "tree"}, asAdmin...)...)

	t.Log("a team's edit reads its effective NetworkPolicies, not its RoleBindings")
	asDev := []string{"--as=dev", "--as-group=team-a:devs"}
	u.expectKubectl(0, contains("default-deny-ingress"), append([]string{"get", "networkpolicies.implicit.dev", "-n", "team-a"}, asDev...)...)
	u.expectKubectl(1, func(r pluginRun) error {
		if !strings.Contains(r.stderr, "Forbidden") {
			return fmt.Errorf("stderr %q: want Forbidden", r.stderr)
		}
		return nil
	}, append([]string{"get", "rolebindings.implicit.dev", "-n", "team-a"}, asDev...)...)

	t.Log("the README's locks section as typed: a refused change prints no guard's warning; an allowed one its reach")
	// The README's numbers: the four tenants of the examples inherit the
	// global namespace's sources; the global namespace itself is no reach.
	warns := func(r pluginRun) error {
		if !regexp.MustCompile(`(?m)^Warning: implicit\.dev: this change reaches 4 namespaces$`).MatchString(r.stderr) {
			return fmt.Errorf("stderr %q: want the fan-out warning of the README, reaching 4 namespaces", r.stderr)
		}
		return nil
	}
	// A dry run first, repeated until the server has seen every example
	// tenant (the warning counts them); the create itself then runs once
	// (a repeated create would meet its own object).
	create := []string{"create", "rolebinding", "alice-admin", "-n", "implicit-global", "--clusterrole=admin", "--user=alice"}
	u.expectKubectl(0, warns, append(create, "--dry-run=server")...)
	u.expectKubectl(0, warns, create...)
	u.expectKubectl(1, func(r pluginRun) error {
		if !strings.Contains(r.stderr, `admission webhook "locks.implicit.dev" denied the request`) || strings.Contains(r.stderr, "this change reaches") {
			return fmt.Errorf("stderr %q: want the lock guard's denial and no fan-out warning", r.stderr)
		}
		return nil
	}, "label", "rolebinding", "org-security-auditors", "-n", "implicit-global", "tier=org", "--as=alice")
	u.expectKubectl(0, nil, "create", "role", "unlock-org-security-auditors", "-n", "implicit-global", "--verb=unlock",
		"--resource=rolebindings.rbac.authorization.k8s.io", "--resource-name=org-security-auditors")
	u.expectKubectl(0, warns, "create", "rolebinding", "alice-unlocks", "-n", "implicit-global", "--role=unlock-org-security-auditors", "--user=alice")
	r := u.kubectl(t.Context(), "label", "rolebinding", "org-security-auditors", "-n", "implicit-global", "tier=org", "--as=alice")
	t.Logf("$ kubectl label rolebinding org-security-auditors -n implicit-global tier=org --as=alice  (exit %d)\n%s%s", r.code, r.stdout, r.stderr)
	if err := warns(r); r.code != 0 || err != nil {
		t.Errorf("the label with unlock: exit %d, %v", r.code, err)
	}
}

// runLocalUp builds hack/local-up and starts it as `make run` does, with
// config (a path in the repository; "" for none) passed as --config, and
// HOME set to localUpHome(work), as a developer's shell would: a kubectl
// run with that HOME shares whatever local-up left in ~/.kube. It returns
// its work directory (admin.kubeconfig is there) and how to stop it.
func runLocalUp(t *testing.T, config string) (work string, stop func()) {
	t.Helper()
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	binary, err := filepath.Abs(os.Getenv(binaryEnv))
	if err != nil {
		t.Fatal(err)
	}
	localUp := filepath.Join(t.TempDir(), "local-up")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", localUp, "./hack/local-up")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building local-up: %v\n%s", err, out)
	}
	work = t.TempDir()
	args := []string{"--bin-dir=" + os.Getenv(toolsBinEnv), "--implicit-binary=" + binary, "--work-dir=" + work}
	if config != "" {
		args = append(args, "--config="+filepath.Join(root, config))
	}
	if err := os.Mkdir(localUpHome(work), 0o700); err != nil {
		t.Fatal(err)
	}
	return work, startLocalUp(t, root, localUpHome(work), localUp, args...)
}

// localUpHome is the HOME runLocalUp gives local-up.
func localUpHome(work string) string { return filepath.Join(work, "home") }

// startLocalUp runs local-up in dir with args, HOME set to home, until it
// prints that everything runs, and returns the function that stops it with
// SIGINT, as Ctrl-C does, and waits for it.
func startLocalUp(t *testing.T, dir, home, binary string, args ...string) (stop func()) {
	t.Helper()
	return startLocalUpWithin(t, localUpStart, dir, home, binary, args...)
}

// startLocalUpWithin is startLocalUp, waiting start for everything to run.
func startLocalUpWithin(t *testing.T, start time.Duration, dir, home, binary string, args ...string) (stop func()) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+home)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	// local-up dies with the test binary; its processes die with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop = func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("local-up did not stop within a minute of SIGINT; its output:\n%s", out.String())
		}
		if t.Failed() {
			t.Logf("local-up's output:\n%s", out.String())
		}
	}
	deadline := time.After(start)
	for !strings.Contains(out.String(), "Everything runs.") {
		select {
		case err := <-exited:
			t.Fatalf("local-up exited (%v) before everything ran; its output:\n%s", err, out.String())
		case <-deadline:
			stop()
			t.Fatalf("local-up did not start within %s; its output:\n%s", start, out.String())
		case <-time.After(500 * time.Millisecond):
		}
	}
	return stop
}

// syncBuffer is a bytes.Buffer for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
