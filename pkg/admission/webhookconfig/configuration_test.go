package webhookconfig_test

import (
	"context"
	"reflect"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// clientConfig is the test's client config of the guard at path.
func clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	url := "https://implicit.example:6443" + path
	return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: []byte("ca")}
}

func TestConfiguration(t *testing.T) {
	t.Parallel()
	var paths []string
	cfg := webhookconfig.Configuration("implicit-apiserver", served, func(path string) admissionregistrationv1.WebhookClientConfig {
		paths = append(paths, path)
		return clientConfig(path)
	})
	if cfg.Name != "implicit-apiserver" {
		t.Errorf("name %q, want implicit-apiserver", cfg.Name)
	}
	if want := []string{webhookconfig.PathLocks, webhookconfig.PathShadows, webhookconfig.PathParents, webhookconfig.PathFanout, webhookconfig.PathMaterialized, webhookconfig.PathCandidates, webhookconfig.PathStages, webhookconfig.PathNamespaceDeletions}; !reflect.DeepEqual(paths, want) {
		t.Errorf("client configs asked for %q, want %q", paths, want)
	}

	// One rule per group, with that group's resources: a cross product
	// would match rolebindings of another group too.
	sourceRule := func(ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{
			{Operations: ops, Rule: admissionregistrationv1.Rule{
				APIGroups:   []string{"rbac.authorization.k8s.io"},
				APIVersions: []string{"*"},
				Resources:   []string{"rolebindings", "roles"},
				Scope:       ptr.To(admissionregistrationv1.NamespacedScope),
			}},
			{Operations: ops, Rule: admissionregistrationv1.Rule{
				APIGroups:   []string{"networking.k8s.io"},
				APIVersions: []string{"*"},
				Resources:   []string{"networkpolicies"},
				Scope:       ptr.To(admissionregistrationv1.NamespacedScope),
			}},
		}
	}
	c, u, d := admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete
	// The lock guard sees updates through status and scale too.
	subresourceRule := []admissionregistrationv1.RuleWithOperations{
		{Operations: []admissionregistrationv1.OperationType{u}, Rule: admissionregistrationv1.Rule{
			APIGroups:   []string{"rbac.authorization.k8s.io"},
			APIVersions: []string{"*"},
			Resources:   []string{"rolebindings/status", "rolebindings/scale", "roles/status", "roles/scale"},
			Scope:       ptr.To(admissionregistrationv1.NamespacedScope),
		}},
		{Operations: []admissionregistrationv1.OperationType{u}, Rule: admissionregistrationv1.Rule{
			APIGroups:   []string{"networking.k8s.io"},
			APIVersions: []string{"*"},
			Resources:   []string{"networkpolicies/status", "networkpolicies/scale"},
			Scope:       ptr.To(admissionregistrationv1.NamespacedScope),
		}},
	}
	statusRule := []admissionregistrationv1.RuleWithOperations{
		{Operations: []admissionregistrationv1.OperationType{u}, Rule: admissionregistrationv1.Rule{
			APIGroups:   []string{"rbac.authorization.k8s.io"},
			APIVersions: []string{"*"},
			Resources:   []string{"rolebindings/status", "roles/status"},
			Scope:       ptr.To(admissionregistrationv1.NamespacedScope),
		}},
		{Operations: []admissionregistrationv1.OperationType{u}, Rule: admissionregistrationv1.Rule{
			APIGroups:   []string{"networking.k8s.io"},
			APIVersions: []string{"*"},
			Resources:   []string{"networkpolicies/status"},
			Scope:       ptr.To(admissionregistrationv1.NamespacedScope),
		}},
	}
	want := []struct {
		name, path, condition string
		fail                  admissionregistrationv1.FailurePolicyType
		timeout               int32
		rules                 []admissionregistrationv1.RuleWithOperations
	}{
		// Failure policies and timeouts as docs/design.md gives them.
		{webhookconfig.WebhookLocks, webhookconfig.PathLocks, "lock-touched", admissionregistrationv1.Fail, 5, append(sourceRule(c, u, d), subresourceRule...)},
		{webhookconfig.WebhookShadows, webhookconfig.PathShadows, "implicit-sources", admissionregistrationv1.Fail, 5, sourceRule(c)},
		{webhookconfig.WebhookParents, webhookconfig.PathParents, "hierarchy-changed", admissionregistrationv1.Fail, 5, []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{c, u},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces", "namespaces/status", "namespaces/finalize"},
				Scope: ptr.To(admissionregistrationv1.ClusterScope),
			},
		}}},
		{webhookconfig.WebhookFanout, webhookconfig.PathFanout, "implicit-sources", admissionregistrationv1.Ignore, 2, sourceRule(c, u, d)},
		// The materialized guard sees status updates too: they write a
		// copy's labels.
		{webhookconfig.WebhookMaterialized, webhookconfig.PathMaterialized, "materialized-touched", admissionregistrationv1.Fail, 5, append(sourceRule(c, u, d), statusRule...)},
		// A candidate's status update changes what its view item shows.
		{webhookconfig.WebhookCandidates, webhookconfig.PathCandidates, "candidate-touched", admissionregistrationv1.Fail, 5, append(sourceRule(c, u, d), statusRule...)},
		{webhookconfig.WebhookStages, webhookconfig.PathStages, "stage-changed", admissionregistrationv1.Fail, 5, []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{c, u},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces", "namespaces/status", "namespaces/finalize"},
				Scope: ptr.To(admissionregistrationv1.ClusterScope),
			},
		}}},
		// Deleting a namespace others inherit from: the synced condition
		// names them.
		{webhookconfig.WebhookNamespaceDeletions, webhookconfig.PathNamespaceDeletions, "implicit-sources", admissionregistrationv1.Fail, 5, []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{d},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces"},
				Scope: ptr.To(admissionregistrationv1.ClusterScope),
			},
		}}},
	}
	if len(cfg.Webhooks) != len(want) {
		t.Fatalf("%d webhooks, want %d", len(cfg.Webhooks), len(want))
	}
	for i, w := range want {
		got := cfg.Webhooks[i]
		t.Run(w.name, func(t *testing.T) {
			if got.Name != w.name {
				t.Errorf("webhook %d is %q, want %q", i, got.Name, w.name)
			}
			if !reflect.DeepEqual(got.ClientConfig, clientConfig(w.path)) {
				t.Errorf("client config %+v, want the one of %s", got.ClientConfig, w.path)
			}
			if got.FailurePolicy == nil || *got.FailurePolicy != w.fail {
				t.Errorf("failure policy %v, want %s", ptr.Deref(got.FailurePolicy, ""), w.fail)
			}
			if got.SideEffects == nil || *got.SideEffects != admissionregistrationv1.SideEffectClassNone {
				t.Errorf("side effects %v, want None", ptr.Deref(got.SideEffects, ""))
			}
			if !reflect.DeepEqual(got.AdmissionReviewVersions, []string{"v1"}) {
				t.Errorf("review versions %q, want [v1]", got.AdmissionReviewVersions)
			}
			if got.TimeoutSeconds == nil || *got.TimeoutSeconds != w.timeout {
				t.Errorf("timeout %v, want %d seconds", ptr.Deref(got.TimeoutSeconds, 0), w.timeout)
			}
			if !reflect.DeepEqual(got.Rules, w.rules) {
				t.Errorf("rules\n%+v\nwant\n%+v", got.Rules, w.rules)
			}
			if len(got.MatchConditions) != 1 || got.MatchConditions[0].Name != w.condition {
				t.Errorf("match conditions %+v, want one named %q", got.MatchConditions, w.condition)
			}
		})
	}
	// The source-dependent conditions start matching nothing.
	for _, i := range []int{1, 3} {
		if e := cfg.Webhooks[i].MatchConditions[0].Expression; e != "false" {
			t.Errorf("%s starts with condition %q, want false", cfg.Webhooks[i].Name, e)
		}
	}
	// Every condition compiles in kube-apiserver's environment.
	for _, w := range cfg.Webhooks {
		newMatcher(t, w)
	}
}

