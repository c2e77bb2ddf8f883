package invariants

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// The harness plays kube-apiserver: it authorizes a request with the
// actors' RBAC, calls the mutating webhooks, then every validating webhook
// whose rules and match conditions (CEL, as kube-apiserver evaluates them)
// match, in an order the op fixes, and stores the object only if none
// refused. Mirrors follow the world: truth, fed at once (the views the
// invariants are judged on, and the authorization webhook's), and one per
// replica, each fed a few ops late by a lag of its own (what that replica's
// guards decide from). The chart runs two replicas behind one Service:
// kube-apiserver sends each webhook call of a request to either, at random,
// and ConditionSync's match conditions are the last writer's. The replicas
// share nothing but kube-apiserver, where their guards take turns on one
// record (ledger, the model of the Lease admission.LeaseLedger writes).

// shared is built once per test: the overlayers (a schema each) and the
// webhook configurations.
type shared struct {
	overlayers map[string]merge.Options
	validating []admissionregistrationv1.ValidatingWebhook
	mutating   []admissionregistrationv1.MutatingWebhook
	compiler   plugincel.ConditionCompiler
	matchers   map[string]matchconditions.Matcher
	crInformer cache.SharedIndexInformer
	// crbInformer holds no ClusterRoleBindings: the actors' grants are
	// RoleBindings (the webhook reads them for bind delegation only).
	crbInformer cache.SharedIndexInformer
}

func newShared(tb testing.TB) *shared {
	s := &shared{
		overlayers: map[string]merge.Options{
			rolebindings: {Overlayer: testfixture.BuiltinOverlayer(tb, "rbac.authorization.k8s.io/v1", "RoleBinding")},
			roles:        {Overlayer: testfixture.BuiltinOverlayer(tb, "rbac.authorization.k8s.io/v1", "Role")},
			netpols:      {Overlayer: testfixture.BuiltinOverlayer(tb, "networking.k8s.io/v1", "NetworkPolicy")},
		},
		compiler: plugincel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())),
		matchers: map[string]matchconditions.Matcher{},
	}
	client := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(path)}
	}
	s.validating = webhookconfig.Configuration("implicit-apiserver", served, client).Webhooks
	s.mutating = webhookconfig.MutatingConfiguration("implicit-apiserver", client).Webhooks
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	s.crInformer = factory.Rbac().V1().ClusterRoles().Informer()
	s.crbInformer = factory.Rbac().V1().ClusterRoleBindings().Informer()
	for _, cr := range clusterRoles {
		if err := s.crInformer.GetIndexer().Add(cr); err != nil {
			tb.Fatalf("adding ClusterRole %s: %v", cr.Name, err)
		}
	}
	return s
}

// pending is a write the lagging mirror has not seen yet.
type pending struct {
	due    int
	stream string
	apply  func(m *watchmux.Mux)
}

// replicas is how many implicit-apiserver replicas the model runs: the
// chart's default.
const replicas = 2

// replica is one implicit-apiserver: its mirror, fed with its own lag, and
// its guards over it.
type replica struct {
	mirror  *watchmux.Mux
	guards  *admission.Guards
	queue   []pending
	lastDue map[string]int
}

type harness struct {
	*shared
	w        *world
	actors   map[string]*actor
	oracle   *rbacOracle
	truth    *watchmux.Mux
	replicas [replicas]*replica
	ledger   *ledger
	// syncer is the replica whose match conditions kube-apiserver holds
	// for the current request.
	syncer int
	step   int
	clock  *testingclock.FakePassiveClock
	authz  *authz.Authorizer
	// lastRemembered is when a guard that remembers what it admits (the
	// parents, locks and candidates guards) last admitted a request: that
	// memory lives assumeFor (30s) at most.
	lastRemembered time.Time
	// transcript of the current op: verdicts and outcome.
	transcript []string
	// violations found so far.
	violations []violation
	// badBefore and badNow are the subjects of bad states after the last
	// op and this one (violateState).
	badBefore, badNow map[string]bool
	// exceptionWriters: who wrote each version of each entry of the
	// namespaces' exception annotations (exceptions_test.go).
	exceptionWriters map[exceptionWrite]string
	// approvalsSeen counts, over the checks, the approvals in effect.
	approvalsSeen int
	// current is the op being played; memoryBroken is set when the guards
	// admitted it only thanks to their memory.
	current      op
	memoryBroken bool
	// finishing is the held deletion the current op finishes.
	finishing *deletion
	// sampleGrants checks a sample of the grants after each op (the
	// exploration); replays check them all.
	sampleGrants bool
}

