package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
)

// waitGone waits until every pid is dead: gone, or a zombie waiting for
// whoever inherited it to reap it.
func waitGone(t *testing.T, pids ...int) {
	t.Helper()
	testwait.Within(t, 20*time.Millisecond, 5*time.Second, fmt.Sprintf("processes %v to end", pids), func(context.Context) error {
		var alive []int
		for _, pid := range pids {
			if !gone(pid) {
				alive = append(alive, pid)
			}
		}
		if len(alive) > 0 {
			return fmt.Errorf("processes %v still alive", alive)
		}
		return nil
	})
}

// gone reports whether pid is dead: gone, or a zombie.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	// /proc/<pid>/stat is "pid (comm) state ..."; Linux only, and this
	// test runs only where the kill above does not settle it.
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := strings.LastIndexByte(string(stat), ')')
	return err == nil && i >= 0 && strings.HasPrefix(string(stat[i+1:]), " Z")
}

// startShell runs a shell that runs leader, then child in a background
// subshell, and waits; it returns the shell and the pid of the subshell.
func startShell(t *testing.T, ctx context.Context, leader, child string, stopTimeout time.Duration) (*Process, int) {
	t.Helper()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	script := leader + " (" + child + ") & echo $! > " + pidFile + "; wait"
	p, err := startProcess(ctx, "sh", "/bin/sh", []string{"-c", script}, filepath.Join(dir, "sh.log"), false, stopTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	testwait.Within(t, 20*time.Millisecond, 5*time.Second, "the shell to write its child's pid", func(context.Context) error {
		data, err := os.ReadFile(pidFile)
		if err != nil {
			return err
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err
	})
	return p, pid
}

func TestProcessStops(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		leader  string // run by the shell, the group's leader
		child   string // run in a background subshell
		stop    func(p *Process, cancel context.CancelFunc) error
		wantErr bool
	}{
		{
			name:  "Stop sends SIGTERM to the group",
			child: "sleep 1000",
			stop:  func(p *Process, _ context.CancelFunc) error { return p.Stop() },
		},
		{
			name:  "cancelling the context stops the group",
			child: "sleep 1000",
			stop: func(p *Process, cancel context.CancelFunc) error {
				cancel()
				<-p.Exited()
				return nil
			},
		},
		{
			name:    "a leader ignoring SIGTERM is killed after the stop timeout",
			leader:  "trap '' TERM;",
			child:   "sleep 1000",
			stop:    func(p *Process, _ context.CancelFunc) error { return p.Stop() },
			wantErr: true,
		},
		{
			name:  "a child ignoring SIGTERM is killed when the leader exits",
			child: "trap '' TERM; sleep 1000",
			stop:  func(p *Process, _ context.CancelFunc) error { return p.Stop() },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			p, child := startShell(t, ctx, tt.leader, tt.child, 500*time.Millisecond)
			err := tt.stop(p, cancel)
			if (err != nil) != tt.wantErr {
				t.Errorf("stop error = %v, want error: %v", err, tt.wantErr)
			}
			waitGone(t, p.Pid(), child)
			if err := p.Stop(); (err != nil) != tt.wantErr {
				t.Errorf("second Stop = %v, want the same outcome", err)
			}
		})
	}
}

func TestProcessExitedError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p, err := startProcess(t.Context(), "failing", "/bin/sh", []string{"-c", "echo first; echo 'bind: address already in use' >&2; exit 3"}, filepath.Join(dir, "failing.log"), false, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	msg := p.exitedError().Error()
	for _, want := range []string{"failing exited", "exit status 3", "address already in use", p.LogPath()} {
		if !strings.Contains(msg, want) {
			t.Errorf("exitedError() = %q, want it to contain %q", msg, want)
		}
	}
}

func TestTailFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := range 100000 {
		b.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		n    int
		want string
	}{
		{name: "last line", n: 1, want: "line 99999"},
		{name: "last three", n: 3, want: "line 99997\nline 99998\nline 99999"},
		{name: "none", n: 0, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tailFile(path, tt.n); got != tt.want {
				t.Errorf("tailFile(%d) = %q, want %q", tt.n, got, tt.want)
			}
		})
	}
	if got := tailFile(filepath.Join(t.TempDir(), "missing"), 3); !strings.Contains(got, "cannot read") {
		t.Errorf("tailFile(missing) = %q, want a message", got)
	}
}
