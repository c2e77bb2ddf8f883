package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Defaults for Options.
const (
	// DefaultReadyTimeout bounds the wait for each control-plane process
	// (etcd, kube-apiserver, kube-controller-manager) to become ready.
	DefaultReadyTimeout = 90 * time.Second
	// DefaultAPIServiceTimeout bounds the wait for an APIService to become
	// Available and for an aggregated server to become ready.
	DefaultAPIServiceTimeout = 60 * time.Second
	// DefaultEtcdPrefix is kube-apiserver's own default --etcd-prefix, used
	// when Options.EtcdPrefix is empty.
	DefaultEtcdPrefix = "/registry"
)

// Binary names expected in Options.BinDir, as hack/build-tools.sh links them.
const (
	EtcdBinary              = "etcd"
	KubeAPIServerBinary     = "kube-apiserver"
	ControllerManagerBinary = "kube-controller-manager"
)

// Options configure Start. Only BinDir is required.
type Options struct {
	// BinDir holds the etcd, kube-apiserver and (when
	// StartControllerManager is set) kube-controller-manager binaries: the
	// directory hack/build-tools.sh prints.
	BinDir string

	// WorkDir holds the PKI, etcd's data, the logs and the admin kubeconfig.
	// It is created if missing; its etcd data is wiped by Start. When empty,
	// a new temporary directory is used (and, like any WorkDir, kept after
	// Stop unless RemoveWorkDirOnStop is set).
	WorkDir string

	// RemoveWorkDirOnStop makes Stop delete WorkDir. By default Stop leaves
	// it, logs included, for the caller to inspect.
	RemoveWorkDirOnStop bool

	// StartControllerManager also runs kube-controller-manager with the
	// namespace, garbage-collector and clusterrole-aggregation controllers,
	// so that the aggregated roles (admin, edit, view) have rules and namespaces can be
	// deleted and owner references are honoured.
	StartControllerManager bool

	// ExternalEtcdURL, when set, is the client URL of an etcd that already
	// runs, such as another control plane's EtcdURL: Start starts no etcd
	// and kube-apiserver keeps its data there, under EtcdPrefix. Control
	// planes sharing an etcd this way are still separate clusters, each
	// with its own PKI, work directory, kubeconfig and kube-apiserver; give
	// each its own EtcdPrefix. Nothing under the prefix is wiped: start from a fresh etcd
	// for an empty cluster. Stop such a control plane before the one that
	// runs its etcd (start the latter with a context that outlives the
	// former's): kube-apiserver hangs in its shutdown when etcd is gone.
	// EtcdArgs must be empty.
	ExternalEtcdURL string

	// EtcdPrefix is kube-apiserver's --etcd-prefix, the root of every key
	// it writes (default: kube-apiserver's, /registry). It must start with
	// "/". Control planes sharing one etcd need prefixes of which none is
	// a path prefix of another: /registry and /member-1, not /registry and
	// /registry/member-1.
	EtcdPrefix string

	// EtcdArgs, KubeAPIServerArgs and ControllerManagerArgs are appended to
	// each process's flags. Write them as "--name=value": a flag given here
	// replaces the default flag of the same name, and
	// "--authorization-config=..." also replaces "--authorization-mode".
	EtcdArgs              []string
	KubeAPIServerArgs     []string
	ControllerManagerArgs []string

	// ServingIPs are more IP addresses for kube-apiserver's serving
	// certificate, beside 127.0.0.1: those of other interfaces it is reached
	// at, such as a veth's address for a server in a network namespace. Pass
	// "--bind-address=0.0.0.0" in KubeAPIServerArgs so that it listens there.
	ServingIPs []net.IP

	// ReadyTimeout bounds the wait for each process to become ready
	// (default DefaultReadyTimeout).
	ReadyTimeout time.Duration
	// APIServiceTimeout bounds the wait for an aggregated server's /readyz
	// and for its APIService to become Available (default
	// DefaultAPIServiceTimeout).
	APIServiceTimeout time.Duration
	// StopTimeout is how long a process has after SIGTERM before it is
	// killed (default DefaultStopTimeout).
	StopTimeout time.Duration

	// Kubectl is the kubectl binary for ControlPlane.Kubectl (default
	// "kubectl", looked up on PATH).
	Kubectl string

	// Logf, when set, receives one line per step (testing.T.Logf fits).
	Logf func(format string, args ...any)
}