// assumeFor is the parents guard's assumptions' lifetime (hierarchy.go).
const assumeFor = 30 * time.Second

func newMux(s *shared) *watchmux.Mux {
	objects := views.NewObjects(map[string]func() runtime.Object{
		rolebindings: func() runtime.Object { return &rbacv1.RoleBinding{} },
		roles:        func() runtime.Object { return &rbacv1.Role{} },
		netpols:      func() runtime.Object { return &networkingv1.NetworkPolicy{} },
	}, 0)
	m := watchmux.New(testfixture.Policy(), resources, objects, watchmux.Options{})
	for _, r := range resources {
		m.SetMergeOptions(r, s.overlayers[r])
	}
	return m
}

func newHarness(s *shared) (*harness, error) {
	h := &harness{shared: s, w: newWorld(), actors: newActors(), ledger: &ledger{}, exceptionWriters: map[exceptionWrite]string{},
		clock: testingclock.NewFakePassiveClock(epoch)}
	h.oracle = &rbacOracle{actors: h.actors, w: h.w}
	h.truth = newMux(s)
	for i := range h.replicas {
		rep := &replica{mirror: newMux(s), lastDue: map[string]int{}}
		cfg := h.guardsConfig(rep.mirror)
		cfg.Ledger = h.ledger
		rep.guards = admission.NewGuards(cfg)
		h.replicas[i] = rep
	}
	a, err := authz.New(h.truth, s.crInformer, s.crbInformer, 0)
	if err != nil {
		return nil, err
	}
	h.authz = a
	h.setup()
	h.truth.MarkSynced()
	for _, rep := range h.replicas {
		rep.mirror.MarkSynced()
	}
	return h, nil
}

// newGuards returns guards as the server wires them, over mirror, with no
// memory and no shared record.
func (h *harness) newGuards(mirror *watchmux.Mux) *admission.Guards {
	return admission.NewGuards(h.guardsConfig(mirror))
}

// guardsConfig is the guards' configuration as the server wires it, over
// mirror, with no shared record.
func (h *harness) guardsConfig(mirror *watchmux.Mux) admission.Config {
	return admission.Config{
		Mirror: admission.MirrorOf(whatif.New(mirror)), Authorizer: h.oracle, Served: served, GlobalNamespaces: []string{global},
		Namespaces: h.w, ServerIdentity: server, Materialized: []string{netpols}, Clock: h.clock,
		// A mirror never catches up within one decision here: no waiting.
		MirrorWait: -1,
	}
}

// setup writes the cluster every sequence starts from, as the org would:
//
//	implicit-global  RoleBinding g-lock (locked), x; Roles quota-admin, r;
//	                 NetworkPolicies deny (locked), allow
//	p                RoleBinding rb (locked), Role r (harmless)
//	├── a            (alice)
//	│   └── b        (alice)
//	├── c            (alice, carol)
//	└── d            (bob)
//	e                (alice), a root
func (h *harness) setup() {
	for _, ns := range []struct{ name, parent string }{{global, ""}, {"p", ""}, {"a", "p"}, {"b", "a"}, {"c", "p"}, {"d", "p"}, {"e", ""}} {
		n := newNamespace(ns.name)
		if ns.parent != "" {
			n.Labels[v1alpha1.LabelParent] = ns.parent
			n.Annotations = map[string]string{v1alpha1.AnnotationParentUID: string(h.w.namespaces[ns.parent].UID)}
		}
		h.store("org", nil, n)
	}
	src := func(resource, namespace, name string, v int, locked bool) {
		o := newSource(resource, namespace, name, v)
		if locked {
			metaOf(o).SetAnnotations(map[string]string{v1alpha1.AnnotationLocked: "true"})
		}
		h.store("org", nil, o)
	}
	src(rolebindings, global, "g-lock", 0, true)
	src(rolebindings, global, "x", 2+1*len(roleRefs), false)
	src(roles, global, "quota-admin", 1, false)
	src(roles, global, "r", 3, false)
	src(netpols, global, "deny", 0, true)
	src(netpols, global, "allow", 1, false)
	src(rolebindings, "p", "rb", 0+1*len(roleRefs), true)
	src(roles, "p", "r", 0, false)
}

