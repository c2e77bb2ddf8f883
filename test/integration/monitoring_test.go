package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

const (
	rulesFile     = "../../charts/implicit-apiserver/files/prometheus-rules.yaml"
	dashboardFile = "../../charts/implicit-apiserver/files/grafana-dashboard.json"
	// monGlobal is the global namespace of this test's materializing
	// server.
	monGlobal = "mon-global"
)

// TestMonitoringExpressions: every metric the chart's alerts
// (files/prometheus-rules.yaml) and Grafana dashboard
// (files/grafana-dashboard.json) query is exported by implicit-apiserver or
// kube-apiserver (or is Prometheus' own up), and the rules parse and
// validate as Prometheus loads them (rulefmt, the PromQL parser, the
// annotations' templates). The metrics are scraped after traffic that
// gives every labeled family a series: writes through the guards,
// SubjectAccessReviews through the authorization webhook, and, on a server
// of the test's own that materializes NetworkPolicies, copies written, one
// deleted behind the materializer (drift) and one name held by a tenant
// (a conflict).
func TestMonitoringExpressions(t *testing.T) {
	kube, _ := admin(t)
	ctx := t.Context()

	queried := map[string][]string{} // metric -> where it is queried
	p := parser.NewParser(parser.Options{})
	addExpr := func(where, expr string) {
		t.Helper()
		e, err := p.ParseExpr(expr)
		if err != nil {
			t.Errorf("%s: %q does not parse: %v", where, expr, err)
			return
		}
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				name := vs.Name
				for _, m := range vs.LabelMatchers {
					if m.Name == model.MetricNameLabel {
						name = m.Value
					}
				}
				queried[name] = append(queried[name], where)
			}
			return nil
		})
	}

	raw, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(raw, false, model.UTF8Validation, p)
	for _, err := range errs {
		t.Errorf("%s: %v", rulesFile, err)
	}
	alerts := 0
	if groups != nil {
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				alerts++
				addExpr("alert "+r.Alert, r.Expr)
			}
		}
	}
	t.Logf("%d alerts parsed", alerts)

	for where, expr := range dashboardExprs(t) {
		addExpr(where, expr)
	}
	if len(queried) < 15 {
		t.Fatalf("only %d metrics queried: %v", len(queried), slices.Sorted(func(yield func(string) bool) {
			for k := range queried {
				if !yield(k) {
					return
				}
			}
		}))
	}

	exported := monitoringTraffic(t, ctx)
	raw, err = kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("kube-apiserver /metrics: %v", err)
	}
	exported.Insert(metricNames(raw).UnsortedList()...)

	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range queried {
			if !yield(k) {
				return
			}
		}
	}) {
		if name == "up" || exported.Has(name) {
			continue
		}
		t.Errorf("%s is exported neither by implicit-apiserver nor by kube-apiserver; queried by %s", name, strings.Join(sets.List(sets.New(queried[name]...)), ", "))
	}
	if !t.Failed() {
		t.Logf("%d metrics queried, each exported", len(queried))
	}
}