// ControlPlane is a running kube-apiserver and its etcd (its own, or an
// external one shared with other control planes), possibly with
// kube-controller-manager and aggregated API servers. Its methods are safe
// for concurrent use.
type ControlPlane struct {
	opts           Options
	workDir        string
	pki            *pki
	webhookClient  *webhookClient
	admissionCfg   string // --admission-control-config-file
	kubeconfigPath string
	etcdURL        string
	apiServerURL   string
	adminConfig    *rest.Config

	// lifetime bounds every process; Stop cancels it last.
	lifetime context.Context
	cancel   context.CancelFunc
	// stopAfter stops calling Stop when Start's context ends.
	stopAfter func() bool

	etcd              *Process // nil with Options.ExternalEtcdURL
	apiServer         *apiServerRuns
	controllerManager *Process

	mu       sync.Mutex
	started  []stopper // in start order; Stop walks it backwards
	stopped  bool
	stopErr  error
	aggCount map[string]int
}

// stopper is anything Stop must stop: a Process or an AggregatedServer.
type stopper interface {
	Stop() error
}

// Start generates the PKI, writes the admin kubeconfig and starts etcd
// (unless Options.ExternalEtcdURL names one), kube-apiserver and, if asked,
// kube-controller-manager, waiting for each to be ready. ctx bounds the
// lifetime of every process, not only the start-up: when it is cancelled,
// Stop is called. On error, whatever was started has been stopped, and the
// error carries the log tail of the process that failed.
func Start(ctx context.Context, opts Options) (*ControlPlane, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	workDir, err := prepareWorkDir(opts.WorkDir)
	if err != nil {
		return nil, err
	}
	// The processes do not see ctx directly: were they all cancelled at
	// once, kube-apiserver would hang in its shutdown with etcd gone. When
	// ctx ends, Stop ends them in order; the lifetime context is the
	// backstop that cancels whatever remains.
	lifetime, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cp := &ControlPlane{
		opts:     opts,
		workDir:  workDir,
		lifetime: lifetime,
		cancel:   cancel,
		aggCount: map[string]int{},
	}
	// Under the lock, so that a Stop run by an already-cancelled ctx sees
	// stopAfter set.
	cp.mu.Lock()
	cp.stopAfter = context.AfterFunc(ctx, func() { _ = cp.Stop() })
	cp.mu.Unlock()
	if err := cp.start(ctx); err != nil {
		// Stop's error (a process that had to be killed) matters less than
		// why start-up failed.
		_ = cp.Stop()
		return nil, err
	}
	return cp, nil
}

// start does Start's work once cp is set up; the caller stops cp on error.
func (cp *ControlPlane) start(ctx context.Context) error {
	var err error
	if cp.pki, err = newPKI(filepath.Join(cp.workDir, "pki"), cp.opts.ServingIPs...); err != nil {
		return err
	}
	if cp.webhookClient, err = ensureWebhookClient(cp.workDir); err != nil {
		return err
	}
	if cp.admissionCfg, err = writeAdmissionConfig(cp.workDir, cp.webhookClient); err != nil {
		return err
	}
	apiServerPort, err := FreePort()
	if err != nil {
		return err
	}
	cp.apiServerURL = "https://127.0.0.1:" + strconv.Itoa(apiServerPort)
	cp.adminConfig = &rest.Config{
		Host: cp.apiServerURL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   cp.pki.serverCA.certPEM,
			CertData: cp.pki.admin.certPEM,
			KeyData:  cp.pki.admin.keyPEM,
		},
		// Tests create objects in bursts; the client-side default (5 QPS)
		// would make them slow for no benefit against a private server.
		QPS:   100,
		Burst: 200,
	}
	cp.kubeconfigPath = filepath.Join(cp.workDir, "admin.kubeconfig")
	if err := writeKubeconfig(cp.kubeconfigPath, cp.apiServerURL, cp.pki.serverCA.certPEM, "admin", cp.pki.admin); err != nil {
		return err
	}
	cp.logf("PKI and admin kubeconfig written to %s", cp.workDir)

	if cp.opts.ExternalEtcdURL != "" {
		cp.etcdURL = cp.opts.ExternalEtcdURL
		cp.logf("using the etcd at %s under the prefix %s", cp.etcdURL, cp.EtcdPrefix())
	} else if err := cp.startEtcd(ctx); err != nil {
		return err
	}
	if err := cp.startKubeAPIServer(ctx, apiServerPort); err != nil {
		return err
	}
	if cp.opts.StartControllerManager {
		return cp.startControllerManager(ctx)
	}
	return nil
}

