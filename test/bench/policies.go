package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Issue 29: an admission policy whose parameter is a view. The bench's
// server then also serves ConfigMaps' views (policyConfigLine); one
// ValidatingAdmissionPolicy limits Deployments' replicas to the
// maxReplicas of the ConfigMap bench-limits each namespace inherits from the
// global namespace, and each run edits that global ConfigMap and times the
// edit until kube-apiserver enforces the new limit in every namespace that
// inherits it: nothing is written there.

// policyConfigLine is added to the bench's ImplicitConfiguration when
// -policy-runs > 0.
const policyConfigLine = "- {group: \"\", version: v1, resource: configmaps}\n"

const (
	policyParam = "bench-limits"
	// policyReplicas is what every probe asks for: over any limit, so each
	// probe is denied, naming the limit kube-apiserver applied.
	policyReplicas = 1000
)

// policyManifests are the policy and its binding: every namespace but the
// system ones and the global one, the parameter in the request's namespace.
var policyManifests = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: bench-replicas}
spec:
  failurePolicy: Fail
  paramKind: {apiVersion: implicit.dev/v1alpha1, kind: ConfigMap}
  matchConstraints:
    namespaceSelector:
      matchExpressions:
      - {key: kubernetes.io/metadata.name, operator: NotIn, values: [` + globalNS + `, kube-system, kube-public, kube-node-lease]}
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  validations:
  - expression: "object.spec.replicas <= int(params.data.maxReplicas)"
    messageExpression: "'over the limit ' + params.data.maxReplicas + '.'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: bench-replicas}
spec:
  policyName: bench-replicas
  validationActions: [Deny]
  paramRef: {name: ` + policyParam + `, parameterNotFoundAction: Deny}
  matchResources:
    namespaceSelector:
      matchExpressions:
      - {key: kubernetes.io/metadata.name, operator: NotIn, values: [` + globalNS + `, kube-system, kube-public, kube-node-lease]}
