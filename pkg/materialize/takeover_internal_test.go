package materialize

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// TestReconcileNeverTakesOver plays the races between the materializer's
// list of the copies and its write: an object a tenant creates, or a copy a
// write made its own (the label removed at admission), in between is never
// overwritten nor deleted.
func TestReconcileNeverTakesOver(t *testing.T) {
	t.Run("a tenant object created after the copies were listed is reported, not taken over", func(t *testing.T) {
		host := newFakeHost(t)
		tracker := host.Tracker()
		var once sync.Once
		// The copies' informer has nothing in team-b; the tenant's
		// create of default-deny lands right before the materializer's.
		host.PrependReactor("create", "networkpolicies", func(action clienttesting.Action) (bool, runtime.Object, error) {
			ca := action.(clienttesting.CreateAction)
			if ca.GetNamespace() != "team-b" || ca.GetObject().(*unstructured.Unstructured).GetName() != "default-deny" {
				return false, nil, nil
			}
			once.Do(func() {
				if cerr := tracker.Create(npGVR, toUnstructured(t, tenantObject("team-b", "default-deny")), "team-b"); cerr != nil {
					t.Error(cerr)
				}
			})
			return false, nil, nil
		})
		rec := record.NewFakeRecorder(10)
		m := New(newMux(false, sources()...), host, []kinds.Kind{npKind}, rec, Options{})
		conflicts0 := counter(t, conflicts.WithLabelValues("networkpolicies"))

		if _, err := m.reconcile(context.Background(), "team-b", host.list(t)); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		checkTenantObject(t, host.objects(t, "team-b")["default-deny"], "tenant")
		if d := counter(t, conflicts.WithLabelValues("networkpolicies")) - conflicts0; d != 1 {
			t.Errorf("conflicts +%v, want +1", d)
		}
		if len(rec.Events) != 1 {
			t.Errorf("%d events, want one MaterializeConflict", len(rec.Events))
		} else if e := <-rec.Events; !strings.HasPrefix(e, "Warning MaterializeConflict ") {
			t.Errorf("event %q, want a MaterializeConflict", e)
		}
		if c := host.objects(t, "team-b")["web"]; c == nil || !v1alpha1.IsMaterialized(c.GetLabels()) {
			t.Errorf("the other inherited item has no copy: %v", c)
		}
	})

	t.Run("a copy made its own between the list and the delete is kept", func(t *testing.T) {
		// The informer still lists the copy of "gone" (whose item left the
		// view); a write made it its writer's own since.
		stale := toUnstructured(t, staleCopy("team-b", global, "gone", "x", "3"))
		host := newFakeHost(t, staleCopy("team-b", global, "gone", "x", "3"))
		adopt(t, host, "team-b", "gone", "mine")
		m := New(newMux(false, sources()...), host, []kinds.Kind{npKind}, nil, Options{})

		_, err := m.reconcile(context.Background(), "team-b", listing(host, t, stale))
		if err == nil || !isConflict(err) {
			t.Errorf("reconcile: %v, want a conflict (retried from a fresh read)", err)
		}
		checkTenantObject(t, host.objects(t, "team-b")["gone"], "mine")
	})

	t.Run("a copy made its own between the list and the apply is kept", func(t *testing.T) {
		// The informer still lists an outdated copy of default-deny.
		stale := toUnstructured(t, staleCopy("team-b", global, "default-deny", "old-app", "9"))
		host := newFakeHost(t, staleCopy("team-b", global, "default-deny", "old-app", "9"))
		adopt(t, host, "team-b", "default-deny", "mine")
		m := New(newMux(false, sources()...), host, []kinds.Kind{npKind}, nil, Options{})

		_, err := m.reconcile(context.Background(), "team-b", listing(host, t, stale))
		if err == nil || !isConflict(err) {
			t.Errorf("reconcile: %v, want a conflict (retried from a fresh read)", err)
		}
		checkTenantObject(t, host.objects(t, "team-b")["default-deny"], "mine")

		// From a fresh read: the former copy is the writer's own, logged
		// but no conflict reported (the view will show it as local).
		conflicts0 := counter(t, conflicts.WithLabelValues("networkpolicies"))
		m.uids[copyKey{"networkpolicies", "team-b", "default-deny"}] = stale.GetUID()
		if _, err := m.reconcile(context.Background(), "team-b", host.list(t)); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		checkTenantObject(t, host.objects(t, "team-b")["default-deny"], "mine")
		if d := counter(t, conflicts.WithLabelValues("networkpolicies")) - conflicts0; d != 0 {
			t.Errorf("conflicts +%v, want none for a former copy", d)
		}
	})
}

// adopt plays a write that makes the copy namespace/name its writer's own:
// the label gone, the content the writer's, a new resourceVersion.
func adopt(t *testing.T, host *fakeHost, namespace, name, app string) {
	t.Helper()
	u := host.objects(t, namespace)[name].DeepCopy()
	lbls := u.GetLabels()
	delete(lbls, v1alpha1.LabelMaterialized)
	u.SetLabels(lbls)
	if err := unstructured.SetNestedStringMap(u.Object, map[string]string{"app": app}, "spec", "podSelector", "matchLabels"); err != nil {
		t.Fatal(err)
	}
	u.SetResourceVersion("100")
	if err := host.Tracker().Update(npGVR, u, namespace); err != nil {
		t.Fatal(err)
	}
}

// listing is a lister that returns the stale copies given, as an informer
// that has not seen the latest writes would, and the host's other copies.
func listing(host *fakeHost, t *testing.T, stale ...*unstructured.Unstructured) lister {
	return func(k kinds.Kind, namespace string) ([]metav1.Object, error) {
		out, err := host.list(t)(k, namespace)
		for _, s := range stale {
			if s.GetNamespace() == namespace {
				out = append(out, s)
			}
		}
		return out, err
	}
}

func checkTenantObject(t *testing.T, o *unstructured.Unstructured, app string) {
	t.Helper()
	if o == nil {
		t.Fatal("the tenant's object is gone")
	}
	got, _, _ := unstructured.NestedString(o.Object, "spec", "podSelector", "matchLabels", "app")
	if v1alpha1.IsMaterialized(o.GetLabels()) || got != app {
		t.Errorf("the tenant's object was taken over: labels %v, selects app %q, want %q", o.GetLabels(), got, app)
	}
}

// isConflict reports whether err, or one error of the aggregates it wraps,
// is a Conflict.
func isConflict(err error) bool {
	var agg utilerrors.Aggregate
	if !errors.As(err, &agg) {
		return apierrors.IsConflict(err)
	}
	for _, e := range agg.Errors() {
		if isConflict(e) {
			return true
		}
	}
	return false
}