// complete checks o and fills in defaults.
func (o *Options) complete() error {
	if o.BinDir == "" {
		return errors.New("controlplane: Options.BinDir is required (the directory hack/build-tools.sh prints)")
	}
	need := []string{KubeAPIServerBinary}
	if o.ExternalEtcdURL == "" {
		need = append(need, EtcdBinary)
	} else {
		u, err := url.Parse(o.ExternalEtcdURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("controlplane: Options.ExternalEtcdURL %q is not an http(s)://host:port URL", o.ExternalEtcdURL)
		}
		if len(o.EtcdArgs) > 0 {
			return errors.New("controlplane: Options.EtcdArgs are for the etcd Start runs, and there is none with Options.ExternalEtcdURL")
		}
	}
	if o.EtcdPrefix != "" && !strings.HasPrefix(o.EtcdPrefix, "/") {
		return fmt.Errorf("controlplane: Options.EtcdPrefix %q must start with /", o.EtcdPrefix)
	}
	if o.StartControllerManager {
		need = append(need, ControllerManagerBinary)
	}
	for _, name := range need {
		if _, err := os.Stat(filepath.Join(o.BinDir, name)); err != nil {
			return fmt.Errorf("controlplane: %s not found in %s (build it with hack/build-tools.sh %s): %w", name, o.BinDir, name, err)
		}
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.APIServiceTimeout <= 0 {
		o.APIServiceTimeout = DefaultAPIServiceTimeout
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.Kubectl == "" {
		o.Kubectl = "kubectl"
	}
	return nil
}

// prepareWorkDir creates dir (or a temporary directory when dir is empty)
// with an empty logs directory, and removes etcd data left by a previous run.
func prepareWorkDir(dir string) (string, error) {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "implicit-controlplane-")
		if err != nil {
			return "", fmt.Errorf("creating work directory: %w", err)
		}
		dir = tmp
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("work directory %s: %w", dir, err)
	}
	if err := os.RemoveAll(filepath.Join(abs, "etcd")); err != nil {
		return "", fmt.Errorf("wiping etcd data in %s: %w", abs, err)
	}
	if err := os.MkdirAll(filepath.Join(abs, "logs"), 0o755); err != nil {
		return "", fmt.Errorf("creating work directory: %w", err)
	}
	return abs, nil
}

// writeKubeconfig writes a kubeconfig for one user with embedded
// credentials.
func writeKubeconfig(path, server string, caPEM []byte, user string, kp *keyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["implicit-local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.certPEM, ClientKeyData: kp.keyPEM}
	cfg.Contexts["implicit-local"] = &clientcmdapi.Context{Cluster: "implicit-local", AuthInfo: user}
	cfg.CurrentContext = "implicit-local"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}

// startProcess starts one process under the control plane's lifetime and
// remembers it for Stop.
func (cp *ControlPlane) startProcess(name, binary string, args []string) (*Process, error) {
	p, err := startProcess(cp.lifetime, name, binary, args, cp.logPath(name), false, cp.opts.StopTimeout)
	if err != nil {
		return nil, err
	}
	cp.track(p)
	return p, nil
}

func (cp *ControlPlane) track(s stopper) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.started = append(cp.started, s)
}

func (cp *ControlPlane) logPath(name string) string {
	return filepath.Join(cp.workDir, "logs", name+".log")
}

func (cp *ControlPlane) logf(format string, args ...any) {
	if cp.opts.Logf != nil {
		cp.opts.Logf(format, args...)
	}
}

// Stop stops everything the control plane started, in reverse order:
// aggregated servers, kube-controller-manager, kube-apiserver (unless
// StopKubeAPIServer stopped it), etcd (unless external). Each gets SIGTERM,
// then SIGKILL after Options.StopTimeout. The work directory stays unless
// Options.RemoveWorkDirOnStop is set. Stop is idempotent; the error reports
// processes that had to be killed.
func (cp *ControlPlane) Stop() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.stopped {
		return cp.stopErr
	}
	cp.stopped = true
	cp.stopAfter()
	var errs []error
	for i := len(cp.started) - 1; i >= 0; i-- {
		if err := cp.started[i].Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	cp.cancel()
	if cp.opts.RemoveWorkDirOnStop {
		if err := os.RemoveAll(cp.workDir); err != nil {
			errs = append(errs, fmt.Errorf("removing work directory: %w", err))
		}
	}
	cp.stopErr = errors.Join(errs...)
	return cp.stopErr
}