// newMatcher compiles the match conditions of w as kube-apiserver's webhook
// dispatcher does, failing the test on a compilation error.
func newMatcher(t *testing.T, w admissionregistrationv1.ValidatingWebhook) matchconditions.Matcher {
	t.Helper()
	compiler := plugincel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	exprs := make([]plugincel.ExpressionAccessor, len(w.MatchConditions))
	for i, c := range w.MatchConditions {
		exprs[i] = &matchconditions.MatchCondition{Name: c.Name, Expression: c.Expression}
	}
	eval := compiler.CompileCondition(exprs, plugincel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.StoredExpressions)
	if errs := eval.CompilationErrors(); len(errs) > 0 {
		t.Fatalf("%s: match conditions %+v don't compile: %v", w.Name, w.MatchConditions, errs)
	}
	return matchconditions.NewMatcher(eval, w.FailurePolicy, "webhook", "validate", w.Name)
}

// admissionAttrs are the attributes kube-apiserver matches a request with.
type admissionAttrs struct {
	op        k8sadmission.Operation
	gvr       schema.GroupVersionResource
	namespace string
	name      string
	sub       string
	old, obj  runtime.Object
}

var (
	rbGVR = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
	nsGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

// match evaluates w's match conditions on a, with typed objects as
// kube-apiserver has them for built-in kinds or unstructured ones as it has
// them for custom resources; it fails the test on an evaluation error.
func match(t *testing.T, w admissionregistrationv1.ValidatingWebhook, a admissionAttrs, asUnstructured bool) bool {
	t.Helper()
	conv := func(o runtime.Object) runtime.Object {
		if o == nil || reflect.ValueOf(o).IsNil() {
			return nil
		}
		if !asUnstructured {
			return o.DeepCopyObject()
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatalf("converting %T: %v", o, err)
		}
		return &unstructured.Unstructured{Object: m}
	}
	old, obj := conv(a.old), conv(a.obj)
	var gvk schema.GroupVersionKind
	for _, o := range []runtime.Object{obj, old} {
		if o != nil {
			gvk = o.GetObjectKind().GroupVersionKind()
			break
		}
	}
	attrs := k8sadmission.NewAttributesRecord(obj, old, gvk, a.namespace, a.name, a.gvr, a.sub, a.op, nil, false, &user.DefaultInfo{Name: "alice"})
	va, err := k8sadmission.NewVersionedAttributes(attrs, gvk, nil)
	if err != nil {
		t.Fatalf("versioned attributes: %v", err)
	}
	res := newMatcher(t, w).Match(context.Background(), va, nil, nil)
	if res.Error != nil {
		t.Fatalf("%s: evaluating %+v: %v", w.Name, w.MatchConditions, res.Error)
	}
	return res.Matches
}

// webhookOf returns the webhook name of a fresh Configuration.
func webhookOf(t *testing.T, name string) admissionregistrationv1.ValidatingWebhook {
	t.Helper()
	for _, w := range webhookconfig.Configuration("implicit-apiserver", served, clientConfig).Webhooks {
		if w.Name == name {
			return w
		}
	}
	t.Fatalf("no webhook %s", name)
	return admissionregistrationv1.ValidatingWebhook{}
}

// withCondition returns w with its one match condition's expression set to expr.
func withCondition(w admissionregistrationv1.ValidatingWebhook, expr string) admissionregistrationv1.ValidatingWebhook {
	w.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: w.MatchConditions[0].Name, Expression: expr}}
	return w
}