// store writes obj (nil: deletes old) to the world as writer, and feeds
// the mirrors: the truth at once, each replica's lag ops later.
func (h *harness) storeLag(writer string, old, obj runtime.Object, lag lags) {
	now := h.clock.Now()
	switch o := obj.(type) {
	case *corev1.Namespace:
		oldNS, _ := old.(*corev1.Namespace)
		h.recordExceptionWriters(writer, oldNS, o)
		if old == nil {
			if o.UID == "" {
				o.UID = h.w.nextUID("ns-" + o.Name)
			}
			o.CreationTimestamp = metav1.NewTime(now)
			h.w.creator[o.Name] = writer
		}
		o.ResourceVersion = h.w.nextRV()
		h.w.namespaces[o.Name] = o
		h.feed("namespaces", lag, func(m *watchmux.Mux) { m.OnNamespace(o.DeepCopy(), false) })
		return
	case nil:
		if ns, ok := old.(*corev1.Namespace); ok {
			delete(h.w.namespaces, ns.Name)
			delete(h.w.creator, ns.Name)
			h.feed("namespaces", lag, func(m *watchmux.Mux) { m.OnNamespace(ns.DeepCopy(), true) })
			return
		}
	}
	var k key
	var resource string
	if obj != nil {
		m := metaOf(obj)
		resource = resourceOf(obj)
		k = key{resource, m.GetNamespace(), m.GetName()}
		if old == nil {
			if m.GetUID() == "" {
				m.SetUID(h.w.nextUID("uid-" + m.GetNamespace() + "-" + m.GetName()))
			}
			m.SetCreationTimestamp(metav1.NewTime(now))
		}
		m.SetResourceVersion(h.w.nextRV())
		st := &stored{obj: obj, writer: writer}
		if c := m.GetAnnotations()[v1alpha1.AnnotationCandidateFor]; c != "" {
			if s, ok := h.w.objs[key{resource, k.namespace, c}]; ok {
				st.stableLocked = merge.IsLocked(metaOf(s.obj).GetAnnotations())
			}
		}
		h.w.objs[k] = st
	} else {
		m := metaOf(old)
		resource = resourceOf(old)
		k = key{resource, m.GetNamespace(), m.GetName()}
		delete(h.w.objs, k)
	}
	// Copies are never sources: the informer's filter (watchmux.AddSource)
	// makes one that gains the label a deletion, one that loses it an
	// addition.
	oldSrc := old != nil && !isCopy(old)
	newSrc := obj != nil && !isCopy(obj)
	switch {
	case newSrc:
		c := obj.DeepCopyObject()
		h.feed(resource, lag, func(m *watchmux.Mux) { m.OnSource(resource, c.DeepCopyObject(), false) })
	case oldSrc:
		c := old.DeepCopyObject()
		h.feed(resource, lag, func(m *watchmux.Mux) { m.OnSource(resource, c.DeepCopyObject(), true) })
	}
}

func (h *harness) store(writer string, old, obj runtime.Object) { h.storeLag(writer, old, obj, lags{}) }

func resourceOf(o runtime.Object) string {
	switch o.(type) {
	case *rbacv1.RoleBinding:
		return rolebindings
	case *rbacv1.Role:
		return roles
	case *networkingv1.NetworkPolicy:
		return netpols
	}
	panic(fmt.Sprintf("no resource for %T", o))
}