// WorkDir is the absolute path of the work directory.
func (cp *ControlPlane) WorkDir() string { return cp.workDir }

// KubeconfigPath is the absolute path of the admin kubeconfig
// (<WorkDir>/admin.kubeconfig).
func (cp *ControlPlane) KubeconfigPath() string { return cp.kubeconfigPath }

// AdminConfig returns a new copy of the admin's client configuration
// (CN=admin, O=system:masters), free for the caller to modify.
func (cp *ControlPlane) AdminConfig() *rest.Config { return rest.CopyConfig(cp.adminConfig) }

// UserConfig returns a client configuration that authenticates as user in
// groups with a fresh client certificate signed by the client CA. Such a
// user has no permissions until RBAC (or a webhook) grants them.
func (cp *ControlPlane) UserConfig(user string, groups ...string) (*rest.Config, error) {
	kp, err := cp.pki.newClientCert(user, groups)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(cp.adminConfig)
	cfg.CertData = kp.certPEM
	cfg.KeyData = kp.keyPEM
	return cfg, nil
}

// WriteUserKubeconfig writes a kubeconfig for user in groups, like
// UserConfig, to <WorkDir>/<user>.kubeconfig and returns its path. Pass it to
// Kubectl as "--kubeconfig=<path>" to run kubectl as that user.
func (cp *ControlPlane) WriteUserKubeconfig(user string, groups ...string) (string, error) {
	kp, err := cp.pki.newClientCert(user, groups)
	if err != nil {
		return "", err
	}
	path := filepath.Join(cp.workDir, strings.ReplaceAll(user, string(filepath.Separator), "_")+".kubeconfig")
	if err := writeKubeconfig(path, cp.apiServerURL, cp.pki.serverCA.certPEM, user, kp); err != nil {
		return "", err
	}
	return path, nil
}

// APIServerURL is kube-apiserver's address, https://127.0.0.1:<port>.
func (cp *ControlPlane) APIServerURL() string { return cp.apiServerURL }

// EtcdURL is etcd's client address, http://127.0.0.1:<port>, or
// Options.ExternalEtcdURL. Pass it as another control plane's
// ExternalEtcdURL to share this etcd.
func (cp *ControlPlane) EtcdURL() string { return cp.etcdURL }

// EtcdPrefix is the root of kube-apiserver's keys in etcd:
// Options.EtcdPrefix, or kube-apiserver's default /registry.
func (cp *ControlPlane) EtcdPrefix() string {
	if cp.opts.EtcdPrefix != "" {
		return cp.opts.EtcdPrefix
	}
	return DefaultEtcdPrefix
}

// Etcd is the etcd process, or nil with Options.ExternalEtcdURL.
func (cp *ControlPlane) Etcd() *Process { return cp.etcd }

// KubeAPIServer is kube-apiserver's current process: after
// StopKubeAPIServer the last one (exited), after StartKubeAPIServer the new
// one.
func (cp *ControlPlane) KubeAPIServer() *Process { return cp.apiServer.latest.Load() }

// ControllerManager is the kube-controller-manager process, or nil when
// Options.StartControllerManager was not set.
func (cp *ControlPlane) ControllerManager() *Process { return cp.controllerManager }

// LogTails returns the last n lines of every process's log, each under a
// header naming the process and its log file: something to print when a
// test fails.
func (cp *ControlPlane) LogTails(n int) string {
	cp.mu.Lock()
	started := append([]stopper(nil), cp.started...)
	cp.mu.Unlock()
	var b strings.Builder
	for _, s := range started {
		var name, path string
		switch s := s.(type) {
		case *Process:
			name, path = s.Name(), s.LogPath()
		case *apiServerRuns:
			p := s.latest.Load()
			if p == nil {
				continue
			}
			name, path = p.Name(), p.LogPath()
		case *AggregatedServer:
			name, path = s.name, s.LogPath()
		default:
			continue
		}
		fmt.Fprintf(&b, "===== %s (%s), last %d lines =====\n%s\n", name, path, n, tailFile(path, n))
	}
	return b.String()
}