// runMatches runs each case with typed and unstructured objects.
func runMatches(t *testing.T, w admissionregistrationv1.ValidatingWebhook, tests []matchCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, u := range []bool{false, true} {
				if got := match(t, w, tc.attrs, u); got != tc.want {
					t.Errorf("matches = %v (unstructured %v), want %v", got, u, tc.want)
				}
			}
		})
	}
}

type matchCase struct {
	name  string
	attrs admissionAttrs
	want  bool
}

func TestLockTouchedCondition(t *testing.T) {
	t.Parallel()
	c, u, d := k8sadmission.Create, k8sadmission.Update, k8sadmission.Delete
	rb := func(opts ...objOpt) *rbacv1.RoleBinding { return roleBinding(global, "admins", opts...) }
	unlockedFalse := annotated(v1alpha1.AnnotationLocked, "false")
	other := annotated("other", "x")
	at := func(op k8sadmission.Operation, old, obj *rbacv1.RoleBinding) admissionAttrs {
		a := admissionAttrs{op: op, gvr: rbGVR, namespace: global, name: "admins"}
		if old != nil {
			a.old = old
		}
		if obj != nil {
			a.obj = obj
		}
		return a
	}
	runMatches(t, webhookOf(t, webhookconfig.WebhookLocks), []matchCase{
		{"update old and new locked", at(u, rb(isLocked), rb(isLocked)), true},
		{"update removing the lock", at(u, rb(isLocked), rb()), true},
		{"update removing the lock, other annotations kept", at(u, rb(isLocked, other), rb(other)), true},
		{"update adding the lock", at(u, rb(), rb(isLocked)), true},
		{"update unlocked, no annotations", at(u, rb(), rb()), false},
		{"update unlocked, other annotations", at(u, rb(other), rb(other)), false},
		{"update with lock false", at(u, rb(unlockedFalse), rb(unlockedFalse)), false},
		{"create locked", at(c, nil, rb(isLocked)), true},
		{"create unlocked", at(c, nil, rb()), false},
		{"delete locked", at(d, rb(isLocked), nil), true},
		{"delete unlocked", at(d, rb(other), nil), false},
		{"delete unlocked, no annotations", at(d, rb(), nil), false},
		// A Scale carries none of the source's annotations: the guard
		// looks the lock up.
		{"scale", admissionAttrs{op: u, gvr: rbGVR, namespace: global, name: "admins", sub: "scale", old: scale(global, "admins", 1), obj: scale(global, "admins", 2)}, true},
		{"status of a locked source", admissionAttrs{op: u, gvr: rbGVR, namespace: global, name: "admins", sub: "status", old: rb(isLocked), obj: rb(isLocked)}, true},
		{"status of an unlocked source", admissionAttrs{op: u, gvr: rbGVR, namespace: global, name: "admins", sub: "status", old: rb(), obj: rb()}, false},
	})
}

