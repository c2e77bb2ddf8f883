package integration

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// seen is one watch event and when the test received it.
type seen struct {
	typ  watch.EventType
	obj  any
	at   time.Time
	name string
}

// recorded collects a watch's events with their arrival times until the
// watch ends.
type recorded struct {
	mu     sync.Mutex
	events []seen
}

func record(w watch.Interface, name func(any) string) *recorded {
	r := &recorded{}
	go func() {
		for ev := range w.ResultChan() {
			r.mu.Lock()
			r.events = append(r.events, seen{typ: ev.Type, obj: ev.Object, at: time.Now(), name: name(ev.Object)})
			r.mu.Unlock()
		}
	}()
	return r
}

// find returns the events matching f.
func (r *recorded) find(f func(seen) bool) []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []seen
	for _, e := range r.events {
		if f(e) {
			out = append(out, e)
		}
	}
	return out
}

func metaName(obj any) string {
	if o, ok := obj.(metav1.Object); ok {
		return o.GetName()
	}
	return ""
}

// TestExceptionLifecycle: a global RoleBinding grants a group; team-a
// requests an exception of it with the plugin, ending 20 s later; the item
// leaves team-a's view (a watch gets DELETED), kubectl auth can-i answers
// no, and kubectl implicit exceptions -A shows it Active. At its end the
// server writes the expired mark (never before the end), and then the view
// has the item again (one ADDED), can-i answers yes, and the plugin shows
// it Expired; a ValidatingAdmissionPolicy whose parameter is the item denies
// meanwhile and admits again; each side's time after the mark is logged, and all are
// within 2 s of the mark (kube-apiserver caches the webhook's answers for
// a second).
func TestExceptionLifecycle(t *testing.T) {
	kube, dyn := admin(t)
	ctx := t.Context()
	ensureNamespace(t, kube, globalNS)
	path := buildPlugin(t)
	adm := pluginUser{t: t, name: "admin", path: path, kubeconfig: cp.KubeconfigPath(), home: t.TempDir()}
	const (
		ns    = "ex-team-a"
		rb    = "ex-grant"
		group = "ex:readers"
		user  = "ex-reader"
		exc   = "ex-ci"
	)
	view := v1alpha1.SchemeGroupVersion.WithResource("rolebindings")
	canI := func() bool {
		return gdAdmin(t).canI("list", "configmaps", "-n", ns, "--as", user, "--as-group", group)
	}

	t.Log("a global RoleBinding grants", group, "view; team-a inherits it")
	createNamespace(t, kube, ns, map[string]string{"ex-suite": "lifecycle"}, nil)
	createRoleBinding(t, kube, globalNS, rb, "view", group)
	paramPolicy(t, kube, "ex-lifecycle", rb, "ex-suite=lifecycle")
	admitted := func(ctx context.Context) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "ex-probe-"}}
		_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	eventually(t, "the item in "+ns+"'s view", func(ctx context.Context) error {
		_, err := dyn.Resource(view).Namespace(ns).Get(ctx, rb, metav1.GetOptions{})
		return err
	})
	eventually(t, "the policy admitting a ConfigMap (its parameter "+rb+" inherited)", admitted)
	eventually(t, "can-i yes before the exception", func(context.Context) error {
		if !canI() {
			return errorf("can-i answers no")
		}
		return nil
	})

	list, err := dyn.Resource(view).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vw, err := dyn.Resource(view).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vw.Stop)
	viewEvents := record(vw, metaName)
	nsw, err := kube.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", ns).String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nsw.Stop)
	nsEvents := record(nsw, metaName)

	t.Log("team-a requests an exception of", rb, "ending in 20 s")
	adm.expect(0, nil, "exceptions", "request", exc, "-n", ns, "--exclude", "rolebindings/"+rb, "--reason", "TICKET-42", "--expires", "20s")
	n, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	specs, err := merge.ParseExceptions(n.Annotations[v1alpha1.AnnotationExceptions])
	if err != nil || len(specs) != 1 || specs[0].ExpiresAt == nil {
		t.Fatalf("%s's exceptions: %v %+v", ns, err, specs)
	}
	ends := specs[0].ExpiresAt.Time
	digest := merge.ExceptionDigest(specs[0])
	t.Logf("exception %s (digest %s) requested by %s, ends %s", exc, digest, specs[0].RequestedBy, ends.Format(time.RFC3339))

	eventually(t, "the watch's DELETED of "+rb, func(context.Context) error {
		if len(viewEvents.find(func(e seen) bool { return e.typ == watch.Deleted && e.name == rb })) == 0 {
			return errorf("no DELETED yet")
		}
		return nil
	})
	if _, err := dyn.Resource(view).Namespace(ns).Get(ctx, rb, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s is still in %s's view: %v", rb, ns, err)
	}
	eventually(t, "can-i no while the exception applies", func(context.Context) error {
		if canI() {
			return errorf("can-i answers yes")
		}
		return nil
	})
	eventually(t, "the policy denying a ConfigMap (no parameter: the exception excepts it)", func(ctx context.Context) error {
		if err := admitted(ctx); err == nil {
			return errorf("admitted")
		} else if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			return err
		}
		return nil
	})
	if time.Now().After(ends) {
		t.Fatalf("the exception ended (%s) before its effects were checked: the machine is too slow for a 20 s end", ends.Format(time.RFC3339))
	}
	adm.expect(0, matches(`(?m)^`+ns+`\s+`+exc+`\s+rolebindings/`+rb+`\s+Active\s+TICKET-42\s`), "exceptions", "-A")

	t.Log("at the end: the server's mark, then every side")
	var mark seen
	eventuallyWithin(t, 50*time.Millisecond, time.Until(ends)+time.Minute, "the expired mark", func(context.Context) error {
		marked := nsEvents.find(func(e seen) bool {
			o, ok := e.obj.(*corev1.Namespace)
			if !ok {
				return false
			}
			m, err := merge.ParseExceptionsExpired(o.Annotations[v1alpha1.AnnotationExceptionsExpired])
			return err == nil && m[exc] == digest
		})
		if len(marked) == 0 {
			return errorf("not marked yet")
		}
		mark = marked[0]
		return nil
	})
	markRV := mark.obj.(*corev1.Namespace).ResourceVersion
	t.Logf("marked at revision %s, %s after the end", markRV, mark.at.Sub(ends).Round(time.Millisecond))
	if mark.at.Before(ends) {
		t.Errorf("the mark was seen %s before the end", ends.Sub(mark.at))
	}

	// The policy is polled beside can-i, so that neither waits for the other.
	policyBack := make(chan time.Time, 1)
	go func() {
		_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			if admitted(ctx) != nil {
				return false, nil
			}
			policyBack <- time.Now()
			return true, nil
		})
		close(policyBack)
	}()
	var canAt time.Time
	eventuallyWithin(t, 20*time.Millisecond, 10*time.Second, "can-i yes after the mark", func(context.Context) error {
		if !canI() {
			return errorf("can-i answers no")
		}
		canAt = time.Now()
		return nil
	})
	var admittedAt time.Time
	select {
	case admittedAt = <-policyBack:
	case <-ctx.Done():
	}
	if admittedAt.IsZero() {
		t.Fatalf("the policy did not admit a ConfigMap within 10 s of the mark")
	}
	var added seen
	eventually(t, "the watch's ADDED of "+rb, func(context.Context) error {
		a := viewEvents.find(func(e seen) bool { return e.typ == watch.Added && e.name == rb })
		if len(a) == 0 {
			return errorf("no ADDED yet")
		}
		added = a[0]
		return nil
	})
	if u, ok := added.obj.(*unstructured.Unstructured); ok {
		t.Logf("view %s ADDED at resourceVersion %s", rb, u.GetResourceVersion())
	}
	if _, err := dyn.Resource(view).Namespace(ns).Get(ctx, rb, metav1.GetOptions{}); err != nil {
		t.Errorf("%s is not in %s's view after the mark: %v", rb, ns, err)
	}
	t.Logf("after the mark: watch ADDED %s, can-i yes %s (polled with kubectl, each run included), the policy's parameter back %s (polled beside it with dry-run creates)",
		added.at.Sub(mark.at).Round(time.Millisecond), canAt.Sub(mark.at).Round(time.Millisecond), admittedAt.Sub(mark.at).Round(time.Millisecond))
	for what, at := range map[string]time.Time{"the watch's ADDED": added.at, "can-i yes": canAt, "the policy's parameter": admittedAt} {
		if d := at.Sub(mark.at); d > 2*time.Second {
			t.Errorf("%s came %s after the mark, want within 2 s", what, d.Round(time.Millisecond))
		}
	}

	adm.expect(0, matches(`(?m)^`+ns+`\s+`+exc+`\s+rolebindings/`+rb+`\s+Expired\s+TICKET-42\s.*expired$`), "exceptions", "-A")
	if a := viewEvents.find(func(e seen) bool { return e.typ == watch.Added && e.name == rb }); len(a) != 1 {
		t.Errorf("%d ADDED of %s, want exactly one", len(a), rb)
	}
	if d := viewEvents.find(func(e seen) bool { return e.typ == watch.Deleted && e.name == rb }); len(d) != 1 {
		t.Errorf("%d DELETED of %s, want exactly one", len(d), rb)
	}
}

