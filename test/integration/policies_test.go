package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// apReplicasPolicy is a ValidatingAdmissionPolicy limiting a Deployment's
// replicas to its param's, read with expr from params (a view of kind
// paramKind); failurePolicy fp.
func apReplicasPolicy(name, paramKind, limit, fp string) string {
	return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: %[1]s}
spec:
  failurePolicy: %[4]s
  paramKind: {apiVersion: implicit.dev/v1alpha1, kind: %[2]s}
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
  - expression: "object.spec.replicas <= %[3]s"
    messageExpression: "'%[1]s: replicas ' + string(object.spec.replicas) + ' over the limit ' + string(%[3]s) + ' of ' + params.metadata.namespace + '/' + params.metadata.name"
`, name, paramKind, limit, fp)
}

// apBinding binds policy to the namespaces labeled selector (k=v) with
// paramRef name (no namespace: the request's), notFound and actions.
func apBinding(name, policy, param, notFound, selector string, actions ...string) string {
	k, v, _ := strings.Cut(selector, "=")
	return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: %s}
spec:
  policyName: %s
  validationActions: [%s]
  paramRef: {name: %s, parameterNotFoundAction: %s}
  matchResources:
    namespaceSelector: {matchLabels: {%q: %q}}
`, name, policy, strings.Join(actions, ", "), param, notFound, k, v)
}

// apReplicaLimit is a ReplicaLimit source.
func apReplicaLimit(ns, name string, max int, locked bool) string {
	ann := ""
	if locked {
		ann = fmt.Sprintf(`, annotations: {%q: "true"}`, v1alpha1.AnnotationLocked)
	}
	return fmt.Sprintf(`apiVersion: params.example.com/v1
kind: ReplicaLimit
metadata: {name: %s, namespace: %s%s}
spec: {maxReplicas: %d}
`, name, ns, ann, max)
}