`

// policyResult is one N's admission-policy figures.
type policyResult struct {
	Namespaces int `json:"namespaces"`
	// Edits are, per run, the time from the edit of the global parameter
	// to the end of the probe sweep that found the new limit enforced in
	// the last namespace.
	Edits samples `json:"edits"`
	// Sweeps are the mean durations of one probe sweep over every
	// namespace: the resolution of Edits.
	Sweeps samples `json:"sweeps"`
	// ParamObjects is how many bench-limits ConfigMaps exist after the
	// runs: 1 (the global one), nothing written per namespace.
	ParamObjects int `json:"paramObjects"`
}

// measurePolicies times -policy-runs edits of the global parameter.
func (b *bench) measurePolicies(ctx context.Context, res *nResult) error {
	if b.o.policyRuns == 0 {
		return nil
	}
	expect := slices.Concat(b.tenants, b.orgs, []string{metav1.NamespaceDefault})
	m := &policyResult{Namespaces: len(expect)}
	res.Policies = m
	fmt.Printf("N=%d, an admission policy whose parameter is the ConfigMap view %s (inherited from %s) in %d namespaces (tenants, orgs and default):\n",
		b.n, policyParam, globalNS, len(expect))
	b.prog.show("admission policy: waiting for configmaps.implicit.dev in kube-apiserver's discovery N=%d", b.n)
	if err := b.waitDiscovered(ctx, "configmaps"); err != nil {
		return err
	}
	if _, _, err := b.cp.KubectlWithInput(ctx, bytes.NewBufferString(policyManifests), "apply", "-f", "-"); err != nil {
		return err
	}
	param := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: policyParam, Namespace: globalNS}, Data: map[string]string{"maxReplicas": "100"}}
	if _, err := b.kube.CoreV1().ConfigMaps(globalNS).Create(ctx, param, metav1.CreateOptions{}); err != nil {
		return err
	}
	// Until kube-apiserver's REST mapper (reset every 30 s) maps the view,
	// the policy is misconfigured: wait for the first limit everywhere.
	if _, _, err := b.sweepUntil(ctx, expect, "100", 3*time.Minute); err != nil {
		return fmt.Errorf("the first limit: %w", err)
	}
	for i := range b.o.policyRuns {
		limit := strconv.Itoa(101 + i)
		b.prog.show("admission policy: edit %d N=%d", i+1, b.n)
		param.Data["maxReplicas"] = limit
		if _, err := b.kube.CoreV1().ConfigMaps(globalNS).Update(ctx, param, metav1.UpdateOptions{}); err != nil {
			return err
		}
		took, sweep, err := b.sweepUntil(ctx, expect, limit, roundTimeout)
		if err != nil {
			return fmt.Errorf("edit %d: %w", i+1, err)
		}
		m.Edits = append(m.Edits, took)
		m.Sweeps = append(m.Sweeps, sweep)
	}
	all, err := b.kube.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + policyParam})
	if err != nil {
		return err
	}
	m.ParamObjects = len(all.Items)
	fmt.Printf("  edit of the global parameter until enforced in every namespace: %s (probe sweep over all namespaces: %s, the resolution); %s objects %d\n",
		m.Edits, m.Sweeps, policyParam, m.ParamObjects)
	return nil
}

// waitDiscovered waits until kube-apiserver's aggregated discovery lists
// the view resource (about a minute after it is served).
func (b *bench) waitDiscovered(ctx context.Context, resource string) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		_, lists, _ := b.kube.Discovery().ServerGroupsAndResources()
		for _, l := range lists {
			if l.GroupVersion == "implicit.dev/v1alpha1" {
				for _, r := range l.APIResources {
					if r.Name == resource {
						return nil
					}
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s.implicit.dev not in kube-apiserver's discovery after 3 minutes", resource)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// sweepUntil probes every namespace (a dry-run Deployment create of
// policyReplicas) in sweeps, each namespace until its denial names limit,
// and returns the time from its call to the end of the sweep that saw the
// last namespace enforce it, and the mean sweep duration.
func (b *bench) sweepUntil(ctx context.Context, namespaces []string, limit string, timeout time.Duration) (time.Duration, time.Duration, error) {
	start := time.Now()
	want := "over the limit " + limit + "."
	pending := slices.Clone(namespaces)
	var sweeps []time.Duration
	var last string
	for len(pending) > 0 {
		if time.Since(start) > timeout {
			return 0, 0, fmt.Errorf("%d namespaces still without limit %s after %s, e.g. %s: %s", len(pending), limit, timeout, pending[0], last)
		}
		s := time.Now()
		var mu sync.Mutex
		var still []string
		err := parallel(ctx, len(pending), workers, func(ctx context.Context, i int) error {
			_, err := b.kube.AppsV1().Deployments(pending[i]).Create(ctx, policyProbe(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil && strings.Contains(err.Error(), want) {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			still = append(still, pending[i])
			if err != nil {
				last = err.Error()
			} else {
				last = "admitted"
			}
			return nil
		})
		if err != nil {
			return 0, 0, err
		}
		sweeps = append(sweeps, time.Since(s))
		pending = still
	}
	var sum time.Duration
	for _, s := range sweeps {
		sum += s
	}
	return time.Since(start), sum / time.Duration(len(sweeps)), nil
}

func policyProbe() *appsv1.Deployment {
	replicas := int32(policyReplicas)
	labels := map[string]string{"app": "bench-probe"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-probe"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
}

// policiesMarkdown writes the admission-policy table when any N measured it.
func (r *results) policiesMarkdown(p func(string, ...any), mp func(samples) string) {
	var ns []*nResult
	for _, n := range r.Ns {
		if n.Policies != nil {
			ns = append(ns, n)
		}
	}
	if len(ns) == 0 {
		return
	}
	p("### An admission policy whose parameter is a view: one global edit enforced everywhere (issue 29)")
	p("")
	p("| N | namespaces | edit: enforced in the last namespace, median | p99 | probe sweep (resolution), median | materialized copy of one global edit, median | %s objects | rounds |", policyParam)
	p("|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range ns {
		m := n.Policies
		mat := "–"
		if n.Materialize != nil {
			mat = dur(n.Materialize.Edits.median())
		}
		p("| %d | %d | %s | %s | %s | %d | %d |", n.N, m.Namespaces, mp(m.Edits), dur(m.Sweeps.median()), mat, m.ParamObjects, len(m.Edits))
	}
	p("")
	p("Each edit is an update of the global ConfigMap %s (maxReplicas) in %s; a ValidatingAdmissionPolicy (failurePolicy Fail) with paramKind implicit.dev/v1alpha1 ConfigMap and a binding whose paramRef names no namespace checks Deployment creates in every namespace against the parameter it inherits. The time runs from the edit until a sweep of server-side dry-run creates (%d workers, %d replicas, over every limit) has seen, in every namespace, a denial naming the new limit; a namespace enforcing it is not probed again. The sweep's duration bounds the figure's resolution. Nothing is written in the namespaces: %s objects counts every ConfigMap of that name after the runs. The materialized column is the table above's edit of a materialized NetworkPolicy, for the same N.", policyParam, globalNS, workers, policyReplicas, policyParam)
	p("")
}
