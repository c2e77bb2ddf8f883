package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

// -explain (issue 45): how long after a served-group change `kubectl
// explain` of the new kind works, through kube-apiserver's aggregator.
//
// implicit-apiserver starts configured with -explain-runs kinds of
// explain.bench.example.com whose CRDs do not exist yet. Each run creates
// one CRD (the served group gains a kind, without a restart) and times,
// from that moment:
//
//   - served: the view answers a list through kube-apiserver (this server);
//   - discovery: kube-apiserver's aggregated discovery (/apis, as kubectl
//     reads it) lists the view: the aggregator's copy, refetched every
//     minute (or at once when the APIService changes: -explain-touch);
//   - openapi: kube-apiserver's /openapi/v3 names a new hash for
//     implicit.dev/v1alpha1: the aggregator's refetch, every minute;
//   - explain, fresh: real `kubectl explain <kind>.implicit.dev` succeeds,
//     each try with a new --cache-dir (a kubectl that never ran here);
//   - explain, warm: the same, every try with one --cache-dir that explained
//     rolebindings.implicit.dev before the change (a user's kubectl).
//
// -explain-before runs the same on another binary first (e.g. a build from
// before servedgroup.RevalidateOpenAPI): the previous figure.

// explainGroup is the group of the probe kinds.
const explainGroup = "explain.bench.example.com"

// explainTenant is the namespace whose view of each new kind is listed.
const explainTenant = "explain-tenant"

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// explainTries is one kubectl's loop of tries after a change.
type explainTries struct {
	Shown    time.Duration  `json:"shown"` // change to the end of the first try that showed it (0: never)
	Tries    int            `json:"tries"`
	Slowest  time.Duration  `json:"slowestTry"`
	Failures map[string]int `json:"failures,omitempty"` // each failed try's error, by cause
}

// explainPhase is one change, timed from the change on.
type explainPhase struct {
	Served    time.Duration `json:"served,omitempty"`    // the view lists (the kind added); 0: not seen
	Discovery time.Duration `json:"discovery,omitempty"` // the aggregator's discovery lists it (the kind added)
	OpenAPI   time.Duration `json:"openapi"`             // the aggregator's /openapi/v3 names a new hash
	Fresh     explainTries  `json:"fresh"`
	Warm      explainTries  `json:"warm"`
}

// explainRun is one probe kind: added (its CRD created), then its schema
// changed (a field added to the CRD).
type explainRun struct {
	Binary   string       `json:"binary"` // "this" or "before"
	Run      int          `json:"run"`
	Resource string       `json:"resource"`
	Touched  bool         `json:"touched"` // the APIService was annotated once the view was served
	Added    explainPhase `json:"added"`
	Changed  explainPhase `json:"changed"`
	Load     string       `json:"loadBefore"`
}

func explainResource(i int) string { return fmt.Sprintf("probe%ds", i) }

// explainConfig serves the defaults and one probe kind per run.
func explainConfig(runs int) string {
	var sb strings.Builder
	sb.WriteString(`apiVersion: config.implicit.dev/v1alpha1
kind: ImplicitConfiguration
resources:
- {group: rbac.authorization.k8s.io, version: v1, resource: rolebindings}
- {group: rbac.authorization.k8s.io, version: v1, resource: roles}
- {group: networking.k8s.io, version: v1, resource: networkpolicies}
`)
	for i := range runs {
		fmt.Fprintf(&sb, "- {group: %s, version: v1, resource: %s}\n", explainGroup, explainResource(i))
	}
	return sb.String()
}

// probeCRD is run i's CRD: kind Probe<i>, a spec with one described field.
func probeCRD(i int, added bool) *unstructured.Unstructured {
	plural := explainResource(i)
	fields := map[string]any{
		"marker": map[string]any{"type": "string", "description": fmt.Sprintf("The marker of explain probe %d.", i)},
	}
	if added {
		fields["added"] = map[string]any{"type": "string", "description": "A field the CRD gained after the view was served."}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + explainGroup},
		"spec": map[string]any{
			"group": explainGroup,
			"scope": "Namespaced",
			"names": map[string]any{"plural": plural, "singular": strings.TrimSuffix(plural, "s"),
				"kind": fmt.Sprintf("Probe%d", i), "listKind": fmt.Sprintf("Probe%dList", i)},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{"spec": map[string]any{
						"type":       "object",
						"properties": fields,
					}},
				}},
			}},
		},
	}}
}