// apLimitsConfigMap is a ConfigMap source holding data.maxReplicas.
func apLimitsConfigMap(ns, name string, max int, locked bool) string {
	ann := ""
	if locked {
		ann = fmt.Sprintf(`, annotations: {%q: "true"}`, v1alpha1.AnnotationLocked)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: %s, namespace: %s%s}
data: {maxReplicas: "%d"}
`, name, ns, ann, max)
}

// TestAdmissionPolicies is issue 29's first point through kube-apiserver:
// ValidatingAdmissionPolicies and a MutatingAdmissionPolicy whose paramKind
// is a view and whose bindings' paramRef names no namespace, so that each
// request's namespace's inherited parameter applies. The subtests share
// one control plane of their own (policies_cluster_test.go).
func TestAdmissionPolicies(t *testing.T) {
	c := startPolicyCluster(t)
	t.Run("Inherited", func(t *testing.T) { apInherited(t, c) })
	t.Run("ConfigMapsAndExclusions", func(t *testing.T) { apConfigMaps(t, c) })
	t.Run("Mutating", func(t *testing.T) { apMutating(t, c) })
	t.Run("Staged", func(t *testing.T) { apStaged(t, c) })
	// Last: it stops and restarts the server.
	t.Run("OutageMatrix", func(t *testing.T) { apOutageMatrix(t, c) })
}

// apInherited: a CRD of the test's own (ReplicaLimit, Overlay) as paramKind.
// The global limit applies in every tenant, a parent's stricter one in its
// subtree, a tenant's overlay in that tenant; an edit of the global limit
// is enforced in every tenant with nothing written there; once the global
// limit is locked, neither the parent's nor the tenant's overlay changes it.
func apInherited(t *testing.T, c *policyCluster) {
	sel := map[string]string{"ap-suite": "crd"}
	c.namespace(t, "ap-org", sel, nil)
	c.namespace(t, "ap-team", map[string]string{"ap-suite": "crd", v1alpha1.LabelParent: "ap-org"}, nil)
	c.namespace(t, "ap-solo", sel, nil)
	c.namespace(t, "ap-solo2", sel, nil)
	c.namespace(t, "ap-free", sel, nil)
	c.apply(t, apReplicasPolicy("ap-replicas", "ReplicaLimit", "params.spec.maxReplicas", "Fail"))
	c.apply(t, apBinding("ap-replicas", "ap-replicas", "replicas", "Deny", "ap-suite=crd", "Deny"))

	t.Log("global limit 3; ap-org (parent of ap-team) 2; ap-free overlays 5")
	c.apply(t, apReplicaLimit(globalNS, "replicas", 3, false))
	c.apply(t, apReplicaLimit("ap-org", "replicas", 2, false))
	c.apply(t, apReplicaLimit("ap-free", "replicas", 5, false))
	// startPolicyCluster waited for kube-apiserver's discovery to list the
	// view's kind; its REST mapper, which compiles the policy, is reset
	// every 30 s (policies.md: until then a policy is misconfigured).
	start := time.Now()
	c.wantWithin(t, time.Minute, "ap-solo", 4, "denied: over the limit 3")
	t.Logf("the policy enforced %s after it was created", time.Since(start).Round(100*time.Millisecond))
	for _, ns := range []string{"ap-solo", "ap-solo2"} {
		c.want(t, ns, 3, "admitted")
		c.want(t, ns, 4, "denied: replicas 4 over the limit 3 of "+ns+"/replicas")
	}
	for _, ns := range []string{"ap-org", "ap-team"} {
		c.want(t, ns, 2, "admitted")
		c.want(t, ns, 3, "denied: over the limit 2")
	}
	c.want(t, "ap-free", 5, "admitted")
	c.want(t, "ap-free", 6, "denied: over the limit 5")

	t.Log("the global limit becomes 1: enforced in ap-solo and ap-solo2, with nothing written there")
	edit := time.Now()
	c.apply(t, apReplicaLimit(globalNS, "replicas", 1, false))
	var last time.Duration
	for _, ns := range []string{"ap-solo", "ap-solo2"} {
		c.want(t, ns, 2, "denied: over the limit 1")
		last = time.Since(edit)
	}
	t.Logf("edit of the global limit to enforcement in the last tenant: %s (polled every 200ms)", last.Round(time.Millisecond))
	c.want(t, "ap-free", 5, "admitted")
	c.want(t, "ap-team", 2, "admitted")
	sources, err := c.dyn.Resource(apReplicaLimits).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var where []string
	for _, s := range sources.Items {
		where = append(where, s.GetNamespace())
	}
	if strings.Join(where, ",") != "ap-free,ap-org,"+globalNS {
		t.Errorf("ReplicaLimit sources in %v, want only ap-free, ap-org and %s", where, globalNS)
	}

	t.Log("the global limit is locked: the parent's and the tenant's overlays no longer change maxReplicas")
	c.apply(t, apReplicaLimit(globalNS, "replicas", 1, true))
	for _, ns := range []string{"ap-team", "ap-free"} {
		c.want(t, ns, 2, "denied: over the limit 1")
	}
	v, err := c.dyn.Resource(apReplicaLimitViews).Namespace("ap-free").Get(t.Context(), "replicas", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ap-free's view: conflict %q", v.GetAnnotations()[v1alpha1.AnnotationConflict])
	if !strings.Contains(v.GetAnnotations()[v1alpha1.AnnotationConflict], "ap-free/replicas") {
		t.Errorf("ap-free's view names no blocked overlay: %v", v.GetAnnotations())
	}
}

// apConfigMaps: ConfigMaps (Replace), needing no CRD, as paramKind. A
// tenant's own ConfigMap shadows the global one while that is unlocked; an
// exclusion (implicit.dev/exclude) is an exception whose effect is the
// binding's parameterNotFoundAction (here Allow: exempt); once the global
// ConfigMap is locked, neither the shadow nor the exclusion takes it away.
func apConfigMaps(t *testing.T, c *policyCluster) {
	sel := map[string]string{"ap-suite": "cm"}
	c.namespace(t, "ap-cm-a", sel, nil)
	c.namespace(t, "ap-cm-own", sel, nil)
	c.namespace(t, "ap-cm-x", sel, map[string]string{v1alpha1.AnnotationExclude: "configmaps/ap-cm-limits"})
	c.apply(t, apReplicasPolicy("ap-cm", "ConfigMap", "int(params.data.maxReplicas)", "Fail"))
	c.apply(t, apBinding("ap-cm", "ap-cm", "ap-cm-limits", "Allow", "ap-suite=cm", "Deny"))
	c.apply(t, apLimitsConfigMap(globalNS, "ap-cm-limits", 3, false))
	c.apply(t, apLimitsConfigMap("ap-cm-own", "ap-cm-limits", 5, false))

	c.want(t, "ap-cm-a", 3, "admitted")
	c.want(t, "ap-cm-a", 4, "denied: replicas 4 over the limit 3 of ap-cm-a/ap-cm-limits")
	c.want(t, "ap-cm-own", 5, "admitted")
	c.want(t, "ap-cm-own", 6, "denied: over the limit 5")
	t.Log("ap-cm-x excludes the parameter: parameterNotFoundAction Allow exempts it")
	c.want(t, "ap-cm-x", 9, "admitted")

	t.Log("the global ConfigMap is locked: ap-cm-own's shadow and ap-cm-x's exclusion no longer apply")
	c.apply(t, apLimitsConfigMap(globalNS, "ap-cm-limits", 3, true))
	c.want(t, "ap-cm-own", 4, "denied: over the limit 3 of ap-cm-own/ap-cm-limits")
	c.want(t, "ap-cm-x", 4, "denied: over the limit 3 of ap-cm-x/ap-cm-limits")
	c.want(t, "ap-cm-x", 3, "admitted")
}

// apMutating: a MutatingAdmissionPolicy sets a Deployment's cost-center
// label, when it has none, from the inherited ConfigMap ap-defaults: the
// global default, a parent's in its subtree, and an edit of the global one
// applied in every tenant on their next admission.
func apMutating(t *testing.T, c *policyCluster) {
	c.namespace(t, "ap-mu-org", map[string]string{"ap-suite": "mu"}, nil)
	c.namespace(t, "ap-mu-team", map[string]string{"ap-suite": "mu", v1alpha1.LabelParent: "ap-mu-org"}, nil)
	c.namespace(t, "ap-mu-solo", map[string]string{"ap-suite": "mu"}, nil)
	c.apply(t, `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: ap-defaults}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  paramKind: {apiVersion: implicit.dev/v1alpha1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  matchConditions:
  - name: no-cost-center
    expression: "!has(object.metadata.labels) || !('cost-center' in object.metadata.labels)"
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {"cost-center": params.data.costCenter}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: ap-defaults}
spec:
  policyName: ap-defaults
  paramRef: {name: ap-defaults, parameterNotFoundAction: Allow}
  matchResources:
    namespaceSelector: {matchLabels: {ap-suite: mu}}
