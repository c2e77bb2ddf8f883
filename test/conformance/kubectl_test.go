package conformance

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
)

// resourceOf is what kubectl calls each side's RoleBindings.
func resourceOf(tg target) string {
	if tg == native {
		return "rolebindings.rbac.authorization.k8s.io"
	}
	return "rolebindings.implicit.dev"
}

// kubectlRun is a kubectl process whose stdout is read line by line.
type kubectlRun struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *syncBuffer
	exited chan struct{}
	err    error
}

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

// startKubectl runs kubectl as admin until the test ends.
func startKubectl(t *testing.T, args ...string) *kubectlRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	// A cache of its own: discovery cached before the APIService was
	// available would hide the views.
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig=" + cp.KubeconfigPath(), "--cache-dir=" + t.TempDir()}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	r := &kubectlRun{cmd: cmd, lines: make(chan string, 100), stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = r.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	t.Cleanup(func() {
		cancel()
		<-r.exited
	})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		r.err = cmd.Wait()
		close(r.lines)
		close(r.exited)
	}()
	return r
}

// next returns stdout's lines until one satisfies done, or fails.
func (r *kubectlRun) next(t *testing.T, what string, done func(string) bool) []string {
	t.Helper()
	var got []string
	timer := time.NewTimer(converge)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				t.Fatalf("kubectl ended before %s: %v\nstdout %q\nstderr %s", what, r.err, got, r.stderr.String())
			}
			got = append(got, l)
			if done(l) {
				return got
			}
		case <-timer.C:
			t.Fatalf("no %s within %s: stdout %q, stderr %s", what, converge, got, r.stderr.String())
		}
	}
}

// running reports whether kubectl still runs.
func (r *kubectlRun) running() bool {
	select {
	case <-r.exited:
		return false
	default:
		return true
	}
}

func firstField(l string) string {
	if f := strings.Fields(l); len(f) > 0 {
		return f[0]
	}
	return ""
}

// badLine reports a line no watch should print: an error, or a row without
// a name (what an unasked-for bookmark printed).
func badLine(l string) bool {
	return strings.Contains(l, "Failure") || strings.Contains(l, "InternalError") || strings.Contains(l, "error") ||
		(strings.TrimSpace(l) != "" && strings.HasPrefix(l, " "))
}

// TestKubectlGetNameWatch: kubectl get KIND NAME -n NS -w prints the item,
// then each change, and keeps watching: the same on both sides.
func TestKubectlGetNameWatch(t *testing.T) {
	t.Parallel()
	w := newWorld(t, []string{"rb-a", "rb-b"}, nil)
	runs := map[target]*kubectlRun{}
	for _, tg := range []target{native, view} {
		runs[tg] = startKubectl(t, "get", resourceOf(tg), "rb-a", "-n", w.ns, "-w")
		lines := runs[tg].next(t, "the rb-a row", func(l string) bool { return firstField(l) == "rb-a" })
		t.Logf("%s: %q", tg, lines)
	}
	t.Log("a change of rb-a prints one more row on each side; rb-b's prints none")
	w.relabel("rb-b", map[string]string{"x": "1"})
	w.relabel("rb-a", map[string]string{"x": "1"})
	for _, tg := range []target{native, view} {
		lines := runs[tg].next(t, "the changed rb-a row", func(l string) bool { return firstField(l) == "rb-a" })
		t.Logf("%s: %q", tg, lines)
		for _, l := range lines {
			if badLine(l) || firstField(l) != "rb-a" {
				t.Errorf("%s: kubectl printed %q", tg, l)
			}
		}
	}
	w.relabel("rb-a", map[string]string{"x": "2"})
	for _, tg := range []target{native, view} {
		runs[tg].next(t, "the second change's row", func(l string) bool { return firstField(l) == "rb-a" })
		if !runs[tg].running() {
			t.Errorf("%s: kubectl get -w stopped: %v, %s", tg, runs[tg].err, runs[tg].stderr.String())
		}
		if s := runs[tg].stderr.String(); s != "" {
			t.Errorf("%s: kubectl wrote to stderr: %s", tg, s)
		}
	}
}

