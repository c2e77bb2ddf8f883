package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// The admission-policy tests (issue 29) run on a control plane of their own
// that shares the suite's etcd: its implicit-apiserver serves ConfigMaps
// and a CRD of the tests' own (ReplicaLimit, merged with Overlay) as views,
// which the suite's server does not (its guards would then cover every
// ConfigMap write of the suite, and its outage tests write ConfigMaps), its
// kube-apiserver writes an audit log of Deployments, and the tests may stop
// and restart that server as they like.

// apConfig serves the defaults, ConfigMaps (Replace) and ReplicaLimits
// (Overlay).
const apConfig = `apiVersion: config.implicit.dev/v1alpha1
kind: ImplicitConfiguration
resources:
- {group: rbac.authorization.k8s.io, version: v1, resource: rolebindings}
- {group: rbac.authorization.k8s.io, version: v1, resource: roles}
- {group: networking.k8s.io, version: v1, resource: networkpolicies}
- {group: "", version: v1, resource: configmaps}
- {group: params.example.com, version: v1, resource: replicalimits, strategy: Overlay}
`

// apCRD is the ReplicaLimit CustomResourceDefinition: spec.maxReplicas.
const apCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: replicalimits.params.example.com
spec:
  group: params.example.com
  scope: Namespaced
  names: {plural: replicalimits, singular: replicalimit, kind: ReplicaLimit, listKind: ReplicaLimitList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              maxReplicas: {type: integer}
              minReplicas: {type: integer}
`

var (
	apReplicaLimits     = schema.GroupVersionResource{Group: "params.example.com", Version: "v1", Resource: "replicalimits"}
	apReplicaLimitViews = schema.GroupVersionResource{Group: "implicit.dev", Version: "v1alpha1", Resource: "replicalimits"}
	apConfigMapViews    = schema.GroupVersionResource{Group: "implicit.dev", Version: "v1alpha1", Resource: "configmaps"}
)

// policyCluster is the admission-policy tests' control plane.
type policyCluster struct {
	cp       *controlplane.ControlPlane
	srv      *controlplane.AggregatedServer
	kube     kubernetes.Interface
	dyn      dynamic.Interface
	auditLog string
}

// startPolicyCluster starts the control plane, its implicit-apiserver (as
// cluster-admin, with its guards), the ReplicaLimit CRD and the global
// namespace, and stops them when t ends.
func startPolicyCluster(t *testing.T) *policyCluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	work := filepath.Join(cp.WorkDir(), "policies-"+time.Now().Format("150405.000"))
	audit, auditLog, err := controlplane.AuditArgs(filepath.Join(work, "audit"), schema.GroupResource{Group: "apps", Resource: "deployments"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pcp, err := controlplane.Start(ctx, controlplane.Options{
		BinDir: os.Getenv(toolsBinEnv), WorkDir: work,
		ExternalEtcdURL: cp.EtcdURL(), EtcdPrefix: "/" + filepath.Base(work),
		KubeAPIServerArgs: audit,
		Logf:              t.Logf,
	})
	if err != nil {
		t.Fatalf("starting the policies control plane: %v", err)
	}
	// Before the suite's control plane, whose etcd this one uses.
	t.Cleanup(func() { _ = pcp.Stop() })
	config := filepath.Join(work, "config.yaml")
	if err := os.WriteFile(config, []byte(apConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := pcp.StartAggregated(ctx, controlplane.AggregatedServerOptions{
		Binary: os.Getenv(binaryEnv), Name: "implicit-policies",
		Args: append([]string{"-v=2", "--webhook-configuration=" + controlplane.GuardsConfiguration, "--config=" + config}, pcp.WebhookServerArgs()...),
	})
	if err != nil {
		t.Fatalf("starting implicit-apiserver: %v\n%s", err, pcp.LogTails(30))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("implicit-policies log tail:\n%s", srv.LogTail(40))
		}
	})
	if err := pcp.RegisterAPIService(ctx, srv.Port()); err != nil {
		t.Fatalf("registering the APIService: %v\n%s", err, srv.LogTail(30))
	}
	var served []schema.GroupResource
	for _, k := range kinds.BuiltIns() {
		served = append(served, k.Source.GroupResource())
	}
	if err := pcp.RegisterGuards(ctx, srv, served); err != nil {
		t.Fatal(err)
	}
	c := &policyCluster{cp: pcp, srv: srv, auditLog: auditLog}
	if c.kube, err = kubernetes.NewForConfig(pcp.AdminConfig()); err != nil {
		t.Fatal(err)
	}
	if c.dyn, err = dynamic.NewForConfig(pcp.AdminConfig()); err != nil {
		t.Fatal(err)
	}
	c.apply(t, apCRD)
	c.apply(t, `apiVersion: v1
kind: Namespace
metadata: {name: `+globalNS+`}`)
	eventually(t, "replicalimits.implicit.dev is served", func(ctx context.Context) error {
		_, err := c.dyn.Resource(apReplicaLimitViews).Namespace("default").List(ctx, metav1.ListOptions{})
		return err
	})
	// A policy whose paramKind kube-apiserver can't map yet is
	// misconfigured: with failurePolicy Fail it denies every request its
	// matchConstraints match, whatever its bindings (docs/policies.md).
	// kube-apiserver refreshes an APIService's discovery every minute.
	listed := time.Now()
	eventuallyWithin(t, time.Second, discoveryRefresh, "kube-apiserver's discovery lists replicalimits.implicit.dev", func(ctx context.Context) error {
		// Aggregated discovery (/apis), as kube-apiserver's REST mapper
		// reads it: /apis/implicit.dev/v1alpha1 would be answered by
		// implicit-apiserver itself.
		_, lists, err := c.kube.Discovery().ServerGroupsAndResources()
		if err != nil {
			return err
		}
		for _, rl := range lists {
			if rl.GroupVersion != "implicit.dev/v1alpha1" {
				continue
			}
			for _, r := range rl.APIResources {
				if r.Name == "replicalimits" {
					return nil
				}
			}
		}
		return errorf("not yet")
	})
	t.Logf("kube-apiserver's discovery listed the view %s after it was served", time.Since(listed).Round(time.Second))
	t.Logf("policies control plane, implicit-apiserver and views ready in %s", time.Since(start).Round(time.Millisecond))
	return c
}

// apply applies manifests as admin.
func (c *policyCluster) apply(t *testing.T, manifests string) {
	t.Helper()
	if out, stderr, err := c.cp.KubectlWithInput(t.Context(), bytes.NewBufferString(manifests), "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, stderr)
	}
}

// kubectl runs kubectl as admin and fails t on an error.
func (c *policyCluster) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := c.cp.Kubectl(t.Context(), args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

// namespace creates a namespace with labels ("k=v" pairs) and the given
// annotations.
func (c *policyCluster) namespace(t *testing.T, name string, labels map[string]string, annotations map[string]string) {
	t.Helper()
	if _, err := c.kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

// warnings collects the warnings of one client's responses.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// apOutcome is what a dry-run create of a Deployment met: its error, the
// warnings returned, and the object admitted (mutations applied).
type apOutcome struct {
	err      error
	warnings []string
	obj      *appsv1.Deployment
	took     time.Duration
}

func (o apOutcome) String() string {
	switch {
	case o.err != nil:
		return "denied: " + o.err.Error()
	case len(o.warnings) > 0:
		return "warned: " + strings.Join(o.warnings, "; ")
	}
	return "admitted"
}

// apDeployment is a Deployment of the given replicas.
func apDeployment(name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
}

// try creates, dry-run, a Deployment of the given replicas in ns as admin.
func (c *policyCluster) try(ctx context.Context, ns string, replicas int32) apOutcome {
	cfg := c.cp.AdminConfig()
	w := &warnings{}
	cfg.WarningHandler = w
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return apOutcome{err: err}
	}
	start := time.Now()
	d, err := kube.AppsV1().Deployments(ns).Create(ctx, apDeployment("ap-try", replicas), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	took := time.Since(start)
	w.mu.Lock()
	defer w.mu.Unlock()
	return apOutcome{err: err, warnings: w.list, obj: d, took: took}
}

// want waits until a dry-run create of replicas in ns meets want: "admitted"
// (no error, no warning), "denied: <substring>" or "warned: <substring>".
func (c *policyCluster) want(t *testing.T, ns string, replicas int32, want string) apOutcome {
	t.Helper()
	return c.wantWithin(t, converge, ns, replicas, want)
}

// wantWithin is want with its own bound; a failure lists every outcome
// seen on the way.
func (c *policyCluster) wantWithin(t *testing.T, timeout time.Duration, ns string, replicas int32, want string) apOutcome {
	t.Helper()
	var got apOutcome
	var seen []string
	eventuallyWithin(t, 200*time.Millisecond, timeout, fmt.Sprintf("%d replicas in %s: %s", replicas, ns, want), func(ctx context.Context) error {
		got = c.try(ctx, ns, replicas)
		if apMatches(got, want) {
			return nil
		}
		if s := got.String(); len(seen) == 0 || seen[len(seen)-1] != s {
			seen = append(seen, s)
		}
		return errors.New(strings.Join(seen, " | then "))
	})
	return got
}

func apMatches(got apOutcome, want string) bool {
	kind, sub, _ := strings.Cut(want, ": ")
	switch kind {
	case "admitted":
		return got.err == nil && len(got.warnings) == 0
	case "denied":
		return got.err != nil && strings.Contains(got.err.Error(), sub)
	case "warned":
		return got.err == nil && strings.Contains(strings.Join(got.warnings, "\n"), sub)
	}
	return false
}

// auditAnnotations returns the annotations of the audit events of
// Deployment creates in ns whose key contains key.
func (c *policyCluster) auditAnnotations(ns, key string) ([]string, error) {
	f, err := os.Open(c.auditLog)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev struct {
			Verb        string                     `json:"verb"`
			Stage       string                     `json:"stage"`
			ObjectRef   struct{ Namespace string } `json:"objectRef"`
			Annotations map[string]string          `json:"annotations"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.ObjectRef.Namespace != ns || ev.Verb != "create" || ev.Stage != "ResponseComplete" {
			continue
		}
		for k, v := range ev.Annotations {
			if strings.Contains(k, key) {
				out = append(out, k+"="+v)
			}
		}
	}
	return out, sc.Err()
}
