package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
)

var (
	viewRoleBindings    = schema.GroupVersionResource{Group: "implicit.dev", Version: "v1alpha1", Resource: "rolebindings"}
	viewRoles           = schema.GroupVersionResource{Group: "implicit.dev", Version: "v1alpha1", Resource: "roles"}
	viewNetworkPolicies = schema.GroupVersionResource{Group: "implicit.dev", Version: "v1alpha1", Resource: "networkpolicies"}
)

// converge bounds how long a source change may take to show in a view: the
// server reads informer caches, which follow kube-apiserver's watch.
const converge = 30 * time.Second

func admin(t *testing.T) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	cfg := cp.AdminConfig()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kube, dyn
}

// createNamespace creates a namespace and deletes it when the test ends.
func createNamespace(t *testing.T, kube kubernetes.Interface, name string, labels, annotations map[string]string) *corev1.Namespace {
	t.Helper()
	ns, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		err := kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	return ns
}

// ensureNamespace creates a namespace that outlives the test (the global one).
func ensureNamespace(t *testing.T, kube kubernetes.Interface, name string) {
	t.Helper()
	_, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

type rbOpt func(*rbacv1.RoleBinding)

func locked(rb *rbacv1.RoleBinding) {
	if rb.Annotations == nil {
		rb.Annotations = map[string]string{}
	}
	rb.Annotations["implicit.dev/locked"] = "true"
}

func withLabel(k, v string) rbOpt {
	return func(rb *rbacv1.RoleBinding) {
		if rb.Labels == nil {
			rb.Labels = map[string]string{}
		}
		rb.Labels[k] = v
	}
}

// createRoleBinding binds ClusterRole role to group in namespace and deletes
// the binding when the test ends (namespaces of other tests outlive it, the
// global one in particular).
func createRoleBinding(t *testing.T, kube kubernetes.Interface, namespace, name, role, group string, opts ...rbOpt) *rbacv1.RoleBinding {
	t.Helper()
	rb := testfixture.GroupBinding(metav1.ObjectMeta{Name: name, Namespace: namespace}, role, group)
	for _, o := range opts {
		o(rb)
	}
	out, err := kube.RbacV1().RoleBindings(namespace).Create(t.Context(), rb, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating rolebinding %s/%s: %v", namespace, name, err)
	}
	t.Cleanup(func() {
		err := kube.RbacV1().RoleBindings(namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting rolebinding %s/%s: %v", namespace, name, err)
		}
	})
	return out
}

// viewItem is what a test checks of one view item.
type viewItem struct {
	Scope  string
	Source string
}

func (v viewItem) String() string { return v.Scope + "/" + v.Source }

// listView lists a view through the aggregator, keeping items whose name has prefix.
func listView(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, namespace, prefix string, opts metav1.ListOptions) (map[string]*unstructured.Unstructured, error) {
	list, err := dyn.Resource(gvr).Namespace(namespace).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	out := map[string]*unstructured.Unstructured{}
	for i := range list.Items {
		it := &list.Items[i]
		if strings.HasPrefix(it.GetName(), prefix) {
			out[it.GetName()] = it
		}
	}
	return out, nil
}

func summarize(items map[string]*unstructured.Unstructured) map[string]viewItem {
	out := map[string]viewItem{}
	for name, it := range items {
		out[name] = viewItem{Scope: it.GetLabels()["implicit.dev/scope"], Source: it.GetLabels()["implicit.dev/source-namespace"]}
	}
	return out
}

func describe(m map[string]viewItem) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s=%s ", n, m[n])
	}
	return strings.TrimSpace(b.String())
}

// waitForView waits until namespace's view of gvr, restricted to names with
// prefix, is exactly want, and returns its items.
func waitForView(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, namespace, prefix string, want map[string]viewItem) map[string]*unstructured.Unstructured {
	t.Helper()
	var items map[string]*unstructured.Unstructured
	testwait.Within(t, 200*time.Millisecond, converge, "the view "+gvr.Resource+" in "+namespace, func(ctx context.Context) error {
		var err error
		items, err = listView(ctx, dyn, gvr, namespace, prefix, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if got := describe(summarize(items)); got != describe(want) {
			return fmt.Errorf("\n got  %s\n want %s", got, describe(want))
		}
		return nil
	})
	return items
}

// eventually polls check until it returns nil, failing the test with its last error.
func eventually(t *testing.T, what string, check func(ctx context.Context) error) {
	t.Helper()
	eventuallyWithin(t, 200*time.Millisecond, converge, what, check)
}

// eventuallyWithin is eventually with its own poll interval and bound.
func eventuallyWithin(t *testing.T, interval, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	testwait.Within(t, interval, timeout, what, check)
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// withoutGuards runs f with the admission guards unregistered, for states
// the guards refuse to create but the merge must still handle (a parent
// cycle made while the webhook was down, a shadow older than its lock).
func withoutGuards(t *testing.T, f func()) {
	t.Helper()
	kube, _ := admin(t)
	err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(t.Context(), controlplane.GuardsConfiguration, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	defer func() {
		if err := cp.RegisterGuards(context.Background(), implicit, servedSources()); err != nil {
			t.Fatalf("registering the guards again: %v", err)
		}
	}()
	f()
}

// explainEventually runs kubectl explain with args until its output holds
// every one of want. Each try is bounded on its own: kube-apiserver's
// aggregator fetches the group's OpenAPI from the server in the background,
// and after the served group changed (a configured kind came or went in an
// earlier test) one fetch can take long enough that an unbounded try would
// use up the whole wait.
func explainEventually(t *testing.T, args []string, want ...string) {
	t.Helper()
	// Timed, with why each failed try failed: the aggregator serves a
	// group's new OpenAPI only after its periodic refetch (docs/operations.md).
	start := time.Now()
	var tries int
	var slowest time.Duration
	failures := map[string]int{}
	eventuallyWithin(t, time.Second, 120*time.Second, "kubectl explain "+strings.Join(args, " "), func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		tries++
		began := time.Now()
		out, _, err := cp.Kubectl(ctx, append([]string{"explain"}, args...)...)
		slowest = max(slowest, time.Since(began))
		if err == nil {
			for _, w := range want {
				if !strings.Contains(out, w) {
					err = fmt.Errorf("no %q in:\n%s", w, out)
					break
				}
			}
		}
		if err != nil {
			msg, _, _ := strings.Cut(err.Error(), "\n")
			failures[msg]++
		}
		return err
	})
	t.Logf("FIGURES kubectl explain %s: shown %s after the first try, %d tries, slowest try %s; failed tries: %v",
		strings.Join(args, " "), time.Since(start).Round(100*time.Millisecond), tries, slowest.Round(100*time.Millisecond), failures)
}