// bare is a namespace without labels.
func bare(name string) *corev1.Namespace {
	n := ns(name, "")
	n.Labels = nil
	return n
}

// nsAt is a namespace request's attributes.
func nsAt(op k8sadmission.Operation, old, obj *corev1.Namespace) admissionAttrs {
	a := admissionAttrs{op: op, gvr: nsGVR, name: obj.Name, obj: obj}
	if old != nil {
		a.old = old
	}
	return a
}

func TestHierarchyChangedCondition(t *testing.T) {
	t.Parallel()
	c, u := k8sadmission.Create, k8sadmission.Update
	inherit := func(v string) nsOpt { return func(n *corev1.Namespace) { n.Labels[v1alpha1.LabelInherit] = v } }
	other := func(n *corev1.Namespace) { n.Labels["team"] = "a" }
	runMatches(t, webhookOf(t, webhookconfig.WebhookParents), []matchCase{
		{"create with a parent", nsAt(c, nil, ns("team-a", "org")), true},
		{"create without a parent", nsAt(c, nil, ns("team-a", "")), false},
		{"create without labels", nsAt(c, nil, bare("team-a")), false},
		{"create not inheriting", nsAt(c, nil, ns("team-a", "", noInherit)), true},
		{"create with a parent uid", nsAt(c, nil, ns("team-a", "", parentUID("x"))), true},
		{"update setting a parent", nsAt(u, ns("team-a", ""), ns("team-a", "org")), true},
		{"update setting a parent on a namespace without labels", nsAt(u, bare("team-a"), ns("team-a", "org")), true},
		{"update changing the parent", nsAt(u, ns("team-a", "org"), ns("team-a", "org2")), true},
		{"update keeping the parent", nsAt(u, ns("team-a", "org", recorded), ns("team-a", "org", recorded, other)), false},
		// Removing a parent, or opting out, may take locked items away.
		{"update removing the parent", nsAt(u, ns("team-a", "org"), ns("team-a", "")), true},
		{"update removing every label", nsAt(u, ns("team-a", "org"), bare("team-a")), true},
		{"update without a parent", nsAt(u, ns("team-a", ""), ns("team-a", "")), false},
		{"update opting out", nsAt(u, ns("team-a", "org"), ns("team-a", "org", noInherit)), true},
		{"update changing inherit", nsAt(u, ns("team-a", "", noInherit), ns("team-a", "", inherit("true"))), true},
		{"update removing inherit", nsAt(u, ns("team-a", "", noInherit), ns("team-a", "")), true},
		// Opting back in under a parent joins it: refused while it is
		// being deleted (issue 39), so it must be sent.
		{"update opting back in under a parent", nsAt(u, ns("team-a", "org", noInherit), ns("team-a", "org")), true},
		{"update keeping inherit", nsAt(u, ns("team-a", "", noInherit), ns("team-a", "", noInherit, other)), false},
		{"update changing the parent uid", nsAt(u, ns("team-a", "org", parentUID("a")), ns("team-a", "org", parentUID("b"))), true},
		{"update adding a parent uid", nsAt(u, ns("team-a", "org"), ns("team-a", "org", parentUID("b"))), true},
		{"update removing a parent uid", nsAt(u, ns("team-a", "org", parentUID("a")), ns("team-a", "org")), true},
	})
}