// explainBench runs -explain: -explain-before's binary first, if set, then
// -implicit-binary's.
func explainBench(ctx context.Context, o options) error {
	kubectl := o.kubectl
	if out, err := exec.CommandContext(ctx, kubectl, "version", "--client").Output(); err == nil {
		fmt.Printf("kubectl: %s (%s)\n", kubectl, strings.Join(strings.Fields(strings.SplitN(string(out), "\n", 2)[0]), " "))
	} else {
		return fmt.Errorf("kubectl %s: %w", kubectl, err)
	}
	type bin struct{ label, path string }
	bins := []bin{{"this", o.binary}}
	if o.explainBefore != "" {
		bins = []bin{{"before", o.explainBefore}, {"this", o.binary}}
	}
	var all []explainRun
	for _, b := range bins {
		runs, err := explainBinary(ctx, o, b.label, b.path)
		all = append(all, runs...)
		if err != nil {
			writeExplain(o, all)
			return fmt.Errorf("%s (%s): %w", b.label, b.path, err)
		}
	}
	return writeExplain(o, all)
}

// explainBinary starts a control plane with binary behind the aggregator
// and times -explain-runs served-group changes on it.
func explainBinary(ctx context.Context, o options, label, binary string) (_ []explainRun, err error) {
	work, err := os.MkdirTemp("", "implicit-explain-")
	if err != nil {
		return nil, err
	}
	config := filepath.Join(work, "explain-configuration.yaml")
	if err := os.WriteFile(config, []byte(explainConfig(o.explainRuns)), 0o644); err != nil {
		return nil, err
	}
	o.binary = binary
	o.implicitArgs = append(slices.Clone(o.implicitArgs), "--config="+config)
	fmt.Printf("\n== explain: %s binary %s, %d served-group changes (touch the APIService: %v); load average %s; work dir %s\n",
		label, binary, o.explainRuns, o.explainTouch, loadAverage(), work)
	prog := newProgress(os.Stderr, o.explainRuns+1)
	b, err := startBench(ctx, o, 1, prog, work)
	if err != nil {
		fmt.Printf("logs kept in %s\n", filepath.Join(work, "logs"))
		return nil, err
	}
	defer func() {
		b.cp.Stop()
		if err == nil && !o.keepWorkDir {
			os.RemoveAll(work)
		} else {
			fmt.Printf("logs kept in %s\n", filepath.Join(work, "logs"))
		}
	}()
	for _, ns := range []string{globalNS, explainTenant} {
		if err := b.createNamespace(ctx, ns, nil); err != nil {
			return nil, err
		}
	}
	// The warm kubectl explains the group once, as a user's has.
	k := &kubectlRunner{path: o.kubectl, kubeconfig: b.cp.KubeconfigPath(), work: work, warm: filepath.Join(work, "kubectl-warm")}
	start := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := k.explain(ctx, k.warm, "rolebindings.implicit.dev", "RoleBinding")
		return err == nil, nil
	}); err != nil {
		return nil, fmt.Errorf("kubectl explain rolebindings.implicit.dev never worked: %w", err)
	}
	prog.step("kubectl explain rolebindings.implicit.dev works (%s after the APIService was registered)", time.Since(start).Round(100*time.Millisecond))
	var runs []explainRun
	for i := range o.explainRuns {
		r, err := b.explainOnce(ctx, k, i)
		r.Binary = label
		runs = append(runs, r)
		if err != nil {
			return runs, err
		}
		a, c := r.Added, r.Changed
		fmt.Printf("explain %s run %d (%s): added: served %s, discovery %s, openapi %s; kubectl explain fresh %s (%d tries %v), warm %s (%d tries %v); "+
			"schema changed: openapi %s; kubectl explain fresh %s (%d tries %v), warm %s (%d tries %v)\n",
			label, i, r.Resource, shown(a.Served), shown(a.Discovery), shown(a.OpenAPI),
			shown(a.Fresh.Shown), a.Fresh.Tries, a.Fresh.Failures, shown(a.Warm.Shown), a.Warm.Tries, a.Warm.Failures,
			shown(c.OpenAPI), shown(c.Fresh.Shown), c.Fresh.Tries, c.Fresh.Failures, shown(c.Warm.Shown), c.Warm.Tries, c.Warm.Failures)
		prog.step("run %d done", i)
	}
	return runs, nil
}

