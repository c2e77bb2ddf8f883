package integration

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// replicasConfiguration names the replicas' webhook configuration.
const replicasConfiguration = "implicit-replicas"

const replicasConfig = `apiVersion: config.implicit.dev/v1alpha1
kind: ImplicitConfiguration
resources:
- {group: rbac.authorization.k8s.io, version: v1, resource: rolebindings}
- {group: rbac.authorization.k8s.io, version: v1, resource: roles}
- {group: networking.k8s.io, version: v1, resource: networkpolicies, delivery: Materialize}
`

// replicaCluster is a control plane of its own whose guards are two
// implicit-apiserver replicas behind one address, as the chart runs them
// behind one Service: each webhook call reaches either (spread), or only
// the first (while measuring one replica).
type replicaCluster struct {
	cp       *controlplane.ControlPlane
	kube     kubernetes.Interface
	replicas []*controlplane.AggregatedServer
	// spread: each call goes to a replica drawn at random; otherwise to
	// the first.
	spread atomic.Bool
	calls  [2]atomic.Int64
}

// startReplicaCluster starts the control plane (on the suite's etcd), two
// replicas with their guards, a proxy that sends each webhook call to one
// of them, and the webhook configuration naming the proxy.
func startReplicaCluster(t *testing.T) *replicaCluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	work := filepath.Join(cp.WorkDir(), "replicas-"+time.Now().Format("150405.000"))
	rcp, err := controlplane.Start(ctx, controlplane.Options{
		BinDir: os.Getenv(toolsBinEnv), WorkDir: work,
		ExternalEtcdURL: cp.EtcdURL(), EtcdPrefix: "/" + filepath.Base(work),
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("starting the replicas' control plane: %v", err)
	}
	t.Cleanup(func() { _ = rcp.Stop() })
	rc := &replicaCluster{cp: rcp}
	if rc.kube, err = kubernetes.NewForConfig(rcp.AdminConfig()); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{controlplane.IdentityNamespace, globalNS} {
		if _, err := rc.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// NetworkPolicies are delivered as copies, so that their creations are
	// guarded; both replicas keep the configuration's conditions current.
	config := filepath.Join(work, "config.yaml")
	if err := os.WriteFile(config, []byte(replicasConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		name := fmt.Sprintf("implicit-replica-%d", i+1)
		s, err := rcp.StartAggregated(ctx, controlplane.AggregatedServerOptions{
			Binary: os.Getenv(binaryEnv), Name: name,
			Args: append([]string{"-v=2", "--webhook-configuration=" + replicasConfiguration, "--config=" + config,
				"--pod-namespace=" + controlplane.IdentityNamespace}, rcp.WebhookServerArgs()...),
		})
		if err != nil {
			t.Fatalf("starting %s: %v\n%s", name, err, rcp.LogTails(30))
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s log tail:\n%s", name, s.LogTail(30))
			}
		})
		rc.replicas = append(rc.replicas, s)
	}

	// The proxy presents kube-apiserver's own client certificate to the
	// replicas, so their webhook paths keep requiring it.
	cert, err := rcp.WebhookClientCertificate()
	if err != nil {
		t.Fatal(err)
	}
	backends := make([]*httputil.ReverseProxy, 2)
	for i, s := range rc.replicas {
		u, err := url.Parse(s.URL())
		if err != nil {
			t.Fatal(err)
		}
		p := httputil.NewSingleHostReverseProxy(u)
		p.Transport = &http.Transport{TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true}} //nolint:gosec // the replicas' self-signed loopback certificates
		backends[i] = p
	}
	proxy := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := 0
		if rc.spread.Load() {
			i = rand.IntN(2)
		}
		rc.calls[i].Add(1)
		backends[i].ServeHTTP(w, r)
	}))
	proxy.StartTLS()
	t.Cleanup(proxy.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxy.Certificate().Raw})
	cfg := webhookconfig.Configuration(replicasConfiguration, servedSources(), func(path string) admissionregistrationv1.WebhookClientConfig {
		u := proxy.URL + path
		return admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: ca}
	})
	if err := rcp.ApplyValidatingWebhookConfiguration(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	return rc
}

