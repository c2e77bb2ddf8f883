package exceptions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/exceptions"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

var (
	t0    = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	nsGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
)

func spec(name string, ends time.Time) v1alpha1.ExceptionSpec {
	s := v1alpha1.ExceptionSpec{Name: name, Exclude: []string{"rolebindings/ci-bot"}, Reason: "TICKET-1", RequestedBy: "alice"}
	if !ends.IsZero() {
		s.ExpiresAt = &metav1.Time{Time: ends}
	}
	return s
}

func namespace(name string, specs []v1alpha1.ExceptionSpec, marks map[string]string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1", Annotations: map[string]string{}}}
	if specs != nil {
		b, _ := json.Marshal(specs)
		ns.Annotations[v1alpha1.AnnotationExceptions] = string(b)
	}
	if marks != nil {
		b, _ := json.Marshal(marks)
		ns.Annotations[v1alpha1.AnnotationExceptionsExpired] = string(b)
	}
	return ns
}

// cluster is a fake clientset whose namespace patches check and bump the
// resourceVersion as kube-apiserver does; before, when set, runs first
// (another writer acting between the read and the patch).
type cluster struct {
	*fake.Clientset
	mu      sync.Mutex
	patches []string
	before  func(n int) // n: this patch's number, from 1
}

func newCluster(objs ...runtime.Object) *cluster {
	c := &cluster{Clientset: fake.NewClientset(objs...)}
	c.PrependReactor("patch", "namespaces", func(a k8stesting.Action) (bool, runtime.Object, error) {
		pa := a.(k8stesting.PatchAction)
		c.mu.Lock()
		c.patches = append(c.patches, string(pa.GetPatch()))
		n, before := len(c.patches), c.before
		c.mu.Unlock()
		if before != nil {
			before(n)
		}
		var p struct {
			Metadata struct {
				ResourceVersion string             `json:"resourceVersion"`
				Annotations     map[string]*string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(pa.GetPatch(), &p); err != nil {
			return true, nil, err
		}
		cur, err := c.Tracker().Get(nsGVR, "", pa.GetName())
		if err != nil {
			return true, nil, err
		}
		ns := cur.(*corev1.Namespace).DeepCopy()
		if p.Metadata.ResourceVersion != ns.ResourceVersion {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "namespaces"}, ns.Name, fmt.Errorf("the object has been modified"))
		}
		for k, v := range p.Metadata.Annotations {
			if v == nil {
				delete(ns.Annotations, k)
			} else {
				ns.Annotations[k] = *v
			}
		}
		c.bump(ns)
		return true, ns, c.Tracker().Update(nsGVR, ns, "")
	})
	return c
}

func (c *cluster) bump(ns *corev1.Namespace) {
	rv, _ := strconv.Atoi(ns.ResourceVersion)
	ns.ResourceVersion = strconv.Itoa(rv + 1)
}

// edit changes a namespace as another writer would.
func (c *cluster) edit(t *testing.T, name string, change func(*corev1.Namespace)) {
	cur, err := c.Tracker().Get(nsGVR, "", name)
	if err != nil {
		t.Fatal(err)
	}
	ns := cur.(*corev1.Namespace).DeepCopy()
	change(ns)
	c.bump(ns)
	if err := c.Tracker().Update(nsGVR, ns, ""); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) patchCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.patches)
}

func (c *cluster) marks(t *testing.T, name string) map[string]string {
	cur, err := c.Tracker().Get(nsGVR, "", name)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := cur.(*corev1.Namespace).Annotations[v1alpha1.AnnotationExceptionsExpired]
	if !ok {
		return nil
	}
	m, err := merge.ParseExceptionsExpired(v)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// start runs a writer on c with a fake clock at t0 until the test ends.
func start(t *testing.T, c *cluster, window time.Duration, opts ...func(*exceptions.Config)) (*clocktesting.FakeClock, *record.FakeRecorder) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	factory := informers.NewSharedInformerFactory(c, 0)
	cfg := exceptions.Config{
		Client: c, Namespaces: factory.Core().V1().Namespaces(), Clock: clk, WarningWindow: window,
	}
	for _, o := range opts {
		o(&cfg)
	}
	w, err := exceptions.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec := record.NewFakeRecorder(100)
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, rec)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	return clk, rec
}

// settle waits until the writer's watcher sleeps on its timer (the fake
// clock's only waiter): it has looked at every namespace.
func settle(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	testwait.For(t, "the writer to look at the namespaces and sleep", clk.HasWaiters)
}

func events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (c *cluster) sent() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.patches...)
}