// feed applies f to the truth now and queues it for each replica's mirror,
// in order within its stream (one informer's events never overtake).
func (h *harness) feed(stream string, lag lags, f func(m *watchmux.Mux)) {
	f(h.truth)
	for i, rep := range h.replicas {
		due := max(h.step+lag[i], rep.lastDue[stream])
		rep.lastDue[stream] = due
		rep.queue = append(rep.queue, pending{due: due, stream: stream, apply: f})
	}
	h.deliver()
}

// deliver feeds each replica's mirror what is due.
func (h *harness) deliver() {
	for _, rep := range h.replicas {
		rest := rep.queue[:0]
		for _, p := range rep.queue {
			if p.due <= h.step {
				p.apply(rep.mirror)
			} else {
				rest = append(rest, p)
			}
		}
		rep.queue = rest
	}
}

// caughtUp reports whether every replica's mirror shows every write.
func (h *harness) caughtUp() bool {
	for _, rep := range h.replicas {
		if len(rep.queue) > 0 {
			return false
		}
	}
	return true
}

func (h *harness) logf(format string, args ...any) {
	h.transcript = append(h.transcript, fmt.Sprintf(format, args...))
}

// request is one request of an op as kube-apiserver admits it.
type request struct {
	actor     *actor
	op        admissionv1.Operation
	gvr       schema.GroupVersionResource
	namespace string
	name      string
	old, obj  runtime.Object
	dryRun    bool
}

func gvrOf(resource string) schema.GroupVersionResource {
	if resource == "namespaces" {
		return schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	}
	return grOf[resource].WithVersion("v1")
}

// webhook is a webhook of either configuration, as the dispatcher sees it.
type webhook struct {
	name       string
	path       string
	rules      []admissionregistrationv1.RuleWithOperations
	conditions []admissionregistrationv1.MatchCondition
	fail       bool
}

// conditions are a webhook's match conditions with the synced ones as
// ConditionSync writes them from the guards' mirror.
func (h *harness) conditions(name string, cs []admissionregistrationv1.MatchCondition) []admissionregistrationv1.MatchCondition {
	g, ok := whatif.New(h.replicas[h.syncer].mirror).Guarded()
	g.Materialized = []string{netpols}
	out := make([]admissionregistrationv1.MatchCondition, len(cs))
	copy(out, cs)
	synced := webhookconfig.SyncedConditions(g, global)
	for i := range out {
		if out[i].Name != "implicit-sources" || !ok {
			continue
		}
		if expr, found := synced[name]; found {
			out[i].Expression = expr
		}
	}
	return out
}

func (h *harness) validatingWebhooks() []webhook {
	out := make([]webhook, 0, len(h.validating))
	for _, w := range h.validating {
		out = append(out, webhook{name: w.Name, path: *w.ClientConfig.URL, rules: w.Rules,
			conditions: h.conditions(w.Name, w.MatchConditions), fail: w.FailurePolicy == nil || *w.FailurePolicy == admissionregistrationv1.Fail})
	}
	return out
}

func (h *harness) mutatingWebhooks() []webhook {
	out := make([]webhook, 0, len(h.mutating))
	for _, w := range h.mutating {
		out = append(out, webhook{name: w.Name, path: *w.ClientConfig.URL, rules: w.Rules,
			conditions: w.MatchConditions, fail: w.FailurePolicy == nil || *w.FailurePolicy == admissionregistrationv1.Fail})
	}
	return out
}