func TestCandidateTouchedCondition(t *testing.T) {
	t.Parallel()
	c, u, d := k8sadmission.Create, k8sadmission.Update, k8sadmission.Delete
	const canary = v1alpha1.LabelStage + "=canary"
	rb := func(opts ...objOpt) *rbacv1.RoleBinding { return roleBinding(global, "x.next", opts...) }
	at := func(op k8sadmission.Operation, old, obj *rbacv1.RoleBinding) admissionAttrs {
		a := admissionAttrs{op: op, gvr: rbGVR, namespace: global, name: "x.next"}
		if old != nil {
			a.old = old
		}
		if obj != nil {
			a.obj = obj
		}
		return a
	}
	other := annotated("other", "y")
	runMatches(t, webhookOf(t, webhookconfig.WebhookCandidates), []matchCase{
		{"create a candidate", at(c, nil, rb(candidateFor("x", canary))), true},
		{"create with only a selector", at(c, nil, rb(annotated(v1alpha1.AnnotationCanarySelector, canary))), true},
		{"create with only candidate-for", at(c, nil, rb(annotated(v1alpha1.AnnotationCandidateFor, "x"))), true},
		{"create an ordinary source", at(c, nil, rb(other)), false},
		{"create without annotations", at(c, nil, rb()), false},
		{"update a candidate", at(u, rb(candidateFor("x", canary)), rb(candidateFor("x", "implicit.dev/stage in (canary,early)"))), true},
		{"update making a candidate", at(u, rb(), rb(candidateFor("x", canary))), true},
		{"update no longer a candidate", at(u, rb(candidateFor("x", canary)), rb(other)), true},
		{"update an ordinary source", at(u, rb(other), rb(other)), false},
		{"delete a candidate", at(d, rb(candidateFor("x", canary)), nil), true},
		{"delete an ordinary source", at(d, rb(), nil), false},
		{"status of a candidate", admissionAttrs{op: u, gvr: rbGVR, namespace: global, name: "x.next", sub: "status", old: rb(candidateFor("x", canary)), obj: rb(candidateFor("x", canary))}, true},
	})
}

func TestStageChangedCondition(t *testing.T) {
	t.Parallel()
	c, u := k8sadmission.Create, k8sadmission.Update
	staged := func(v string) nsOpt { return func(n *corev1.Namespace) { n.Labels[v1alpha1.LabelStage] = v } }
	other := func(n *corev1.Namespace) { n.Labels["team"] = "a" }
	runMatches(t, webhookOf(t, webhookconfig.WebhookStages), []matchCase{
		{"create with a stage", nsAt(c, nil, ns("team-a", "", staged("canary"))), true},
		{"create without a stage", nsAt(c, nil, ns("team-a", "org")), false},
		{"create without labels", nsAt(c, nil, bare("team-a")), false},
		{"update setting a stage", nsAt(u, ns("team-a", ""), ns("team-a", "", staged("canary"))), true},
		{"update setting a stage on a namespace without labels", nsAt(u, bare("team-a"), ns("team-a", "", staged("canary"))), true},
		{"update changing the stage", nsAt(u, ns("team-a", "", staged("prod")), ns("team-a", "", staged("canary"))), true},
		{"update removing the stage", nsAt(u, ns("team-a", "", staged("prod")), ns("team-a", "")), true},
		{"update removing every label", nsAt(u, ns("team-a", "", staged("prod")), bare("team-a")), true},
		{"update keeping the stage", nsAt(u, ns("team-a", "", staged("prod")), ns("team-a", "", staged("prod"), other)), false},
		{"update without a stage", nsAt(u, ns("team-a", "org"), ns("team-a", "org2")), false},
	})
}

