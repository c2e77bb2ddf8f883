package controlplane

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// startEtcd starts a single-member etcd on two free loopback ports and waits
// for /health.
func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	clientPort, err := FreePort()
	if err != nil {
		return err
	}
	peerPort, err := FreePort()
	if err != nil {
		return err
	}
	cp.etcdURL = "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	args := mergeFlags([]string{
		"--name=default",
		"--data-dir=" + filepath.Join(cp.workDir, "etcd"),
		"--listen-client-urls=" + cp.etcdURL,
		"--advertise-client-urls=" + cp.etcdURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		"--initial-cluster-state=new",
		// The data is thrown away after each run; fsync only costs time.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}, cp.opts.EtcdArgs)
	cp.etcd, err = cp.startProcess("etcd", filepath.Join(cp.opts.BinDir, EtcdBinary), args)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 5 * time.Second}
	if err := waitReady(ctx, cp.opts.ReadyTimeout, cp.etcd, cp.etcdURL+"/health", func(ctx context.Context) (bool, string) {
		return httpCheck(ctx, client, cp.etcdURL+"/health", func(body string) bool {
			return strings.Contains(body, `"health":"true"`)
		})
	}); err != nil {
		return err
	}
	cp.logf("etcd ready at %s (log %s)", cp.etcdURL, cp.etcd.LogPath())
	return nil
}

// kubeAPIServerArgs are kube-apiserver's flags before Options.KubeAPIServerArgs.
func (cp *ControlPlane) kubeAPIServerArgs(port int) []string {
	p := cp.pki
	args := []string{
		"--etcd-servers=" + cp.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + p.apiserver.certPath,
		"--tls-private-key-file=" + p.apiserver.keyPath,
		"--client-ca-file=" + p.clientCA.certPath,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + p.serviceAccountPubKeyPath,
		"--service-account-signing-key-file=" + p.serviceAccountKeyPath,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--authorization-mode=Node,RBAC",
		// The aggregation layer: kube-apiserver proxies to aggregated servers
		// with the front-proxy client certificate and names the user in
		// headers, which aggregated servers trust because the certificate is
		// signed by the requestheader CA (published in kube-system's
		// extension-apiserver-authentication ConfigMap).
		"--requestheader-client-ca-file=" + p.frontProxyCA.certPath,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.frontProxyClient.certPath,
		"--proxy-client-key-file=" + p.frontProxyClient.keyPath,
		// Nothing here creates the default ServiceAccounts (no
		// serviceaccount controller) and no pod ever runs (no kubelet), so
		// the ServiceAccount plugin would only reject pods.
		"--disable-admission-plugins=ServiceAccount",
		// Admission webhooks are called with the webhook client certificate.
		"--admission-control-config-file=" + cp.admissionCfg,
		// kube-apiserver refuses to start when it would publish the loopback
		// advertise address as the "kubernetes" Service's endpoints ("may not
		// be in the loopback range"); nothing in-cluster needs them here.
		"--endpoint-reconciler-type=none",
		// On SIGTERM, kube-apiserver drains its short requests and then
		// gives the rest 2s, not --request-timeout's minute: watches held by
		// clients that are still running (kube-controller-manager and
		// aggregated servers during StopKubeAPIServer, a test's informer)
		// would otherwise make it outlive the stop timeout and be killed.
		"--shutdown-send-retry-after=true",
	}
	if cp.opts.EtcdPrefix != "" {
		// Beside other control planes' data in a shared etcd.
		args = append(args, "--etcd-prefix="+cp.opts.EtcdPrefix)
	}
	return args
}

// startControllerManager starts kube-controller-manager with the namespace,
// garbage-collector and clusterrole-aggregation controllers (so admin, edit
// and view get their rules) and waits for its /healthz.
func (cp *ControlPlane) startControllerManager(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	args := mergeFlags([]string{
		"--kubeconfig=" + cp.kubeconfigPath,
		"--authentication-kubeconfig=" + cp.kubeconfigPath,
		"--authorization-kubeconfig=" + cp.kubeconfigPath,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(cp.workDir, "kube-controller-manager", "certs"),
		"--controllers=namespace-controller,garbage-collector-controller,clusterrole-aggregation-controller",
		"--use-service-account-credentials=false",
		"--leader-elect=false",
	}, cp.opts.ControllerManagerArgs)
	cp.controllerManager, err = cp.startProcess("kube-controller-manager", filepath.Join(cp.opts.BinDir, ControllerManagerBinary), args)
	if err != nil {
		return err
	}
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
	client := insecureLoopbackClient(nil)
	defer client.CloseIdleConnections()
	if err := waitReady(ctx, cp.opts.ReadyTimeout, cp.controllerManager, url, func(ctx context.Context) (bool, string) {
		return httpCheck(ctx, client, url, func(body string) bool { return body == "ok" })
	}); err != nil {
		return err
	}
	cp.logf("kube-controller-manager ready (log %s)", cp.controllerManager.LogPath())
	return nil
}

// insecureLoopbackClient returns an HTTP client for health checks of a
// process on 127.0.0.1 that serves a self-signed certificate written at
// start-up. Skipping verification is acceptable only because the peer is a
// loopback process this package just started; certs, if set, are presented
// as client certificates.
func insecureLoopbackClient(certs []tls.Certificate) *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{
				InsecureSkipVerify: true, //nolint:gosec // loopback health check, see above
				Certificates:       certs,
			},
		},
	}
}

// httpCheck GETs url and reports whether the answer is 200 and passes ok (a
// nil ok accepts any 200), with a one-line description of the answer.
func httpCheck(ctx context.Context, client *http.Client, url string, ok func(body string) bool) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	body := strings.TrimSpace(string(data))
	detail := fmt.Sprintf("%s: %s", resp.Status, body)
	if resp.StatusCode != http.StatusOK {
		return false, detail
	}
	return ok == nil || ok(body), detail
}

// waitReady polls check until it succeeds, p exits, ctx is done or timeout
// passes. The error names what was waited for, the last answer and the tail
// of p's log.
func waitReady(ctx context.Context, timeout time.Duration, p *Process, what string, check func(context.Context) (bool, string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ticker := time.NewTicker(250 * time.Millisecond)
	defer ticker.Stop()
	last := "no answer yet"
	for {
		ok, detail := check(ctx)
		if ok {
			return nil
		}
		if detail != "" {
			last = detail
		}
		select {
		case <-p.Exited():
			return p.exitedError()
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s after %s (%w); last answer: %s; log %s ends with:\n%s",
				p.Name(), what, timeout, ctx.Err(), last, p.LogPath(), p.LogTail(40))
		case <-ticker.C:
		}
	}
}