// TestReplicasDecideAsOne: with two replicas behind one address (issue 39,
// item 2), a tenant's candidate of a source and the org admin's lock of it,
// sent at the same moment, are never both admitted: locking a source with
// an open candidate is refused, and a candidate of a locked source needs
// unlock, which the tenant lacks; whichever decision comes second, on
// either replica, is judged with the first. Before, each replica judged
// against its own mirror and memory, and both landed. It also logs the
// latency of a guarded write (creating a locked RoleBinding) through one
// replica and through two (docs/benchmarks.md).
func TestReplicasDecideAsOne(t *testing.T) {
	rc := startReplicaCluster(t)
	ctx := t.Context()
	const org = "rep-org"
	if _, err := rc.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: org}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// rep-alice writes RoleBindings in rep-org and may bind view there
	// (this control plane runs no controller manager to aggregate admin),
	// and has no unlock.
	if _, err := rc.kube.RbacV1().Roles(org).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "rep-alice"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"get", "create", "update"}},
			{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"clusterroles"}, ResourceNames: []string{"view"}, Verbs: []string{"bind"}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.kube.RbacV1().RoleBindings(org).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "rep-alice"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "rep-alice"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "rep-alice"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	aliceCfg, err := rc.cp.UserConfig("rep-alice")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := kubernetes.NewForConfig(aliceCfg)
	if err != nil {
		t.Fatal(err)
	}
	binding := func(name string, annotations map[string]string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "rep-viewers"}},
		}
	}

	// The guarded write: the org admin creates a locked RoleBinding (the
	// locks guard asks unlock, then takes its turn on the Lease).
	measure := func(what string, n int) {
		var took []time.Duration
		for i := range n {
			name := fmt.Sprintf("lat-%s-%d", what, i)
			start := time.Now()
			if _, err := rc.kube.RbacV1().RoleBindings(org).Create(ctx, binding(name, map[string]string{v1alpha1.AnnotationLocked: "true"}), metav1.CreateOptions{}); err != nil {
				t.Fatalf("creating the locked %s: %v", name, err)
			}
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		t.Logf("guarded write (create of a locked RoleBinding), %s: n=%d p50=%s p99=%s max=%s",
			what, n, took[n*50/100].Round(10*time.Microsecond), took[n*99/100].Round(10*time.Microsecond), took[n-1].Round(10*time.Microsecond))
	}
	const n = 200
	t.Log("measuring: every webhook call to replica 1")
	measure("one-replica", n)
	rc.spread.Store(true)
	t.Log("measuring: each webhook call to either replica")
	measure("two-replicas", n)
	t.Logf("webhook calls: replica 1 %d, replica 2 %d", rc.calls[0].Load(), rc.calls[1].Load())

	// The writes the widened match conditions newly send to the guards:
	// a tenant's NetworkPolicy (a materialized kind) created under a name
	// locked nowhere, and the deletion of a namespace nobody inherits
	// from (a leaf).
	eventually(t, "the synced conditions send NetworkPolicy creations to the shadows guard", func(ctx context.Context) error {
		cfg, err := rc.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, replicasConfiguration, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, w := range cfg.Webhooks {
			for _, c := range w.MatchConditions {
				if w.Name == webhookconfig.WebhookShadows && c.Name == "implicit-sources" && c.Expression != "false" {
					return nil
				}
			}
		}
		return errorf("not yet")
	})
	timed := func(what string, n int, write func(i int) error) {
		var took []time.Duration
		for i := range n {
			start := time.Now()
			if err := write(i); err != nil {
				t.Fatalf("%s %d: %v", what, i, err)
			}
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		t.Logf("%s: n=%d p50=%s p99=%s", what, n, took[n*50/100].Round(10*time.Microsecond), took[n*99/100].Round(10*time.Microsecond))
	}
	before := [2]int64{rc.calls[0].Load(), rc.calls[1].Load()}
	timed("NetworkPolicy create in a tenant namespace", 100, func(i int) error {
		_, err := rc.kube.NetworkingV1().NetworkPolicies(org).Create(ctx, &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("np-%d", i)},
		}, metav1.CreateOptions{})
		return err
	})
	t.Logf("webhook calls for them: %d", rc.calls[0].Load()+rc.calls[1].Load()-before[0]-before[1])
	for i := range 30 {
		if _, err := rc.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rep-leaf-%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before = [2]int64{rc.calls[0].Load(), rc.calls[1].Load()}
	timed("namespace DELETE of a leaf", 30, func(i int) error {
		return rc.kube.CoreV1().Namespaces().Delete(ctx, fmt.Sprintf("rep-leaf-%d", i), metav1.DeleteOptions{})
	})
	t.Logf("webhook calls for them: %d", rc.calls[0].Load()+rc.calls[1].Load()-before[0]-before[1])

	const rounds = 40
	t.Logf("%d rounds: rep-alice writes a candidate of race-N while the org admin locks race-N, at the same moment", rounds)
	both, candidateFirst, lockFirst := 0, 0, 0
	for i := range rounds {
		stable := fmt.Sprintf("race-%d", i)
		if _, err := rc.kube.RbacV1().RoleBindings(org).Create(ctx, binding(stable, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var candErr, lockErr error
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, candErr = alice.RbacV1().RoleBindings(org).Create(ctx, binding(stable+"-next", map[string]string{
				v1alpha1.AnnotationCandidateFor: stable, v1alpha1.AnnotationCanarySelector: v1alpha1.LabelStage + "=canary",
			}), metav1.CreateOptions{})
		}()
		go func() {
			defer wg.Done()
			<-start
			rb := binding(stable, map[string]string{v1alpha1.AnnotationLocked: "true"})
			_, lockErr = rc.kube.RbacV1().RoleBindings(org).Update(ctx, rb, metav1.UpdateOptions{})
		}()
		close(start)
		wg.Wait()
		if candErr == nil && lockErr == nil {
			both++
			t.Errorf("round %d: both the tenant's candidate and the lock of %s were admitted: the candidate, written without unlock, stands in for a locked source", i, stable)
		}
		switch {
		case candErr != nil && lockErr != nil:
			t.Logf("round %d: both refused (candidate: %v; lock: %v)", i, candErr, lockErr)
		case candErr == nil && lockErr != nil:
			candidateFirst++
		case lockErr == nil && candErr != nil:
			lockFirst++
		}
		if i == 0 {
			t.Logf("round 0: candidate: %v; lock: %v", candErr, lockErr)
		}
	}
	t.Logf("%d of %d rounds admitted both; the candidate alone %d, the lock alone %d", both, rounds, candidateFirst, lockFirst)

	lease, err := rc.kube.CoordinationV1().Leases(controlplane.IdentityNamespace).Get(ctx, admission.DefaultLedgerLease, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the guards' Lease: %v", err)
	}
	t.Logf("the guards' Lease: resourceVersion %s, last written by %s", lease.ResourceVersion, ptrString(lease.Spec.HolderIdentity))
}

func ptrString(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