`)
	defaults := func(ns, cc string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ap-defaults, namespace: %s}\ndata: {costCenter: %s}\n", ns, cc)
	}
	c.apply(t, defaults(globalNS, "global-cc"))
	c.apply(t, defaults("ap-mu-org", "org-cc"))
	wantLabel := func(ns, want string) {
		t.Helper()
		eventually(t, fmt.Sprintf("a Deployment admitted in %s is labeled cost-center=%s", ns, want), func(ctx context.Context) error {
			got := c.try(ctx, ns, 1)
			if got.err != nil {
				return got.err
			}
			if l := got.obj.Labels["cost-center"]; l != want {
				return errorf("cost-center %q", l)
			}
			return nil
		})
	}
	wantLabel("ap-mu-solo", "global-cc")
	wantLabel("ap-mu-org", "org-cc")
	wantLabel("ap-mu-team", "org-cc")
	edit := time.Now()
	c.apply(t, defaults(globalNS, "global-cc-2"))
	wantLabel("ap-mu-solo", "global-cc-2")
	t.Logf("edit of the global default to its application in ap-mu-solo: %s", time.Since(edit).Round(time.Millisecond))
	wantLabel("ap-mu-team", "org-cc")
}

// apMatrix is one cell of the exclusion matrix.
type apMatrixCell struct{ failurePolicy, notFound string }

func (m apMatrixCell) ns() string {
	return "ap-m-" + strings.ToLower(m.failurePolicy) + "-" + strings.ToLower(m.notFound)
}

// apOutageMatrix: parameterNotFoundAction Allow/Deny × failurePolicy
// Fail/Ignore, each in a tenant that inherits the parameter and in one that
// excludes it, with implicit-apiserver up, down and restarted.
func apOutageMatrix(t *testing.T, c *policyCluster) {
	cells := []apMatrixCell{{"Fail", "Allow"}, {"Fail", "Deny"}, {"Ignore", "Allow"}, {"Ignore", "Deny"}}
	c.apply(t, apLimitsConfigMap(globalNS, "ap-m-limits", 3, false))
	for _, fp := range []string{"Fail", "Ignore"} {
		c.apply(t, apReplicasPolicy("ap-m-"+strings.ToLower(fp), "ConfigMap", "int(params.data.maxReplicas)", fp))
	}
	for _, m := range cells {
		c.namespace(t, m.ns(), map[string]string{"ap-matrix": m.ns()}, nil)
		c.namespace(t, m.ns()+"-x", map[string]string{"ap-matrix": m.ns()}, map[string]string{v1alpha1.AnnotationExclude: "configmaps/ap-m-limits"})
		c.apply(t, apBinding(m.ns(), "ap-m-"+strings.ToLower(m.failurePolicy), "ap-m-limits", m.notFound, "ap-matrix="+m.ns(), "Deny"))
	}
	// What the excluded namespace meets: exempt under Allow; under Deny,
	// a denial that failurePolicy decides (Ignore lets it through).
	excluded := func(m apMatrixCell, down bool) string {
		switch {
		case !down && m.notFound == "Allow":
			return "admitted"
		case !down && m.failurePolicy == "Fail":
			return "denied: no params found"
		case !down:
			return "admitted"
		case m.failurePolicy == "Fail":
			return "denied: "
		}
		return "admitted"
	}
	check := func(down bool) {
		t.Helper()
		for _, m := range cells {
			c.want(t, m.ns(), 9, "denied: over the limit 3")
			c.want(t, m.ns(), 3, "admitted")
			got := c.want(t, m.ns()+"-x", 9, excluded(m, down))
			t.Logf("%s-x (down %t): 9 replicas %s (%s)", m.ns(), down, got, got.took.Round(time.Millisecond))
		}
	}
	t.Log("implicit-apiserver up")
	check(false)
	// What a request costs where the parameter is excluded (a miss of
	// kube-apiserver's param cache: a live GET through the aggregator)
	// beside one where it is found in that cache.
	cost := func(ns string) time.Duration {
		const n = 20
		var sum time.Duration
		for range n {
			sum += c.try(t.Context(), ns, 1).took
		}
		return sum / n
	}
	t.Logf("mean of 20 dry-run creates, up: inherited parameter %s, excluded parameter %s",
		cost("ap-m-fail-allow").Round(100*time.Microsecond), cost("ap-m-fail-allow-x").Round(100*time.Microsecond))

	t.Log("implicit-apiserver down: stale parameters keep being enforced from kube-apiserver's informer; misses fail")
	if err := c.srv.Stop(); err != nil {
		t.Logf("stopping: %v", err)
	}
	stopped := time.Now()
	t.Cleanup(func() {
		if c.srv.Process() == nil {
			_ = c.srv.Restart(context.Background())
		}
	})
	check(true)
	t.Logf("mean of 20 dry-run creates, down: inherited parameter %s, excluded parameter %s",
		cost("ap-m-fail-allow").Round(100*time.Microsecond), cost("ap-m-fail-allow-x").Round(100*time.Microsecond))
	t.Logf("the down checks took %s", time.Since(stopped).Round(time.Millisecond))

	// No edit while it is down: its guards (failurePolicy Fail) refuse
	// writes of the kinds it serves, ConfigMaps included.
	t.Log("restart: the first edit after it is back is enforced")
	restart := time.Now()
	if err := c.srv.Restart(context.Background()); err != nil {
		t.Fatalf("restarting: %v\n%s", err, c.srv.LogTail(30))
	}
	t.Logf("restart: ready after %s", time.Since(restart).Round(time.Millisecond))
	edit := time.Now()
	c.apply(t, apLimitsConfigMap(globalNS, "ap-m-limits", 1, false))
	c.want(t, "ap-m-fail-allow", 2, "denied: over the limit 1")
	t.Logf("after the restart, an edit is enforced %s later", time.Since(edit).Round(time.Millisecond))
	for _, m := range cells {
		c.want(t, m.ns()+"-x", 9, excluded(m, false))
	}
}
