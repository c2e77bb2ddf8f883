package chart_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/cmd/server"
)

// TestFlagsExist: every argument the Deployment passes is a flag the server
// accepts, with the defaults and with every optional part on.
func TestFlagsExist(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  []string
	}{
		{name: "defaults"},
		{name: "everything", set: []string{"webhooks.anonymous=true", "networkPolicy.from[0].ipBlock.cidr=10.0.0.0/8",
			"hub.kubeconfigSecret=hub", "hub.clusterName=hub", "kinds[0].group=policy.example.com", "kinds[0].version=v1",
			"kinds[0].resource=guardrails", "extraArgs[0]=--v=2"}},
		{name: "no webhooks", set: []string{"webhooks.enabled=false", "webhooks.clientCA.enabled=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := mustTemplate(t, tc.set...).args(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cmd := server.NewCommand(ctx)
			if err := cmd.ParseFlags(args); err != nil {
				t.Errorf("implicit-apiserver rejects the chart's args %q: %v", args, err)
			}
		})
	}
}

// TestServedKinds: values.kinds becomes a --config file the server loads, and
// a ClusterRole aggregated into the sources role grants reading each kind.
func TestServedKinds(t *testing.T) {
	t.Parallel()
	objs := mustTemplate(t,
		"kinds[0].group=rbac.authorization.k8s.io", "kinds[0].version=v1", "kinds[0].resource=rolebindings",
		"kinds[1].group=networking.k8s.io", "kinds[1].version=v1", "kinds[1].resource=networkpolicies", "kinds[1].strategy=Overlay")
	if !slices.Contains(objs.args(t), "--config=/etc/implicit-apiserver/config.yaml") {
		t.Errorf("no --config in args %q", objs.args(t))
	}
	var cm corev1.ConfigMap
	convert(t, objs.get("ConfigMap", "implicit-apiserver-config"), &cm)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cm.Data["config.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := server.LoadConfiguration(path)
	if err != nil {
		t.Fatalf("the server can't load the chart's configuration: %v\n%s", err, cm.Data["config.yaml"])
	}
	if len(cfg.Kinds) != 2 {
		t.Errorf("configuration serves %d kinds, want 2", len(cfg.Kinds))
	}
	var role rbacv1.ClusterRole
	convert(t, objs.get("ClusterRole", "implicit-apiserver-configured-kinds"), &role)
	if role.Labels["implicit.dev/aggregate-to-implicit-apiserver"] != "true" {
		t.Errorf("configured-kinds ClusterRole is not aggregated: labels %v", role.Labels)
	}
	for _, gr := range [][2]string{{"rbac.authorization.k8s.io", "rolebindings"}, {"networking.k8s.io", "networkpolicies"}} {
		for _, verb := range []string{"get", "list", "watch"} {
			if !allows(role.Rules, gr[0], gr[1], "", verb) {
				t.Errorf("configured-kinds ClusterRole: no %s on %s.%s", verb, gr[1], gr[0])
			}
		}
	}
	if d := mustTemplate(t); d.get("ConfigMap", "implicit-apiserver-config") != nil || slices.ContainsFunc(d.args(t), func(a string) bool { return strings.HasPrefix(a, "--config") }) {
		t.Error("without kinds, a configuration is rendered or passed")
	}
}

// TestGoMemLimit: GOMEMLIMIT is goMemLimitPercent of the memory limit.
func TestGoMemLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{name: "default 90% of 1Gi", want: "966367641"},
		{name: "512Mi", set: []string{"resources.limits.memory=512Mi"}, want: "483183820"},
		{name: "decimal 2G", set: []string{"resources.limits.memory=2G"}, want: "1800000000"},
		{name: "80%", set: []string{"goMemLimitPercent=80"}, want: "858993459"},
		{name: "off", set: []string{"goMemLimitPercent=0"}},
		{name: "no limit", set: []string{"resources.limits=null"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c corev1.Container
			convert(t, &unstructured.Unstructured{Object: mustTemplate(t, tc.set...).container(t)}, &c)
			got := ""
			for _, e := range c.Env {
				if e.Name == "GOMEMLIMIT" {
					got = e.Value
				}
			}
			if got != tc.want {
				t.Errorf("GOMEMLIMIT %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSecurityContext: the pods run as the Deployment of artifacts/base does.
func TestSecurityContext(t *testing.T) {
	t.Parallel()
	var chart, base appsv1.Deployment
	convert(t, mustTemplate(t).get("Deployment", "implicit-apiserver"), &chart)
	readYAML(t, "artifacts/base/deployment.yaml", &base)
	if !reflect.DeepEqual(chart.Spec.Template.Spec.SecurityContext, base.Spec.Template.Spec.SecurityContext) {
		t.Errorf("pod securityContext %+v, artifacts/base has %+v", chart.Spec.Template.Spec.SecurityContext, base.Spec.Template.Spec.SecurityContext)
	}
	if !reflect.DeepEqual(chart.Spec.Template.Spec.Containers[0].SecurityContext, base.Spec.Template.Spec.Containers[0].SecurityContext) {
		t.Errorf("container securityContext %+v, artifacts/base has %+v", chart.Spec.Template.Spec.Containers[0].SecurityContext, base.Spec.Template.Spec.Containers[0].SecurityContext)
	}
	var pdb policyv1.PodDisruptionBudget
	convert(t, mustTemplate(t).get("PodDisruptionBudget", "implicit-apiserver"), &pdb)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PDB minAvailable %v, want 1", pdb.Spec.MinAvailable)
	}
	if mustTemplate(t, "replicas=1").get("PodDisruptionBudget", "implicit-apiserver") != nil {
		t.Error("a PDB with minAvailable 1 is rendered for a single replica: it would block every drain")
	}
}

// TestRolloutOverlaps: a rollout starts the new pod and waits until it is
// ready before it stops an old one, so that even one replica is never down
// during a rollout: with no replica up, kube-apiserver's aggregator answers
// 503 and client-go's informers relist (docs/operations.md, "What a
// rollout costs").
func TestRolloutOverlaps(t *testing.T) {
	t.Parallel()
	for _, replicas := range []string{"1", "2"} {
		var d appsv1.Deployment
		convert(t, mustTemplate(t, "replicas="+replicas).get("Deployment", "implicit-apiserver"), &d)
		s := d.Spec.Strategy
		if s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate == nil ||
			s.RollingUpdate.MaxUnavailable == nil || s.RollingUpdate.MaxSurge == nil {
			t.Errorf("replicas=%s: strategy %+v, want RollingUpdate with maxSurge and maxUnavailable set", replicas, s)
			continue
		}
		if u := s.RollingUpdate.MaxUnavailable; u.String() != "0" {
			t.Errorf("replicas=%s: maxUnavailable %s, want 0: a rollout would stop a replica before its successor is ready", replicas, u.String())
		}
		if v := s.RollingUpdate.MaxSurge; v.IntValue() < 1 {
			t.Errorf("replicas=%s: maxSurge %s, want at least 1: with maxUnavailable 0 the rollout could not start", replicas, v.String())
		}
		// The stopping pod serves until kube-apiserver stops routing to
		// it, and exits within its grace period.
		var delay time.Duration
		for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
			if v, ok := strings.CutPrefix(arg, "--shutdown-delay-duration="); ok {
				delay, _ = time.ParseDuration(v)
			}
		}
		grace := 30 * time.Second // the pod's default
		if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
			grace = time.Duration(*g) * time.Second
		}
		if delay <= 0 || delay > grace/2 {
			t.Errorf("replicas=%s: --shutdown-delay-duration %s, want positive and at most half the grace period %s", replicas, delay, grace)
		}
	}
}

// TestService: the Service is artifacts/base's (ports, session affinity),
// selecting the release's pods.
func TestService(t *testing.T) {
	t.Parallel()
	var chart, base corev1.Service
	convert(t, mustTemplate(t).get("Service", "implicit-apiserver"), &chart)
	readYAML(t, "artifacts/base/service.yaml", &base)
	if !reflect.DeepEqual(chart.Spec.Ports, base.Spec.Ports) {
		t.Errorf("Service ports %+v, artifacts/base has %+v", chart.Spec.Ports, base.Spec.Ports)
	}
	if chart.Spec.SessionAffinity != base.Spec.SessionAffinity || !reflect.DeepEqual(chart.Spec.SessionAffinityConfig, base.Spec.SessionAffinityConfig) {
		t.Errorf("Service session affinity %s %+v, artifacts/base has %s %+v", chart.Spec.SessionAffinity, chart.Spec.SessionAffinityConfig,
			base.Spec.SessionAffinity, base.Spec.SessionAffinityConfig)
	}
	var d appsv1.Deployment
	convert(t, mustTemplate(t).get("Deployment", "implicit-apiserver"), &d)
	if !reflect.DeepEqual(chart.Spec.Selector, d.Spec.Selector.MatchLabels) {
		t.Errorf("Service selects %v, the Deployment's pods are %v", chart.Spec.Selector, d.Spec.Selector.MatchLabels)
	}
}

// TestDeploymentMatchesBase: with the defaults, the chart's container runs as
// artifacts/base's does: every argument, environment variable, probe, port
// and mount of the base is in the chart's.
func TestDeploymentMatchesBase(t *testing.T) {
	t.Parallel()
	var chart, base appsv1.Deployment
	convert(t, mustTemplate(t).get("Deployment", "implicit-apiserver"), &chart)
	readYAML(t, "artifacts/base/deployment.yaml", &base)
	c, b := chart.Spec.Template.Spec.Containers[0], base.Spec.Template.Spec.Containers[0]
	for _, arg := range b.Args {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("artifacts/base passes %s, the chart doesn't (chart args %q)", arg, c.Args)
		}
	}
	for _, e := range b.Env {
		if !slices.ContainsFunc(c.Env, func(ce corev1.EnvVar) bool { return reflect.DeepEqual(ce, e) }) {
			t.Errorf("artifacts/base sets %s, the chart doesn't", e.Name)
		}
	}
	for _, m := range b.VolumeMounts {
		if !slices.ContainsFunc(c.VolumeMounts, func(cm corev1.VolumeMount) bool { return reflect.DeepEqual(cm, m) }) {
			t.Errorf("artifacts/base mounts %+v, the chart doesn't", m)
		}
	}
	if !reflect.DeepEqual(c.Ports, b.Ports) || !reflect.DeepEqual(c.StartupProbe, b.StartupProbe) ||
		!reflect.DeepEqual(c.ReadinessProbe, b.ReadinessProbe) || !reflect.DeepEqual(c.LivenessProbe, b.LivenessProbe) {
		t.Error("ports or probes differ from artifacts/base")
	}
	if !reflect.DeepEqual(chart.Spec.Strategy, base.Spec.Strategy) || *chart.Spec.Replicas != *base.Spec.Replicas {
		t.Errorf("strategy %+v replicas %d, artifacts/base has %+v %d", chart.Spec.Strategy, *chart.Spec.Replicas, base.Spec.Strategy, *base.Spec.Replicas)
	}
}