// matches reports whether the webhook's rules and match conditions select r.
func (h *harness) matches(w webhook, r request) (bool, error) {
	ruleOK := false
	for _, rule := range w.rules {
		if ruleMatches(rule, r) {
			ruleOK = true
			break
		}
	}
	if !ruleOK {
		return false, nil
	}
	for _, c := range w.conditions {
		m, err := h.matcher(c)
		if err != nil {
			return false, err
		}
		var obj, old runtime.Object
		if r.obj != nil {
			obj = r.obj.DeepCopyObject()
		}
		if r.old != nil {
			old = r.old.DeepCopyObject()
		}
		gvk := schema.GroupVersionKind{}
		for _, o := range []runtime.Object{obj, old} {
			if o != nil {
				gvk = o.GetObjectKind().GroupVersionKind()
				break
			}
		}
		attrs := k8sadmission.NewAttributesRecord(obj, old, gvk, r.namespace, r.name, r.gvr, "", k8sadmission.Operation(r.op), nil, r.dryRun,
			&user.DefaultInfo{Name: r.actor.name, Groups: r.actor.user().Groups})
		va, err := k8sadmission.NewVersionedAttributes(attrs, gvk, nil)
		if err != nil {
			return false, err
		}
		res := m.Match(context.Background(), va, nil, nil)
		if res.Error != nil {
			return false, fmt.Errorf("%s: %w", w.name, res.Error)
		}
		if !res.Matches {
			return false, nil
		}
	}
	return true, nil
}

func (h *harness) matcher(c admissionregistrationv1.MatchCondition) (matchconditions.Matcher, error) {
	if m, ok := h.matchers[c.Expression]; ok {
		return m, nil
	}
	eval := h.compiler.CompileCondition([]plugincel.ExpressionAccessor{&matchconditions.MatchCondition{Name: c.Name, Expression: c.Expression}},
		plugincel.OptionalVariableDeclarations{HasAuthorizer: true}, environment.StoredExpressions)
	if errs := eval.CompilationErrors(); len(errs) > 0 {
		return nil, fmt.Errorf("match condition %s does not compile: %v", c.Name, errs)
	}
	m := matchconditions.NewMatcher(eval, ptr.To(admissionregistrationv1.Fail), "webhook", "validate", c.Name)
	h.matchers[c.Expression] = m
	return m, nil
}

func ruleMatches(rule admissionregistrationv1.RuleWithOperations, r request) bool {
	has := func(xs []string, x string) bool {
		for _, s := range xs {
			if s == "*" || s == x {
				return true
			}
		}
		return false
	}
	ops := make([]string, len(rule.Operations))
	for i, o := range rule.Operations {
		ops[i] = string(o)
	}
	if !has(ops, string(r.op)) || !has(rule.APIGroups, r.gvr.Group) || !has(rule.APIVersions, r.gvr.Version) {
		return false
	}
	resOK := false
	for _, res := range rule.Resources {
		if res == "*" || res == r.gvr.Resource || res == "*/*" {
			resOK = true
		}
	}
	if !resOK {
		return false
	}
	if rule.Scope != nil && *rule.Scope != admissionregistrationv1.AllScopes {
		clusterScoped := r.gvr.Resource == "namespaces"
		if clusterScoped != (*rule.Scope == admissionregistrationv1.ClusterScope) {
			return false
		}
	}
	return true
}

// admissionRequest is r as the webhooks are sent it.
func admissionRequest(r request, uid string) *admissionv1.AdmissionRequest {
	gvr := metav1.GroupVersionResource{Group: r.gvr.Group, Version: r.gvr.Version, Resource: r.gvr.Resource}
	gvk := metav1.GroupVersionKind{}
	for _, o := range []runtime.Object{r.obj, r.old} {
		if o != nil {
			k := o.GetObjectKind().GroupVersionKind()
			gvk = metav1.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
			break
		}
	}
	return &admissionv1.AdmissionRequest{
		UID: types.UID(uid), Kind: gvk, Resource: gvr, RequestResource: &gvr, Name: r.name, Namespace: r.namespace,
		Operation: r.op, UserInfo: r.actor.user(), Object: raw(r.obj), OldObject: raw(r.old), DryRun: ptr.To(r.dryRun),
	}
}

func raw(o runtime.Object) runtime.RawExtension {
	if o == nil {
		return runtime.RawExtension{}
	}
	b, err := json.Marshal(o)
	if err != nil {
		panic(err)
	}
	return runtime.RawExtension{Raw: b}
}