func TestParentTouchedCondition(t *testing.T) {
	t.Parallel()
	c, u := k8sadmission.Create, k8sadmission.Update
	cfg := webhookconfig.MutatingConfiguration("implicit-apiserver", clientConfig)
	if len(cfg.Webhooks) != 2 || cfg.Webhooks[0].Name != webhookconfig.WebhookParentUID {
		t.Fatalf("webhooks %+v, want parent-uid first of 2", cfg.Webhooks)
	}
	runMatches(t, asValidating(cfg.Webhooks[0]), []matchCase{
		{"create with a parent", nsAt(c, nil, ns("team-a", "org")), true},
		{"create without labels", nsAt(c, nil, bare("team-a")), false},
		{"create with a parent uid only", nsAt(c, nil, ns("team-a", "", parentUID("x"))), true},
		{"create not inheriting", nsAt(c, nil, ns("team-a", "", noInherit)), false},
		{"update setting a parent", nsAt(u, bare("team-a"), ns("team-a", "org")), true},
		{"update changing the parent", nsAt(u, ns("team-a", "org", recorded), ns("team-a", "org2", recorded)), true},
		{"update removing the parent", nsAt(u, ns("team-a", "org", recorded), ns("team-a", "", recorded)), true},
		{"update keeping the parent and its uid", nsAt(u, ns("team-a", "org", recorded), ns("team-a", "org", recorded, noInherit)), false},
		{"update keeping a parent without a uid", nsAt(u, ns("team-a", "org"), ns("team-a", "org")), false},
		{"update changing the uid", nsAt(u, ns("team-a", "org", recorded), ns("team-a", "org", parentUID("x"))), true},
		{"update removing the uid", nsAt(u, ns("team-a", "org", recorded), ns("team-a", "org")), true},
	})
}

// asValidating is a mutating webhook as the matcher takes it: the fields
// matching reads are the same.
func asValidating(w admissionregistrationv1.MutatingWebhook) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{Name: w.Name, FailurePolicy: w.FailurePolicy, MatchConditions: w.MatchConditions}
}

func TestMutatingConfiguration(t *testing.T) {
	t.Parallel()
	cfg := webhookconfig.MutatingConfiguration("implicit-apiserver", clientConfig)
	if cfg.Name != "implicit-apiserver" || len(cfg.Webhooks) != 2 {
		t.Fatalf("configuration %q with %d webhooks, want implicit-apiserver with 2", cfg.Name, len(cfg.Webhooks))
	}
	wantRules := map[string][]admissionregistrationv1.RuleWithOperations{
		webhookconfig.WebhookParentUID: {{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces", "namespaces/status", "namespaces/finalize"},
				Scope: ptr.To(admissionregistrationv1.ClusterScope),
			},
		}},
		// Any kind may be materialized; the match condition sends copies only.
		webhookconfig.WebhookOwnCopy: {{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"},
				Scope: ptr.To(admissionregistrationv1.NamespacedScope),
			},
		}},
	}
	paths := map[string]string{webhookconfig.WebhookParentUID: webhookconfig.PathParentUID, webhookconfig.WebhookOwnCopy: webhookconfig.PathOwnCopy}
	in := webhookconfig.InClusterMutatingConfiguration()
	for i, w := range cfg.Webhooks {
		path, ok := paths[w.Name]
		if !ok {
			t.Errorf("webhook %q, want one of %v", w.Name, paths)
			continue
		}
		if !reflect.DeepEqual(w.ClientConfig, clientConfig(path)) {
			t.Errorf("%s: client config %+v, want the one of %s", w.Name, w.ClientConfig, path)
		}
		if ptr.Deref(w.FailurePolicy, "") != admissionregistrationv1.Fail {
			t.Errorf("%s: failure policy %v, want Fail", w.Name, ptr.Deref(w.FailurePolicy, ""))
		}
		if ptr.Deref(w.SideEffects, "") != admissionregistrationv1.SideEffectClassNone {
			t.Errorf("%s: side effects %v, want None", w.Name, ptr.Deref(w.SideEffects, ""))
		}
		if ptr.Deref(w.ReinvocationPolicy, "") != admissionregistrationv1.IfNeededReinvocationPolicy {
			t.Errorf("%s: reinvocation %v, want IfNeeded", w.Name, ptr.Deref(w.ReinvocationPolicy, ""))
		}
		if !reflect.DeepEqual(w.Rules, wantRules[w.Name]) {
			t.Errorf("%s: rules %+v, want %+v", w.Name, w.Rules, wantRules[w.Name])
		}
		newMatcher(t, asValidating(w))
		if in.Kind != "MutatingWebhookConfiguration" || in.Webhooks[i].ClientConfig.Service == nil || ptr.Deref(in.Webhooks[i].ClientConfig.Service.Path, "") != path {
			t.Errorf("in-cluster configuration %+v, want the Service's %s", in, path)
		}
	}
}

