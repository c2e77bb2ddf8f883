package fleet

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

// fleetRulesFile holds the alerts the chart installs with fleet.hub.
const fleetRulesFile = "../../charts/implicit-apiserver/files/prometheus-rules-fleet.yaml"

// TestFleetRulesQueryHubMetrics: the fleet's alerts parse as Prometheus
// loads them, and every implicit_ metric they query is exported by the
// hub's implicit-apiserver (--fleet-hub) once members are registered.
func TestFleetRulesQueryHubMetrics(t *testing.T) {
	raw, err := os.ReadFile(fleetRulesFile)
	if err != nil {
		t.Fatal(err)
	}
	// The file is the list of groups the chart appends to its rules' groups.
	raw = append([]byte("groups:\n"), raw...)
	p := parser.NewParser(parser.Options{})
	groups, errs := rulefmt.Parse(raw, false, model.UTF8Validation, p)
	for _, err := range errs {
		t.Errorf("%s: %v", fleetRulesFile, err)
	}
	if groups == nil {
		t.FailNow()
	}
	queried := map[string]string{} // metric -> the alert querying it
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			e, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Errorf("alert %s: %v", r.Alert, err)
				continue
			}
			parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok {
					queried[vs.Name] = r.Alert
				}
				return nil
			})
		}
	}
	if len(queried) < 3 {
		t.Fatalf("only %d metrics queried by the fleet's alerts: %v", len(queried), queried)
	}
	// The hub's gauges are set every 10 s from the registered members.
	time.Sleep(11 * time.Second) // on purpose: one period of the hub's gauges
	exported := scrape(t, hub, hubImplicit)
	for metric, alert := range queried {
		if !strings.HasPrefix(metric, "implicit_") {
			continue
		}
		if !strings.Contains(exported, "\n"+metric+"{") && !strings.Contains(exported, "\n"+metric+" ") {
			t.Errorf("alert %s queries %s, which the hub's implicit-apiserver does not export", alert, metric)
		}
	}
}