// TestKubectlGetWatchEvents: kubectl get -w and get -w --output-watch-events
// on the namespace print the same rows for the same changes on both sides.
func TestKubectlGetWatchEvents(t *testing.T) {
	t.Parallel()
	for _, events := range []bool{false, true} {
		name := "get -w"
		if events {
			name = "get -w --output-watch-events"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, []string{"rb-a", "rb-b"}, nil)
			// rows renders the first two columns (EVENT NAME, or NAME ROLE).
			rows := func(lines []string) []string {
				var out []string
				for _, l := range lines {
					f := strings.Fields(l)
					if len(f) > 2 {
						f = f[:2]
					}
					out = append(out, strings.Join(f, " "))
				}
				return out
			}
			got := map[target][]string{}
			runs := map[target]*kubectlRun{}
			for _, tg := range []target{native, view} {
				args := []string{"get", resourceOf(tg), "-n", w.ns, "-w"}
				if events {
					args = append(args, "--output-watch-events")
				}
				runs[tg] = startKubectl(t, args...)
				got[tg] = rows(runs[tg].next(t, "rb-b's row", func(l string) bool { return strings.Contains(l, "rb-b") }))
			}
			w.create("rb-c", nil)
			w.delete("rb-a")
			for _, tg := range []target{native, view} {
				lines := runs[tg].next(t, "rb-a's deletion", func(l string) bool { return strings.Contains(l, "rb-a") })
				for _, l := range lines {
					if badLine(l) {
						t.Errorf("%s: kubectl printed %q", tg, l)
					}
				}
				got[tg] = append(got[tg], rows(lines)...)
				if !runs[tg].running() {
					t.Errorf("%s: kubectl stopped: %v, %s", tg, runs[tg].err, runs[tg].stderr.String())
				}
			}
			t.Logf("native: %q\nview:   %q", got[native], got[view])
			if strings.Join(got[native], "|") != strings.Join(got[view], "|") {
				t.Errorf("kubectl %s prints differently:\n native %q\n view   %q", name, got[native], got[view])
			}
		})
	}
}

// TestKubectlWait: kubectl wait --for=jsonpath on a view item returns once
// the item's source changes to match, as on the source itself.
func TestKubectlWait(t *testing.T) {
	t.Parallel()
	w := newWorld(t, []string{"rb-a"}, nil)
	done := map[target]chan error{}
	outs := map[target]*syncBuffer{}
	for _, tg := range []target{native, view} {
		done[tg], outs[tg] = make(chan error, 1), &syncBuffer{}
		// -v=6 logs each request, so that the test sees the watch start.
		cmd := exec.CommandContext(t.Context(), "kubectl", "--kubeconfig="+cp.KubeconfigPath(), "--cache-dir="+t.TempDir(), "-v=6", "wait", "-n", w.ns,
			resourceOf(tg)+"/rb-a", "--for=jsonpath={.metadata.labels.tier}=gold", "--timeout=60s")
		cmd.Stdout, cmd.Stderr = outs[tg], outs[tg]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ch := done[tg]
		go func() { ch <- cmd.Wait() }()
	}
	// kubectl wait lists first, then watches: the change comes once both
	// watch, after they have seen the unmatched item.
	for _, tg := range []target{native, view} {
		testwait.Within(t, 100*time.Millisecond, converge, string(tg)+": kubectl wait to watch", func(context.Context) error {
			if out := outs[tg].String(); !strings.Contains(out, "watch=true") {
				return fmt.Errorf("no watch request yet: %s", out)
			}
			return nil
		})
	}
	w.relabel("rb-a", map[string]string{"tier": "gold"})
	for _, tg := range []target{native, view} {
		select {
		case err := <-done[tg]:
			out := strings.TrimSpace(outs[tg].String())
			t.Logf("%s: %s", tg, out[strings.LastIndexByte(out, '\n')+1:]) // its answer, after -v=6's requests
			if err != nil || !strings.Contains(outs[tg].String(), "condition met") {
				t.Errorf("%s: kubectl wait: %v: %s", tg, err, outs[tg].String())
			}
		case <-time.After(converge):
			t.Errorf("%s: kubectl wait still waits %s after the change: %s", tg, converge, outs[tg].String())
		}
	}
}
