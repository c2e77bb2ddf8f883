package fleet

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
)

var viewRoleBindings = schema.GroupVersionResource{Group: "implicit.dev", Version: "v1alpha1", Resource: "rolebindings"}

const converge = 30 * time.Second

func clients(t *testing.T, cp *controlplane.ControlPlane) (kubernetes.Interface, dynamic.Interface) {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	return kube, dyn
}

func createNamespace(t *testing.T, kube kubernetes.Interface, name, parent string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if parent != "" {
		ns.Labels = map[string]string{"implicit.dev/parent": parent}
	}
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func putRoleBinding(t *testing.T, kube kubernetes.Interface, namespace, name, group string, labels map[string]string) *rbacv1.RoleBinding {
	t.Helper()
	rb := testfixture.GroupBinding(metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels}, "view", group)
	cur, err := kube.RbacV1().RoleBindings(namespace).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		out, err := kube.RbacV1().RoleBindings(namespace).Create(t.Context(), rb, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	rb.ResourceVersion = cur.ResourceVersion
	out, err := kube.RbacV1().RoleBindings(namespace).Update(t.Context(), rb, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitItem waits until namespace's view on cp holds name with check passing.
func waitItem(t *testing.T, dyn dynamic.Interface, namespace, name string, check func(*unstructured.Unstructured) error) *unstructured.Unstructured {
	t.Helper()
	var got *unstructured.Unstructured
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, converge, true, func(ctx context.Context) (bool, error) {
		got, last = dyn.Resource(viewRoleBindings).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if last == nil {
			last = check(got)
		}
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s/%s: %v", namespace, name, last)
	}
	return got
}

func scopeFrom(scope, source, cluster string) func(*unstructured.Unstructured) error {
	return func(u *unstructured.Unstructured) error {
		l, a := u.GetLabels(), u.GetAnnotations()
		if l["implicit.dev/scope"] != scope || l["implicit.dev/source-namespace"] != source || a["implicit.dev/source-cluster"] != cluster {
			return fmt.Errorf("scope %q source %q cluster %q, want %q %q %q", l["implicit.dev/scope"], l["implicit.dev/source-namespace"], a["implicit.dev/source-cluster"], scope, source, cluster)
		}
		return nil
	}
}

// TestHubEditFiresMembers: a global RoleBinding on the hub is in both
// members' tenant views, marked as the hub's; one edit on the hub fires a
// MODIFIED on both members' watches; a member's parent overrides the hub.
func TestHubEditFiresMembers(t *testing.T) {
	hubKube, _ := clients(t, hub)
	hubRB := putRoleBinding(t, hubKube, globalNS, "fl-org-viewers", "org:viewers", nil)
	putRoleBinding(t, hubKube, globalNS, "fl-shadowed", "org:viewers", nil)
	type watched struct {
		name string
		w    watch.Interface
	}
	var watches []watched
	for i, m := range []*controlplane.ControlPlane{member1, member2} {
		name := fmt.Sprintf("member-%d", i+1)
		kube, dyn := clients(t, m)
		createNamespace(t, kube, "fl-org", "")
		createNamespace(t, kube, "fl-team", "fl-org")
		putRoleBinding(t, kube, "fl-org", "fl-shadowed", "platform:viewers", nil)
		t.Logf("%s: the hub's global item is in fl-team's view, marked as the hub's; the member's parent overrides fl-shadowed", name)
		got := waitItem(t, dyn, "fl-team", "fl-org-viewers", scopeFrom("global", globalNS, "hub"))
		if got.GetAnnotations()["implicit.dev/source-resource-version"] != hubRB.ResourceVersion {
			t.Errorf("%s: source-resource-version %q, want the hub's %q", name, got.GetAnnotations()["implicit.dev/source-resource-version"], hubRB.ResourceVersion)
		}
		waitItem(t, dyn, "fl-team", "fl-shadowed", scopeFrom("parent", "fl-org", ""))
		list, err := dyn.Resource(viewRoleBindings).Namespace("fl-team").List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := dyn.Resource(viewRoleBindings).Namespace("fl-team").Watch(t.Context(), metav1.ListOptions{
			ResourceVersion: list.GetResourceVersion(), FieldSelector: "metadata.name=fl-org-viewers",
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		watches = append(watches, watched{name, w})
	}
	t.Log("one edit on the hub")
	edited := putRoleBinding(t, hubKube, globalNS, "fl-org-viewers", "org:viewers", map[string]string{"edited": "true"})
	for _, w := range watches {
		select {
		case ev := <-w.w.ResultChan():
			u, _ := ev.Object.(*unstructured.Unstructured)
			if ev.Type != watch.Modified || u == nil || u.GetAnnotations()["implicit.dev/source-resource-version"] != edited.ResourceVersion {
				t.Errorf("%s: event %s %v, want MODIFIED at the hub's resourceVersion %s", w.name, ev.Type, u, edited.ResourceVersion)
			}
		case <-time.After(converge):
			t.Errorf("%s: no event for the hub's edit", w.name)
		}
	}
}

// TestPartitionFailStatic cuts member-2 off its hub (the relay) while the
// hub stays editable: member-2's views keep the last global items, marked
// stale; edits made on the hub meanwhile each arrive as exactly one event
// after the partition heals, and the stale mark goes.
func TestPartitionFailStatic(t *testing.T) {
	hubKube, _ := clients(t, hub)
	kube, dyn := clients(t, member2)
	createNamespace(t, kube, "fl-part", "")
	putRoleBinding(t, hubKube, globalNS, "fl-kept", "org:kept", nil)
	putRoleBinding(t, hubKube, globalNS, "fl-changed", "org:changed", nil)
	waitItem(t, dyn, "fl-part", "fl-kept", scopeFrom("global", globalNS, "hub"))
	waitItem(t, dyn, "fl-part", "fl-changed", scopeFrom("global", globalNS, "hub"))
	list, err := dyn.Resource(viewRoleBindings).Namespace("fl-part").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := dyn.Resource(viewRoleBindings).Namespace("fl-part").Watch(t.Context(), metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	t.Log("cutting member-2 off the hub")
	relay.cut()
	healed := false
	t.Cleanup(func() {
		if !healed {
			relay.heal()
		}
	})
	t.Log("member-2 keeps serving the hub's items, marked stale")
	stale := waitItem(t, dyn, "fl-part", "fl-kept", func(u *unstructured.Unstructured) error {
		if u.GetAnnotations()["implicit.dev/source-stale-since"] == "" {
			return fmt.Errorf("not marked stale yet")
		}
		return nil
	})
	t.Logf("fl-kept stale since %s", stale.GetAnnotations()["implicit.dev/source-stale-since"])
	if v := metricOf(t, member2, implicit2, "implicit_global_sources_stale"); v != "1" {
		t.Errorf("implicit_global_sources_stale on member-2 = %q, want 1", v)
	}

	t.Log("editing on the hub during the partition: one update, one create, one delete")
	changed := putRoleBinding(t, hubKube, globalNS, "fl-changed", "org:changed", map[string]string{"edited": "during-partition"})
	created := putRoleBinding(t, hubKube, globalNS, "fl-new", "org:new", nil)
	if err := hubKube.RbacV1().RoleBindings(globalNS).Delete(t.Context(), "fl-kept", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Log("healing the partition")
	if err := relay.heal(); err != nil {
		t.Fatal(err)
	}
	healed = true
	want := map[string]watch.EventType{"fl-changed": watch.Modified, "fl-new": watch.Added, "fl-kept": watch.Deleted}
	got := map[string][]watch.EventType{}
	deadline := time.After(converge)
	for len(got) < len(want) || !complete(got, want) {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch ended; events so far %v", got)
			}
			u, _ := ev.Object.(*unstructured.Unstructured)
			if u == nil || !strings.HasPrefix(u.GetName(), "fl-") {
				continue
			}
			got[u.GetName()] = append(got[u.GetName()], ev.Type)
			if u.GetName() == "fl-changed" && u.GetAnnotations()["implicit.dev/source-resource-version"] != changed.ResourceVersion {
				t.Errorf("fl-changed arrived at source rv %s, want %s", u.GetAnnotations()["implicit.dev/source-resource-version"], changed.ResourceVersion)
			}
			if u.GetName() == "fl-new" && u.GetAnnotations()["implicit.dev/source-resource-version"] != created.ResourceVersion {
				t.Errorf("fl-new arrived at source rv %s, want %s", u.GetAnnotations()["implicit.dev/source-resource-version"], created.ResourceVersion)
			}
		case <-deadline:
			t.Fatalf("after the partition healed, events %v, want one each of %v", got, want)
		}
	}
	// A sentinel edit proves nothing else was pending for these names.
	putRoleBinding(t, hubKube, globalNS, "fl-sentinel", "org:sentinel", nil)
	for {
		select {
		case ev := <-w.ResultChan():
			u, _ := ev.Object.(*unstructured.Unstructured)
			if u == nil {
				continue
			}
			if u.GetName() == "fl-sentinel" {
				goto done
			}
			if strings.HasPrefix(u.GetName(), "fl-") {
				got[u.GetName()] = append(got[u.GetName()], ev.Type)
			}
		case <-time.After(converge):
			t.Fatal("no event for the sentinel")
		}
	}
done:
	for name, typ := range want {
		if len(got[name]) != 1 || got[name][0] != typ {
			t.Errorf("%s: events %v, want exactly one %s", name, got[name], typ)
		}
	}
	t.Log("the stale mark goes once the hub is reachable again")
	waitItem(t, dyn, "fl-part", "fl-changed", func(u *unstructured.Unstructured) error {
		if s := u.GetAnnotations()["implicit.dev/source-stale-since"]; s != "" {
			return fmt.Errorf("still stale since %s", s)
		}
		return nil
	})
}

func complete(got map[string][]watch.EventType, want map[string]watch.EventType) bool {
	for name := range want {
		if len(got[name]) == 0 {
			return false
		}
	}
	return true
}

// TestHubDown stops the hub's kube-apiserver: member-1 keeps its views and
// marks them stale, and recovers when the hub comes back on the same etcd.
func TestHubDown(t *testing.T) {
	hubKube, _ := clients(t, hub)
	kube, dyn := clients(t, member1)
	createNamespace(t, kube, "fl-down", "")
	putRoleBinding(t, hubKube, globalNS, "fl-survivor", "org:survivors", nil)
	waitItem(t, dyn, "fl-down", "fl-survivor", scopeFrom("global", globalNS, "hub"))

	t.Log("stopping the hub's kube-apiserver")
	if err := hub.StopKubeAPIServer(); err != nil {
		t.Fatal(err)
	}
	started := false
	t.Cleanup(func() {
		if !started {
			hub.StartKubeAPIServer(context.Background())
		}
	})
	waitItem(t, dyn, "fl-down", "fl-survivor", func(u *unstructured.Unstructured) error {
		if u.GetAnnotations()["implicit.dev/source-stale-since"] == "" {
			return fmt.Errorf("not marked stale yet")
		}
		return scopeFrom("global", globalNS, "hub")(u)
	})
	t.Log("member-1 still serves fl-survivor, marked stale; restarting the hub on the same etcd")
	if err := hub.StartKubeAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	started = true
	edited := putRoleBinding(t, hubKube, globalNS, "fl-survivor", "org:survivors", map[string]string{"after": "restart"})
	waitItem(t, dyn, "fl-down", "fl-survivor", func(u *unstructured.Unstructured) error {
		if u.GetAnnotations()["implicit.dev/source-stale-since"] != "" {
			return fmt.Errorf("still stale")
		}
		if rv := u.GetAnnotations()["implicit.dev/source-resource-version"]; rv != edited.ResourceVersion {
			return fmt.Errorf("source rv %s, want %s", rv, edited.ResourceVersion)
		}
		return nil
	})
}

// TestMemberWithoutHubNotReady: an implicit-apiserver whose hub has never
// been reachable is not ready, and says why.
func TestMemberWithoutHubNotReady(t *testing.T) {
	port, err := controlplane.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	unreachable, err := rewriteServer(hub.KubeconfigPath(), hub.APIServerURL(), "https://127.0.0.1:"+strconv.Itoa(port), t.TempDir()+"/unreachable.kubeconfig")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := member1.StartAggregated(t.Context(), controlplane.AggregatedServerOptions{
		Binary: os.Getenv("IMPLICIT_BINARY"), Name: "implicit-no-hub", ReadyPath: "-",
		Args: []string{"--global-kubeconfig=" + unreachable, "--global-cluster-name=hub", "--webhook-configuration="},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	var body string
	readyz := func(ctx context.Context) (int, error) {
		resp, err := client.Get(srv.URL() + "/readyz?verbose")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode, nil
	}
	t.Log("the server runs, is not ready, and its log says why")
	err = wait.PollUntilContextTimeout(t.Context(), 300*time.Millisecond, converge, true, func(ctx context.Context) (bool, error) {
		code, err := readyz(ctx)
		if err != nil {
			return false, nil
		}
		if code == http.StatusOK {
			return false, fmt.Errorf("ready without ever reading its hub:\n%s", body)
		}
		return strings.Contains(srv.LogTail(200), `"Hub cluster not reached yet: not ready until its global sources have been read" err=`), nil
	})
	if err != nil {
		t.Fatalf("%v\n/readyz:\n%s\nlog:\n%s", err, body, srv.LogTail(20))
	}
	if !strings.Contains(body, "[-]sources-synced failed") {
		t.Errorf("/readyz?verbose does not show sources-synced failing:\n%s", body)
	}
	for i := 0; i < 3; i++ {
		if code, _ := readyz(t.Context()); code == http.StatusOK {
			t.Fatalf("ready without ever reading its hub:\n%s", body)
		}
		time.Sleep(time.Second) // on purpose: the looks span 3s of an unreached hub
	}
}

// metricOf reads one unlabelled-or-single-series metric from an
// implicit-apiserver's /metrics, as its cluster's admin.
func metricOf(t *testing.T, cp *controlplane.ControlPlane, srv *controlplane.AggregatedServer, name string) string {
	t.Helper()
	for _, line := range strings.Split(scrape(t, cp, srv), "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			f := strings.Fields(line)
			return f[len(f)-1]
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return ""
}

// seriesOf is the value of name's series of labels (as printed, e.g.
// `cluster="member-1"`) in an implicit-apiserver's /metrics, or "" when it
// has none.
func seriesOf(t *testing.T, cp *controlplane.ControlPlane, srv *controlplane.AggregatedServer, name, labels string) string {
	t.Helper()
	prefix := name + "{" + labels + "} "
	for _, line := range strings.Split(scrape(t, cp, srv), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return v
		}
	}
	return ""
}

// scrape reads an implicit-apiserver's /metrics as its cluster's admin.
func scrape(t *testing.T, cp *controlplane.ControlPlane, srv *controlplane.AggregatedServer) string {
	t.Helper()
	cfg := cp.AdminConfig()
	cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, // the server's self-signed loopback certificate
		Certificates:       []tls.Certificate{cert},
	}}}
	resp, err := client.Get(srv.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s: %v", resp.Status, err)
	}
	return string(b)
}
