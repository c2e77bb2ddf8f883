package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// proc is a long-running process started by e2e (containerd,
// kube-scheduler, kubelet), in its own process group, logging to
// <work>/logs/<name>.log.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error
}

func startProc(workDir, name, binary string, args ...string) (*proc, error) {
	logPath := filepath.Join(workDir, "logs", name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	logf("started %s (pid %d, log %s)", name, cmd.Process.Pid, logPath)
	return p, nil
}

// stop sends SIGTERM to the process group, then SIGKILL after 20s.
func (p *proc) stop() {
	if p == nil {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
}

// exited reports, without blocking, whether the process has ended.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); log %s ends with:\n%s", p.name, p.err, p.logPath, tail(p.logPath, 30))
	default:
		return nil
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// command runs a short command and returns its combined output.
func command(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// poll calls check every second until it returns true or an error, ctx
// ends or timeout passes.
func poll(ctx context.Context, timeout time.Duration, what string, check func(context.Context) (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := "no answer yet"
	for {
		ok, detail, err := check(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if detail != "" {
			last = detail
		}
		select {
		case <-ctx.Done():
			return errors.New(what + ": not after " + timeout.String() + "; last: " + last)
		case <-time.After(time.Second):
		}
	}
}
