package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// DefaultStopTimeout is how long a process has to exit after SIGTERM before
// its process group is killed.
const DefaultStopTimeout = 15 * time.Second

// Process is one running binary of the control plane. Its stdout and stderr
// go to a log file; it runs in its own process group so that anything it
// spawns stops with it.
//
// A Process stops when the context it was started with is cancelled or when
// Stop is called, whichever comes first.
type Process struct {
	name    string
	path    string
	args    []string
	logPath string

	cmd    *exec.Cmd
	cancel context.CancelFunc
	// done is closed by the single goroutine that waits for the process;
	// waitErr is written before done is closed and read only after.
	done    chan struct{}
	waitErr error

	stopOnce sync.Once
}

// startProcess starts path with args, logging to logPath (appended to when
// appendLog is set, truncated otherwise). ctx bounds the process's lifetime.
func startProcess(ctx context.Context, name, path string, args []string, logPath string, appendLog bool, stopTimeout time.Duration) (*Process, error) {
	flags := os.O_CREATE | os.O_WRONLY
	if appendLog {
		flags |= os.O_APPEND
	} else {
		flags |= os.O_TRUNC
	}
	logFile, err := os.OpenFile(logPath, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log file for %s: %w", name, err)
	}
	defer logFile.Close() // the child holds its own descriptor

	fmt.Fprintf(logFile, "=== %s: %s %s\n", time.Now().Format(time.RFC3339), path, strings.Join(args, " "))

	lifetime, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(lifetime, path, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	// Cancel asks the whole group to stop; after WaitDelay, os/exec kills the
	// leader and the waiting goroutine below kills whatever is left.
	cmd.Cancel = func() error { return signalGroup(cmd.Process.Pid, sigTerm) }
	if stopTimeout <= 0 {
		stopTimeout = DefaultStopTimeout
	}
	cmd.WaitDelay = stopTimeout

	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("starting %s (%s): %w", name, path, err)
	}
	p := &Process{
		name:    name,
		path:    path,
		args:    args,
		logPath: logPath,
		cmd:     cmd,
		cancel:  cancel,
		done:    make(chan struct{}),
	}
	go func() {
		p.waitErr = cmd.Wait()
		// The leader is gone; make sure its children are too.
		_ = signalGroup(cmd.Process.Pid, sigKill)
		cancel()
		close(p.done)
	}()
	return p, nil
}

// Name is the process's name in messages and in its log file's name.
func (p *Process) Name() string { return p.name }

// Pid is the operating-system process id (also its process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Args are the command-line arguments the process was started with.
func (p *Process) Args() []string { return append([]string(nil), p.args...) }

// LogPath is the file that holds the process's stdout and stderr.
func (p *Process) LogPath() string { return p.logPath }

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string { return tailFile(p.logPath, n) }

// Exited is closed once the process has exited, for whatever reason.
func (p *Process) Exited() <-chan struct{} { return p.done }

// ExitErr is the error from waiting for the process: nil for exit status 0,
// an *exec.ExitError otherwise, or context.Canceled for a process that exited
// with status 0 after being asked to stop. It is nil until Exited is closed.
func (p *Process) ExitErr() error {
	select {
	case <-p.done:
		return p.waitErr
	default:
		return nil
	}
}

// Stop sends SIGTERM to the process group, waits for the process to exit
// and kills the group if it has not exited within the stop timeout. It is
// safe to call more than once and after the process exited on its own. It
// returns an error only when the process had to be killed.
func (p *Process) Stop() error {
	p.stopOnce.Do(p.cancel)
	<-p.done
	if killedBySIGKILL(p.waitErr) {
		return fmt.Errorf("%s did not exit after SIGTERM within %s and was killed; log: %s", p.name, p.cmd.WaitDelay, p.logPath)
	}
	return nil
}

// Kill sends SIGKILL to the process group and waits for the process to
// exit. It is safe to call after the process exited.
func (p *Process) Kill() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := signalGroup(p.Pid(), sigKill); err != nil {
		return fmt.Errorf("killing %s: %w", p.name, err)
	}
	<-p.done
	return nil
}

// exitedError describes a process that exited when it should be running.
func (p *Process) exitedError() error {
	return fmt.Errorf("%s exited: %v; log %s ends with:\n%s", p.name, p.waitErr, p.logPath, p.LogTail(40))
}

// tailFile returns the last n lines of the file at path, reading at most the
// last 256 KiB. Errors are returned as text: the tail is for humans.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const window = 256 << 10
	info, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(cannot stat %s: %v)", path, err)
	}
	offset := info.Size() - window
	if offset < 0 {
		offset = 0
	}
	data, err := io.ReadAll(io.NewSectionReader(f, offset, info.Size()-offset))
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	data = bytes.TrimRight(data, "\n")
	lines := bytes.Split(data, []byte("\n"))
	if offset > 0 && len(lines) > 1 {
		lines = lines[1:] // the first line is probably cut
	}
	if n >= 0 && len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