// dashboardExprs returns every PromQL expression of the dashboard, its
// Grafana variables replaced as Grafana would, keyed by where it is.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "${job}", "implicit-apiserver", "$job", "implicit-apiserver")
	out := map[string]string{}
	for _, p := range dash.Panels {
		for i, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("dashboard panel %q: target %d has no expression", p.Title, i)
				continue
			}
			out[fmt.Sprintf("panel %q #%d", p.Title, i)] = vars.Replace(tg.Expr)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,`)
	for _, v := range dash.Templating.List {
		q, ok := v.Query.(map[string]any)
		if !ok {
			continue // the datasource variable
		}
		s, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(s)
		if m == nil {
			t.Errorf("dashboard variable %s: query %q is not label_values(metric, label)", v.Name, s)
			continue
		}
		out["variable "+v.Name] = m[1]
	}
	return out
}

// metricNames returns the sample names of a Prometheus text exposition.
func metricNames(raw []byte) sets.Set[string] {
	names := sets.New[string]()
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names.Insert(line[:i])
		}
	}
	return names
}

// scrape returns the metric names a server exports.
func scrape(t *testing.T, url string) sets.Set[string] {
	t.Helper()
	resp, err := serverClient(t).Get(url + "/metrics")
	if err != nil {
		t.Fatalf("%s/metrics: %v", url, err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatalf("%s/metrics: %v", url, err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("%s/metrics: %s", url, resp.Status)
	}
	return metricNames(buf.Bytes())
}

// monitoringTraffic makes traffic for every labeled family and returns
// the names the suite's server and a materializing server of the test's
// own export afterwards. That server reads its global sources from a hub
// (this cluster) as a fleet member does.
func monitoringTraffic(t *testing.T, ctx context.Context) sets.Set[string] {
	t.Helper()
	kube, _ := admin(t)
	createNamespace(t, kube, monGlobal, nil, nil)
	createNamespace(t, kube, "mon-team", nil, nil)
	createNamespace(t, kube, "mon-team-b", nil, nil)
	t.Cleanup(func() { deleteAllCopies(t, kube) })

	config := filepath.Join(t.TempDir(), "monitoring.yaml")
	if err := os.WriteFile(config, []byte(strings.ReplaceAll(matConfig, ", globalNamespace: "+matGlobal, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(cp.WorkDir(), "implicit-apiserver-sa.kubeconfig")
	t.Log("starting implicit-mon: networkpolicies delivered as copies, the global sources read from a hub (this cluster)")
	// Not t.Context(): that ends before the cleanups (deleteAllCopies).
	serverCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	s, err := cp.StartAggregated(serverCtx, controlplane.AggregatedServerOptions{
		Binary: os.Getenv(binaryEnv), Name: "implicit-mon",
		// Its global sources are read as a fleet member's are, from a hub:
		// this cluster, under the name mon-hub (implicit_global_sources_stale).
		Args: append([]string{"-v=2", "--webhook-configuration=", "--config=" + config,
			"--global-kubeconfig=" + kubeconfig, "--global-cluster-name=mon-hub", "--global-namespace=" + monGlobal}, identityArgs(kubeconfig)...),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("implicit-mon log tail:\n%s", s.LogTail(40))
		}
		_ = s.Stop()
	})

	t.Log("writes through the guards: a global mon-deny, copied into every tenant; mon-team-b's own mon-locked, then a locked global one (a conflict)")
	createPolicy(t, kube, monGlobal, "mon-deny", "")
	createPolicy(t, kube, "mon-team-b", "mon-locked", "own")
	locked := policy(monGlobal, "mon-locked", "global")
	locked.Annotations = map[string]string{v1alpha1.AnnotationLocked: "true"}
	if _, err := kube.NetworkingV1().NetworkPolicies(monGlobal).Create(ctx, locked, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.NetworkingV1().NetworkPolicies(monGlobal).Delete(context.Background(), "mon-locked", metav1.DeleteOptions{})
	})
	eventually(t, "mon-team has a copy of mon-deny", func(ctx context.Context) error {
		_, err := kube.NetworkingV1().NetworkPolicies("mon-team").Get(ctx, "mon-deny", metav1.GetOptions{})
		return err
	})
	t.Log("the copy deleted behind the materializer comes back (drift)")
	if err := kube.NetworkingV1().NetworkPolicies("mon-team").Delete(ctx, "mon-deny", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Log("a SubjectAccessReview in a tenant namespace reaches the authorization webhook")
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "mon-nobody", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "mon-team", Verb: "get", Resource: "pods"},
	}}
	if _, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	want := []string{
		"implicit_materialize_writes_total", "implicit_materialize_drift_repaired_total", "implicit_materialize_conflicts_total",
		"implicit_admission_decisions_total", "implicit_authorize_decisions_total", "rest_client_requests_total",
		"implicit_global_sources_stale",
	}
	var names sets.Set[string]
	eventually(t, "the servers export the families the traffic makes", func(context.Context) error {
		names = scrape(t, implicit.URL()).Union(scrape(t, s.URL()))
		if missing := sets.New(want...).Difference(names); missing.Len() > 0 {
			return errorf("not yet exported: %v", sets.List(missing))
		}
		return nil
	})
	return names
}