// call posts req to the guard at path of g as kube-apiserver does.
func call(g *admission.Guards, path string, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req,
	})
	if err != nil {
		return nil, err
	}
	hr := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	hr.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	g.Handler(path).ServeHTTP(rec, hr)
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		return nil, fmt.Errorf("undecodable answer %q: %v", rec.Body.String(), err)
	}
	return out.Response, nil
}

// verdict is one webhook's answer.
type verdict struct {
	webhook string
	allowed bool
	message string
}

func (v verdict) String() string {
	if v.allowed {
		return v.webhook + ": allowed"
	}
	msg := v.message
	if len(msg) > 160 {
		msg = msg[:160] + "..."
	}
	return v.webhook + ": REFUSED: " + msg
}

// ask calls the webhooks ws on req, in the order given, each of the
// replica at the same place in at (the guards of the replica that call was
// sent to); a webhook that fails (503, an undecodable answer) refuses when
// its failure policy is Fail.
func ask(at []*admission.Guards, ws []webhook, req *admissionv1.AdmissionRequest) []verdict {
	out := make([]verdict, 0, len(ws))
	for i, w := range ws {
		resp, err := call(at[i], w.path, req)
		switch {
		case err != nil:
			out = append(out, verdict{webhook: w.name, allowed: !w.fail, message: err.Error()})
		case !resp.Allowed:
			msg := ""
			if resp.Result != nil {
				msg = resp.Result.Message
			}
			out = append(out, verdict{webhook: w.name, message: msg})
		default:
			out = append(out, verdict{webhook: w.name, allowed: true})
		}
	}
	return out
}

func allAllowed(vs []verdict) bool {
	for _, v := range vs {
		if !v.allowed {
			return false
		}
	}
	return true
}

// admit runs r through the mutating then the validating webhooks, as
// kube-apiserver does, and checks the guards' memory on the way. It
// returns the object as mutated and whether every webhook allowed it.
func (h *harness) admit(r request, order *rand.Rand, attempt int) (runtime.Object, bool) {
	uid := fmt.Sprintf("req-%d-%d", h.step, attempt)
	// Which replica each call reaches depends on the op alone, so that a
	// shrunk sequence sends its requests where the long one did.
	sent := rand.New(rand.NewPCG(h.current.order, uint64(attempt)))
	sendTo := func() int {
		if h.current.to > 0 {
			return h.current.to - 1
		}
		return sent.IntN(replicas)
	}
	h.syncer = sendTo()
	for _, w := range h.mutatingWebhooks() {
		ok, err := h.matches(w, r)
		if err != nil {
			h.violate("harness", "", "%v", err)
			return nil, false
		}
		if !ok {
			continue
		}
		resp, err := call(h.replicas[sendTo()].guards, w.path, admissionRequest(r, uid))
		if err != nil {
			h.logf("  mutating %s: failed: %v", w.name, err)
			if w.fail {
				return nil, false
			}
			continue
		}
		if !resp.Allowed {
			h.logf("  mutating %s: REFUSED: %s", w.name, resp.Result.Message)
			return nil, false
		}
		if len(resp.Patch) > 0 {
			patched, err := applyPatch(r.obj, resp.Patch)
			if err != nil {
				h.violate("harness", "", "applying the patch of %s: %v", w.name, err)
				return nil, false
			}
			h.logf("  mutating %s: patched %s", w.name, resp.Patch)
			r.obj = patched
		}
	}
	var ws []webhook
	for _, w := range h.validatingWebhooks() {
		ok, err := h.matches(w, r)
		if err != nil {
			h.violate("harness", "", "%v", err)
			return nil, false
		}
		if ok {
			ws = append(ws, w)
		}
	}
	sentTo := make([]int, len(ws))
	for i := range ws {
		sentTo[i] = sendTo()
	}
	order.Shuffle(len(ws), func(i, j int) {
		ws[i], ws[j] = ws[j], ws[i]
		sentTo[i], sentTo[j] = sentTo[j], sentTo[i]
	})
	req := admissionRequest(r, uid)
	at := make([]*admission.Guards, len(ws))
	for i := range ws {
		at[i] = h.replicas[sentTo[i]].guards
	}
	var lost []verdict
	if h.current.twice {
		first := make([]*admission.Guards, len(ws))
		firstTo := make([]int, len(ws))
		for i := range ws {
			firstTo[i] = sendTo()
			first[i] = h.replicas[firstTo[i]].guards
		}
		lost = ask(first, ws, req)
		for i, v := range lost {
			h.logf("  %s (replica %d; this answer lost, asked again)", v, firstTo[i])
		}
	}
	got := ask(at, ws, req)
	for i, v := range got {
		h.logf("  %s (replica %d)", v, sentTo[i])
	}
	allowed := allAllowed(got)
	h.checkMemory(ws, sentTo, req, allowed)
	if allowed && h.current.vetoed {
		h.logf("  another webhook (an admission policy): REFUSED")
		allowed = false
	}
	for _, v := range append(lost, got...) {
		// The guards that remember what they admitted: the parents,
		// stages and namespace-deletions guards (assumptions), the locks,
		// candidates, shadows and materialized guards (locks,
		// candidates and objects of a locked name admitted a moment ago).
		remembers := false
		switch v.webhook {
		case webhookconfig.WebhookParents, webhookconfig.WebhookStages, webhookconfig.WebhookNamespaceDeletions, webhookconfig.WebhookLocks,
			webhookconfig.WebhookCandidates, webhookconfig.WebhookShadows, webhookconfig.WebhookMaterialized:
			remembers = true
		}
		if remembers && v.allowed && !r.dryRun {
			h.lastRemembered = h.clock.Now()
		}
	}
	return r.obj, allowed
}