// paramPolicy creates a ValidatingAdmissionPolicy whose parameter is the
// RoleBinding view item param of the request's namespace (paramRef without
// a namespace, parameterNotFoundAction Deny), bound to ConfigMap creates in
// the namespaces labeled selector; removed when the test ends.
func paramPolicy(t *testing.T, kube kubernetes.Interface, name, param, selector string) {
	t.Helper()
	k, v, _ := strings.Cut(selector, "=")
	deny := admissionregistrationv1.DenyAction
	fail := admissionregistrationv1.Fail
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			ParamKind:     &admissionregistrationv1.ParamKind{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "params.roleRef.name == 'view'"}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			ParamRef:          &admissionregistrationv1.ParamRef{Name: param, ParameterNotFoundAction: &deny},
			MatchResources:    &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}},
		},
	}
	api := kube.AdmissionregistrationV1()
	if _, err := api.ValidatingAdmissionPolicies().Create(t.Context(), policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(t.Context(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = api.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = api.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// matches checks that a run's standard output matches the expression.
func matches(expr string) func(pluginRun) error {
	re := regexp.MustCompile(expr)
	return func(r pluginRun) error {
		if !re.MatchString(r.stdout) {
			return errorf("stdout does not match %s", expr)
		}
		return nil
	}
}