// explainOnce adds run i's kind (its CRD created), times what follows,
// then changes its schema (a field added) and times that.
func (b *bench) explainOnce(ctx context.Context, k *kubectlRunner, i int) (explainRun, error) {
	r := explainRun{Run: i, Resource: explainResource(i), Touched: b.o.explainTouch, Load: loadAverage()}
	kind := fmt.Sprintf("Probe%d", i)
	hashBefore, err := b.openAPIHash(ctx)
	if err != nil {
		return r, fmt.Errorf("/openapi/v3 before the change: %w", err)
	}
	if _, err := b.dyn.Resource(crdResource).Create(ctx, probeCRD(i, false), metav1.CreateOptions{}); err != nil {
		return r, err
	}
	r.Added = b.timeChange(ctx, k, time.Now(), hashBefore, r.Resource, r.Resource+".implicit.dev", kind, true)

	// The warm kubectl's discovery is refreshed (kubectl api-resources
	// invalidates its cache) and it explains the kind: a user's kubectl
	// that knows it. Then the CRD gains a field.
	if _, err := k.run(ctx, k.warm, "api-resources"); err != nil {
		return r, err
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, b.o.explainTimeout, true, func(ctx context.Context) (bool, error) {
		_, err := k.explain(ctx, k.warm, r.Resource+".implicit.dev", kind)
		return err == nil, nil
	}); err != nil {
		return r, fmt.Errorf("kubectl explain %s.implicit.dev with a refreshed cache: %w", r.Resource, err)
	}
	if hashBefore, err = b.openAPIHash(ctx); err != nil {
		return r, err
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cur, err := b.dyn.Resource(crdResource).Get(ctx, r.Resource+"."+explainGroup, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		next := probeCRD(i, true)
		next.SetResourceVersion(cur.GetResourceVersion())
		_, err = b.dyn.Resource(crdResource).Update(ctx, next, metav1.UpdateOptions{})
		return err == nil, nil
	}); err != nil {
		return r, fmt.Errorf("adding a field to %s's CRD: %w", r.Resource, err)
	}
	r.Changed = b.timeChange(ctx, k, time.Now(), hashBefore, r.Resource, r.Resource+".implicit.dev.spec", "added", false)
	return r, nil
}

// timeChange times, from changed, kubectl explain of target showing want
// (with a new cache dir each try, and with the warm one), the aggregator's
// OpenAPI hash changing and, for a kind added, the view served and in the
// aggregator's discovery; each within -explain-timeout.
func (b *bench) timeChange(ctx context.Context, k *kubectlRunner, changed time.Time, hashBefore, resource, target, want string, added bool) explainPhase {
	var ph explainPhase
	ctx, cancel := context.WithTimeout(ctx, b.o.explainTimeout)
	defer cancel()
	view := schema.GroupVersionResource{Group: "implicit.dev", Version: "v1alpha1", Resource: resource}
	fresh, warm := make(chan explainTries, 1), make(chan explainTries, 1)
	go func() { fresh <- k.until(ctx, changed, "", target, want) }()
	go func() { warm <- k.until(ctx, changed, k.warm, target, want) }()
	// The server's and the aggregator's sides, every 250 ms.
	_ = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if added && ph.Served == 0 {
			if _, err := b.dyn.Resource(view).Namespace(explainTenant).List(ctx, metav1.ListOptions{}); err == nil {
				ph.Served = time.Since(changed)
				if b.o.explainTouch {
					b.touchAPIService(ctx)
				}
			}
		}
		if added && ph.Discovery == 0 && b.aggregatedDiscoveryHas(ctx, resource) {
			ph.Discovery = time.Since(changed)
		}
		if h, err := b.openAPIHash(ctx); ph.OpenAPI == 0 && err == nil && h != hashBefore {
			ph.OpenAPI = time.Since(changed)
		}
		return (!added || ph.Served > 0 && ph.Discovery > 0) && ph.OpenAPI > 0, nil
	})
	ph.Fresh, ph.Warm = <-fresh, <-warm
	return ph
}