// applyPatch applies a JSON patch of add, replace and remove operations on
// object members, the patches the mutating guard writes.
func applyPatch(obj runtime.Object, patch []byte) (runtime.Object, error) {
	var ops []struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return nil, err
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	unescape := strings.NewReplacer("~1", "/", "~0", "~")
	for _, o := range ops {
		parts := strings.Split(strings.TrimPrefix(o.Path, "/"), "/")
		cur := doc
		for _, p := range parts[:len(parts)-1] {
			next, ok := cur[unescape.Replace(p)].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("path %s: %s is not an object", o.Path, p)
			}
			cur = next
		}
		last := unescape.Replace(parts[len(parts)-1])
		switch o.Op {
		case "add", "replace":
			cur[last] = o.Value
		case "remove":
			if _, ok := cur[last]; !ok {
				return nil, fmt.Errorf("remove %s: no such member", o.Path)
			}
			delete(cur, last)
		default:
			return nil, fmt.Errorf("unsupported patch op %q", o.Op)
		}
	}
	b, err = json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(runtime.Object)
	if err := json.Unmarshal(b, out); err != nil {
		return nil, err
	}
	return out, nil
}

// ledger is kube-apiserver's Lease the replicas' guards take turns on: a
// record and its version, written only at the version read (a Conflict
// otherwise), kept as JSON as the Lease's annotation is.
type ledger struct {
	version int
	raw     []byte
}

// Read implements admission.Ledger.
func (l *ledger) Read(context.Context) (admission.Record, string, error) {
	var rec admission.Record
	if l.raw != nil {
		if err := json.Unmarshal(l.raw, &rec); err != nil {
			return rec, "", err
		}
	}
	return rec, strconv.Itoa(l.version), nil
}

// Write implements admission.Ledger.
func (l *ledger) Write(_ context.Context, version string, rec admission.Record) (string, error) {
	if version != strconv.Itoa(l.version) {
		return "", apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "implicit-apiserver-guards",
			fmt.Errorf("the object has been modified"))
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return "", err
	}
	l.raw = raw
	l.version++
	return strconv.Itoa(l.version), nil
}
