package controlplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// AggregatedServerOptions configure StartAggregated. Only Binary is
// required.
type AggregatedServerOptions struct {
	// Binary is the aggregated API server to run, e.g. a freshly built
	// implicit-apiserver.
	Binary string
	// Args are appended to the flags StartAggregated passes (see there). A
	// flag written "--name=value" replaces the default of the same name.
	Args []string
	// Name names the log file (logs/<Name>.log) and the certificate
	// directory (<Name>/certs); default: the binary's base name. Two servers
	// started with the same name get "-2", "-3", ... appended.
	Name string
	// Port is the secure port; 0 picks a free one.
	Port int
	// ReadyPath is polled, as admin, until it answers 200 (default
	// "/readyz"; "-" skips the wait).
	ReadyPath string
}

// AggregatedServer is an aggregated API server process run beside the
// control plane, on a fixed port across restarts. Its methods are safe for
// concurrent use.
type AggregatedServer struct {
	cp      *ControlPlane
	name    string
	binary  string
	args    []string
	port    int
	certDir string
	logPath string
	ready   string

	mu      sync.Mutex
	process *Process // the current run; nil while stopped
	release func()   // detaches the current run from the caller's context
}

// StartAggregated runs an aggregated API server with
//
//	--secure-port=<port> --bind-address=127.0.0.1
//	--kubeconfig=<admin kubeconfig>
//	--authentication-kubeconfig=<admin kubeconfig>
//	--authorization-kubeconfig=<admin kubeconfig>
//	--cert-dir=<work dir>/<name>/certs
//
// followed by opts.Args, the flags of k8s.io/apiserver's RecommendedOptions
// (the server self-signs for localhost and 127.0.0.1 in --cert-dir), and
// waits until its ReadyPath answers 200. The process stops when ctx is
// cancelled, when Stop is called on it or on the control plane. It is not
// registered with the aggregation layer: see RegisterAPIService.
func (cp *ControlPlane) StartAggregated(ctx context.Context, opts AggregatedServerOptions) (*AggregatedServer, error) {
	if opts.Binary == "" {
		return nil, errors.New("controlplane: AggregatedServerOptions.Binary is required")
	}
	binary, err := filepath.Abs(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("aggregated server binary %s: %w", opts.Binary, err)
	}
	if _, err := os.Stat(binary); err != nil {
		return nil, fmt.Errorf("aggregated server binary: %w", err)
	}
	name := opts.Name
	if name == "" {
		name = filepath.Base(binary)
	}
	port := opts.Port
	if port == 0 {
		if port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	ready := opts.ReadyPath
	if ready == "" {
		ready = "/readyz"
	}

	cp.mu.Lock()
	if cp.stopped {
		cp.mu.Unlock()
		return nil, errors.New("controlplane: StartAggregated after Stop")
	}
	cp.aggCount[name]++
	if n := cp.aggCount[name]; n > 1 {
		name += "-" + strconv.Itoa(n)
	}
	cp.mu.Unlock()

	a := &AggregatedServer{
		cp:      cp,
		name:    name,
		binary:  binary,
		port:    port,
		certDir: filepath.Join(cp.workDir, name, "certs"),
		logPath: cp.logPath(name),
		ready:   ready,
	}
	a.args = mergeFlags([]string{
		"--secure-port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--kubeconfig=" + cp.kubeconfigPath,
		"--authentication-kubeconfig=" + cp.kubeconfigPath,
		"--authorization-kubeconfig=" + cp.kubeconfigPath,
		"--cert-dir=" + a.certDir,
	}, opts.Args)
	// A fresh log per StartAggregated; restarts append to it.
	if err := os.Remove(a.logPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing old log: %w", err)
	}
	if err := a.start(ctx); err != nil {
		return nil, err
	}
	cp.track(a)
	return a, nil
}

// start runs the binary once and waits for it to be ready. The run lasts
// until ctx or the control plane's lifetime ends, or Stop.
func (a *AggregatedServer) start(ctx context.Context) error {
	lifetime, cancel := context.WithCancel(a.cp.lifetime)
	detach := context.AfterFunc(ctx, cancel)
	a.mu.Lock()
	binary := a.binary
	a.mu.Unlock()
	p, err := startProcess(lifetime, a.name, binary, a.args, a.logPath, true, a.cp.opts.StopTimeout)
	if err != nil {
		detach()
		cancel()
		return err
	}
	go func() {
		<-p.Exited()
		detach()
		cancel()
	}()
	a.mu.Lock()
	a.process = p
	a.mu.Unlock()

	if a.ready != "-" {
		url := a.URL() + a.ready
		admin, err := tls.X509KeyPair(a.cp.pki.admin.certPEM, a.cp.pki.admin.keyPEM)
		if err != nil {
			return errors.Join(fmt.Errorf("loading admin certificate: %w", err), a.Stop())
		}
		client := insecureLoopbackClient([]tls.Certificate{admin})
		defer client.CloseIdleConnections()
		if err := waitReady(ctx, a.cp.opts.APIServiceTimeout, p, url, func(ctx context.Context) (bool, string) {
			return httpCheck(ctx, client, url, nil)
		}); err != nil {
			return errors.Join(err, a.Stop())
		}
	}
	a.cp.logf("%s ready at %s (log %s)", a.name, a.URL(), a.logPath)
	return nil
}

// Port is the server's secure port on 127.0.0.1; it stays the same across
// restarts.
func (a *AggregatedServer) Port() int { return a.port }

// URL is https://127.0.0.1:<port>.
func (a *AggregatedServer) URL() string { return "https://127.0.0.1:" + strconv.Itoa(a.port) }

// Args are the flags the server runs with.
func (a *AggregatedServer) Args() []string { return append([]string(nil), a.args...) }

// CertDir is the server's --cert-dir.
func (a *AggregatedServer) CertDir() string { return a.certDir }

// LogPath is the server's log file, shared by all its runs.
func (a *AggregatedServer) LogPath() string { return a.logPath }

// LogTail returns the last n lines of the server's log.
func (a *AggregatedServer) LogTail(n int) string { return tailFile(a.logPath, n) }

// Process is the current run, or nil while the server is stopped.
func (a *AggregatedServer) Process() *Process {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.process
}

// Stop stops the server (SIGTERM, then SIGKILL after the stop timeout). It
// is idempotent; the server can be started again with Restart.
func (a *AggregatedServer) Stop() error {
	if p := a.takeProcess(); p != nil {
		return p.Stop()
	}
	return nil
}

// Kill kills the server (SIGKILL to its process group, no grace), as a
// node failure or the kernel's OOM killer would, and waits until it has
// exited. It is idempotent; the server can be started again with Restart.
func (a *AggregatedServer) Kill() error {
	if p := a.takeProcess(); p != nil {
		return p.Kill()
	}
	return nil
}

// takeProcess returns the current run, if any, and forgets it.
func (a *AggregatedServer) takeProcess() *Process {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.process
	a.process = nil
	return p
}

// SetBinary has the next Restart run binary instead: another build of the
// same server, measured against this one on the same control plane.
func (a *AggregatedServer) SetBinary(binary string) error {
	abs, err := filepath.Abs(binary)
	if err != nil {
		return fmt.Errorf("aggregated server binary %s: %w", binary, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return fmt.Errorf("aggregated server binary: %w", err)
	}
	a.mu.Lock()
	a.binary = abs
	a.mu.Unlock()
	return nil
}

// Restart stops the server if it runs and starts it again on the same port
// with the same flags, appending to the same log, and waits until it is
// ready. ctx bounds the new run's lifetime, as for StartAggregated.
func (a *AggregatedServer) Restart(ctx context.Context) error {
	if err := a.cp.lifetime.Err(); err != nil {
		return fmt.Errorf("controlplane: restarting %s after the control plane stopped: %w", a.name, err)
	}
	if err := a.Stop(); err != nil {
		return err
	}
	return a.start(ctx)
}
