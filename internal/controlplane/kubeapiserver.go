package controlplane

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// apiServerRuns is kube-apiserver's place in the control plane: its flags,
// fixed at the first start, and its current run. It stands in Stop's order
// where the first run started (after etcd, before kube-controller-manager
// and the aggregated servers), so a run started again by StartKubeAPIServer
// still stops after everything that talks to it and before etcd.
//
// mu is held while a run starts or stops, never during a readiness wait,
// so that Stop cannot hang behind one; latest is readable without it.
type apiServerRuns struct {
	binary string
	args   []string

	mu      sync.Mutex
	running bool // latest runs and nobody has stopped it yet
	closed  bool // the control plane's Stop has run: no more runs
	latest  atomic.Pointer[Process]
}

// Stop implements stopper for the control plane's Stop: it stops the
// current run, if any, and refuses new ones.
func (r *apiServerRuns) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return r.stopLocked()
}

// stopLocked stops the current run, if it has not been stopped yet.
func (r *apiServerRuns) stopLocked() error {
	if !r.running {
		return nil
	}
	r.running = false
	return r.latest.Load().Stop()
}

// stopRun stops p if it is still the current run.
func (r *apiServerRuns) stopRun(p *Process) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.latest.Load() != p {
		return nil
	}
	return r.stopLocked()
}

// startKubeAPIServer starts kube-apiserver for the first time, on port, and
// waits for /readyz as admin.
func (cp *ControlPlane) startKubeAPIServer(ctx context.Context, port int) error {
	cp.apiServer = &apiServerRuns{
		binary: filepath.Join(cp.opts.BinDir, KubeAPIServerBinary),
		args:   mergeFlags(cp.kubeAPIServerArgs(port), cp.opts.KubeAPIServerArgs),
	}
	cp.track(cp.apiServer)
	p, err := cp.runKubeAPIServer(false)
	if err != nil {
		return err
	}
	return cp.waitKubeAPIServer(ctx, p)
}

// runKubeAPIServer starts a run of kube-apiserver under the control plane's
// lifetime, logging to logs/kube-apiserver.log (appended to when
// appendLog is set).
func (cp *ControlPlane) runKubeAPIServer(appendLog bool) (*Process, error) {
	r := cp.apiServer
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("controlplane: starting kube-apiserver after Stop")
	}
	if r.running {
		select {
		case <-r.latest.Load().Exited():
			// It died by itself: a new run replaces it.
		default:
			return nil, errors.New("controlplane: kube-apiserver is already running")
		}
	}
	p, err := startProcess(cp.lifetime, "kube-apiserver", r.binary, r.args, cp.logPath("kube-apiserver"), appendLog, cp.opts.StopTimeout)
	if err != nil {
		return nil, err
	}
	r.latest.Store(p)
	r.running = true
	return p, nil
}

// waitKubeAPIServer waits until kube-apiserver's run p answers /readyz as
// admin with "ok".
func (cp *ControlPlane) waitKubeAPIServer(ctx context.Context, p *Process) error {
	client, err := rest.HTTPClientFor(cp.adminConfig)
	if err != nil {
		return fmt.Errorf("building admin HTTP client: %w", err)
	}
	client.Timeout = 5 * time.Second
	defer client.CloseIdleConnections()
	url := cp.apiServerURL + "/readyz"
	if err := waitReady(ctx, cp.opts.ReadyTimeout, p, url, func(ctx context.Context) (bool, string) {
		ok, detail := httpCheck(ctx, client, url, func(body string) bool { return body == "ok" })
		if !ok {
			// The verbose answer names the checks that still fail.
			if _, verbose := httpCheck(ctx, client, url+"?verbose", nil); verbose != "" {
				detail = verbose
			}
		}
		return ok, detail
	}); err != nil {
		return err
	}
	cp.logf("kube-apiserver ready at %s (log %s)", cp.apiServerURL, p.LogPath())
	return nil
}

// StopKubeAPIServer stops kube-apiserver alone (SIGTERM, then SIGKILL after
// Options.StopTimeout), as when the cluster's API goes away: etcd,
// kube-controller-manager and the aggregated servers keep running, and
// their clients see connections refused until StartKubeAPIServer. It does
// nothing when kube-apiserver is not running; the error reports a process
// that had to be killed. Stop after StopKubeAPIServer stops the rest as
// usual.
func (cp *ControlPlane) StopKubeAPIServer() error {
	r := cp.apiServer
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.running {
		return nil
	}
	if err := r.stopLocked(); err != nil {
		return err
	}
	cp.logf("kube-apiserver stopped")
	return nil
}

// StartKubeAPIServer starts kube-apiserver again after StopKubeAPIServer,
// with the same flags: the same port and serving certificate, the same
// client CA, the same etcd. The admin kubeconfig, AdminConfig and clients
// built from them work again as they did before. The log is appended to.
// It waits until /readyz answers ok; ctx bounds that wait, while the run
// lasts, like the first, until Stop. kube-controller-manager and aggregated
// servers reconnect by themselves. It fails when kube-apiserver is running
// (one that died by itself is replaced) or the control plane has stopped;
// if the new run does not become ready, it is stopped again.
func (cp *ControlPlane) StartKubeAPIServer(ctx context.Context) error {
	p, err := cp.runKubeAPIServer(true)
	if err != nil {
		return err
	}
	if err := cp.waitKubeAPIServer(ctx, p); err != nil {
		return errors.Join(err, cp.apiServer.stopRun(p))
	}
	return nil
}