func TestShadowCondition(t *testing.T) {
	t.Parallel()
	for _, g := range []webhookconfig.MatchInputs{
		{},
		{LockedNames: map[string][]string{}},
		{LockedNames: map[string][]string{"rolebindings": nil, "roles": {}}, Inherited: []string{global}},
	} {
		if got := webhookconfig.ShadowCondition(g, global); got != "false" {
			t.Errorf("ShadowCondition(%+v) = %q, want false", g, got)
		}
	}

	g := webhookconfig.MatchInputs{LockedNames: map[string][]string{"roles": {"r"}, "rolebindings": {"a", "b"}}}
	want := `request.namespace != "implicit-global" && ((request.resource.resource == "rolebindings" && object.metadata.name in ["a", "b"]) || (request.resource.resource == "roles" && object.metadata.name in ["r"]))`
	if got := webhookconfig.ShadowCondition(g, global); got != want {
		t.Errorf("ShadowCondition = %s\nwant %s", got, want)
	}

	// Names are not DNS names here: the quoting must hold for any string.
	const inject = `x' || true || '`
	g = webhookconfig.MatchInputs{LockedNames: map[string][]string{
		"rolebindings":    {"admins", "o'brien", `back\slash`, `trail\`, inject},
		"roles":           {"reader"},
		"networkpolicies": nil,
	}}
	const weirdGlobal = `glo'bal\`
	rbCreate := func(namespace, name string) admissionAttrs {
		return admissionAttrs{op: k8sadmission.Create, gvr: rbGVR, namespace: namespace, name: name, obj: roleBinding(namespace, name)}
	}
	roleGVR := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}
	roleCreate := func(namespace, name string) admissionAttrs {
		return admissionAttrs{op: k8sadmission.Create, gvr: roleGVR, namespace: namespace, name: name, obj: role(namespace, name)}
	}
	npGVR := schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
	w := withCondition(webhookOf(t, webhookconfig.WebhookShadows), webhookconfig.ShadowCondition(g, weirdGlobal))
	runMatches(t, w, []matchCase{
		{"locked name of the resource", rbCreate("team-a", "admins"), true},
		{"locked name in the global namespace", rbCreate(weirdGlobal, "admins"), false},
		{"locked name in a namespace named like the unescaped global", rbCreate(`glo'bal`, "admins"), true},
		{"unlocked name", rbCreate("team-a", "other"), false},
		{"locked name of another resource", roleCreate("team-a", "admins"), false},
		{"locked role", roleCreate("team-a", "reader"), true},
		{"resource without locks", admissionAttrs{op: k8sadmission.Create, gvr: npGVR, namespace: "team-a", name: "admins", obj: networkPolicy("team-a", "admins")}, false},
		{"name with a quote", rbCreate("team-a", "o'brien"), true},
		{"name with a backslash", rbCreate("team-a", `back\slash`), true},
		{"name with a trailing backslash", rbCreate("team-a", `trail\`), true},
		{"name with the backslash doubled", rbCreate("team-a", `back\\slash`), false},
		{"name without the backslash", rbCreate("team-a", `backslash`), false},
		{"a name that would inject code is only a name", rbCreate("team-a", inject), true},
		{"no injected code matches other names", rbCreate("team-a", "x"), false},
	})
}

func TestFanoutCondition(t *testing.T) {
	t.Parallel()
	if got := webhookconfig.FanoutCondition(webhookconfig.MatchInputs{LockedNames: map[string][]string{"rolebindings": {"a"}}}); got != "false" {
		t.Errorf("FanoutCondition without inherited namespaces = %q, want false", got)
	}
	g := webhookconfig.MatchInputs{Inherited: []string{global, "org", `o'dd\`}}
	cond := webhookconfig.FanoutCondition(g)
	if want := `request.namespace in ["implicit-global", "org", "o'dd\\"]`; cond != want {
		t.Errorf("FanoutCondition = %s, want %s", cond, want)
	}
	u, d := k8sadmission.Update, k8sadmission.Delete
	at := func(op k8sadmission.Operation, namespace string) admissionAttrs {
		a := admissionAttrs{op: op, gvr: rbGVR, namespace: namespace, name: "admins", old: roleBinding(namespace, "admins")}
		if op == u {
			a.obj = roleBinding(namespace, "admins", annotated("new", "yes"))
		}
		return a
	}
	runMatches(t, withCondition(webhookOf(t, webhookconfig.WebhookFanout), cond), []matchCase{
		{"update in the global namespace", at(u, global), true},
		{"delete in the global namespace", at(d, global), true},
		{"update in a parent", at(u, "org"), true},
		{"delete in an odd parent", at(d, `o'dd\`), true},
		{"update in a leaf", at(u, "team-a"), false},
		{"delete in a leaf", at(d, "team-a"), false},
	})
	runMatches(t, webhookOf(t, webhookconfig.WebhookFanout), []matchCase{
		{"the initial condition matches nothing", at(u, global), false},
	})
}

func TestMaterializedTouchedCondition(t *testing.T) {
	t.Parallel()
	c, u, d := k8sadmission.Create, k8sadmission.Update, k8sadmission.Delete
	gvr := schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
	np := func(opts ...objOpt) *networkingv1.NetworkPolicy { return networkPolicy("team-a", "deny", opts...) }
	mat := labelled(v1alpha1.LabelMaterialized, "true")
	other := labelled("team", "a")
	at := func(op k8sadmission.Operation, old, obj *networkingv1.NetworkPolicy) admissionAttrs {
		a := admissionAttrs{op: op, gvr: gvr, namespace: "team-a", name: "deny"}
		if old != nil {
			a.old = old
		}
		if obj != nil {
			a.obj = obj
		}
		return a
	}
	runMatches(t, webhookOf(t, webhookconfig.WebhookMaterialized), []matchCase{
		{"create with the label", at(c, nil, np(mat)), true},
		{"create with the label false (forged all the same)", at(c, nil, np(labelled(v1alpha1.LabelMaterialized, "false"))), true},
		{"create without labels", at(c, nil, np()), false},
		{"create with other labels", at(c, nil, np(other)), false},
		{"update of a copy", at(u, np(mat), np(mat)), true},
		{"update adding the label", at(u, np(other), np(mat)), true},
		{"update removing the label", at(u, np(mat), np(other)), true},
		{"update of an object of its own", at(u, np(other), np(other)), false},
		{"delete of a copy", at(d, np(mat), nil), true},
		{"delete of an object of its own", at(d, np(), nil), false},
		{"status of a copy", admissionAttrs{op: u, gvr: gvr, namespace: "team-a", name: "deny", sub: "status", old: np(mat), obj: np(mat)}, true},
	})
}

func TestCopyWrittenCondition(t *testing.T) {
	t.Parallel()
	u, d := k8sadmission.Update, k8sadmission.Delete
	gvr := schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
	np := func(opts ...objOpt) *networkingv1.NetworkPolicy { return networkPolicy("team-a", "deny", opts...) }
	mat := labelled(v1alpha1.LabelMaterialized, "true")
	at := func(op k8sadmission.Operation, old, obj *networkingv1.NetworkPolicy) admissionAttrs {
		a := admissionAttrs{op: op, gvr: gvr, namespace: "team-a", name: "deny"}
		if old != nil {
			a.old = old
		}
		if obj != nil {
			a.obj = obj
		}
		return a
	}
	var w admissionregistrationv1.MutatingWebhook
	for _, m := range webhookconfig.MutatingConfiguration("implicit-apiserver", clientConfig).Webhooks {
		if m.Name == webhookconfig.WebhookOwnCopy {
			w = m
		}
	}
	runMatches(t, asValidating(w), []matchCase{
		{"update of a copy", at(u, np(mat), np(mat)), true},
		{"update of a copy removing the label", at(u, np(mat), np()), true},
		{"update adding the label", at(u, np(), np(mat)), false},
		{"update of an object labelled false", at(u, np(labelled(v1alpha1.LabelMaterialized, "false")), np(mat)), false},
		{"update of an object of its own", at(u, np(labelled("team", "a")), np()), false},
		{"delete of a copy", at(d, np(mat), nil), false},
	})
}
