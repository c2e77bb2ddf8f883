package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/cmd/server"
)

// The abuse suite: what a hostile tenant, with admin in their own namespaces
// and the right to label them, can throw at the server. Each case checks
// that the server stays up and ready, and that nothing the tenant did
// changes what another tenant sees. Latencies are logged, not asserted;
// memory bounds are asserted where memory is the target (docs/security.md
// says why each bound).

// serverClient talks to implicit-apiserver directly, as the cluster admin
// (the server trusts kube-apiserver's client CA for delegated
// authentication), for /readyz and /metrics.
func serverClient(t *testing.T) *http.Client {
	t.Helper()
	cfg := cp.AdminConfig()
	cfg.TLSClientConfig.Insecure = true
	cfg.TLSClientConfig.CAData, cfg.TLSClientConfig.CAFile = nil, ""
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// checkReady fails the test unless the server answers /readyz with 200.
func checkReady(t *testing.T) {
	t.Helper()
	resp, err := serverClient(t).Get(implicit.URL() + "/readyz")
	if err != nil {
		t.Fatalf("implicit-apiserver /readyz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("implicit-apiserver /readyz: %s", resp.Status)
	}
}

// serverMetrics scrapes the server's /metrics, summing each family over its
// labels.
func serverMetrics(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := serverClient(t).Get(implicit.URL() + "/metrics")
	if err != nil {
		t.Fatalf("implicit-apiserver /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("implicit-apiserver /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if i := strings.IndexByte(line, '{'); i >= 0 && i < len(name) {
			name = line[:i]
			j := strings.LastIndexByte(line, '}')
			rest = strings.TrimSpace(line[j+1:])
			ok = true
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			continue
		}
		out[name] += v
	}
	return out
}

// attacker is a tenant with admin in their namespaces and update on those
// namespace objects (to label them), as self-service namespace creation
// gives.
type attacker struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func newAttacker(t *testing.T, kube kubernetes.Interface, user string, namespaces ...string) attacker {
	t.Helper()
	ctx := t.Context()
	for _, ns := range namespaces {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user + "-admin", Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}
		if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Reading the views, as implicit-viewer (aggregated into admin
		// where artifacts/ are installed) grants.
		views := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: user + "-views", Namespace: ns},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"implicit.dev"}, Resources: []string{"rolebindings", "roles", "networkpolicies"},
				Verbs: []string{"get", "list", "watch"}}},
		}
		if _, err := kube.RbacV1().Roles(ns).Create(ctx, views, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rb.Name, rb.RoleRef = user+"-views", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: views.Name}
		rb.ResourceVersion = ""
		if _, err := kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-own-namespaces"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"},
			ResourceNames: namespaces, Verbs: []string{"get", "update", "patch"}}},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user + "-own-namespaces"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = kube.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	cfg, err := cp.UserConfig(user)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit: the flood is the point
	a := attacker{}
	if a.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if a.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return a
}

// bystander is another tenant whose view must not change.
func bystanderView(t *testing.T, dyn dynamic.Interface, ns string) string {
	t.Helper()
	items, err := listView(t.Context(), dyn, viewRoleBindings, ns, "", metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return describe(summarize(items))
}

// TestAbuseHugeInputs: the largest names, labels and annotations
// kube-apiserver admits, and an exclusion list of 10,000 entries.
func TestAbuseHugeInputs(t *testing.T) {
	kube, dyn := admin(t)
	ctx := t.Context()
	ensureNamespace(t, kube, globalNS)
	createNamespace(t, kube, "ab-huge", nil, nil)
	createNamespace(t, kube, "ab-bystander", nil, nil)
	createRoleBinding(t, kube, globalNS, "ab-org-viewers", "view", "org:viewers")
	createRoleBinding(t, kube, "ab-bystander", "ab-bystander-devs", "edit", "bystander:devs")
	waitForView(t, dyn, viewRoleBindings, "ab-bystander", "ab-", map[string]viewItem{
		"ab-org-viewers":    {Scope: "global", Source: globalNS},
		"ab-bystander-devs": {Scope: "local", Source: "ab-bystander"},
	})
	before := bystanderView(t, dyn, "ab-bystander")
	heapBefore := serverMetrics(t)["go_memstats_heap_inuse_bytes"]
	mallory := newAttacker(t, kube, "mallory-huge", "ab-huge")

	t.Log("mallory creates RoleBindings with 253-character names, 60 labels of maximal length and 200 KiB of annotations")
	start := time.Now()
	const n = 20
	for i := range n {
		name := fmt.Sprintf("ab-%03d-%s", i, strings.Repeat("x", 253-7))
		labels := map[string]string{}
		for j := range 60 {
			labels[fmt.Sprintf("k%02d.example.com/%s", j, strings.Repeat("l", 50))] = strings.Repeat("v", 63)
		}
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ab-huge", Labels: labels,
				Annotations: map[string]string{"example.com/blob": strings.Repeat("a", 200<<10)}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "huge"}},
		}
		if _, err := mallory.kube.RbacV1().RoleBindings("ab-huge").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating huge RoleBinding %d: %v", i, err)
		}
	}
	t.Log("mallory excludes 10,000 names from her namespace")
	entries := make([]string, 0, 10000)
	for i := range 10000 {
		entries = append(entries, fmt.Sprintf("rolebindings/x%05d", i))
	}
	entries = append(entries, "rolebindings/ab-org-viewers")
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AnnotationExclude, strings.Join(entries, ","))
	if _, err := mallory.kube.CoreV1().Namespaces().Patch(ctx, "ab-huge", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patching the exclusion list (%d bytes): %v", len(patch), err)
	}
	eventually(t, "mallory's view has her 20 huge items and no excluded global item", func(ctx context.Context) error {
		items, err := listView(ctx, mallory.dyn, viewRoleBindings, "ab-huge", "ab-", metav1.ListOptions{})
		if err != nil {
			return err
		}
		if _, ok := items["ab-org-viewers"]; ok || len(items) != n {
			return errorf("view has %d items (ab-org-viewers excluded: %v), want %d and excluded", len(items), !ok, n)
		}
		return nil
	})
	t.Logf("huge inputs visible in the view after %s", time.Since(start).Round(time.Millisecond))

	checkReady(t)
	if after := bystanderView(t, dyn, "ab-bystander"); after != before {
		t.Errorf("the bystander's view changed:\nbefore %s\nafter  %s", before, after)
	}
	// 20 items of about 215 KiB each, held once by the informer and once
	// more at most by the watch history: anything near a copy per
	// namespace would exceed this.
	heapAfter := serverMetrics(t)["go_memstats_heap_inuse_bytes"]
	t.Logf("heap in use %0.f MiB -> %.0f MiB", heapBefore/(1<<20), heapAfter/(1<<20))
	if grown := heapAfter - heapBefore; grown > 64<<20 {
		t.Errorf("heap grew by %.0f MiB for 4 MiB of sources, want under 64 MiB", grown/(1<<20))
	}
}

// TestAbuseFlapping: parent and tenancy labels flipped in a tight loop, from
// two clients at once. The server keeps up, the bystander's view never
// changes, and once the flapping stops the view matches the last labels.
func TestAbuseFlapping(t *testing.T) {
	kube, dyn := admin(t)
	ctx := t.Context()
	ensureNamespace(t, kube, globalNS)
	for _, ns := range []string{"ab-flap", "ab-flap-p1", "ab-flap-p2", "ab-flap-bystander"} {
		createNamespace(t, kube, ns, nil, nil)
	}
	createRoleBinding(t, kube, "ab-flap-p1", "ab-flap-from-p1", "view", "p1")
	createRoleBinding(t, kube, "ab-flap-p2", "ab-flap-from-p2", "view", "p2")
	createRoleBinding(t, kube, "ab-flap-bystander", "ab-flap-bystander-own", "view", "b")
	waitForView(t, dyn, viewRoleBindings, "ab-flap-bystander", "ab-flap-", map[string]viewItem{
		"ab-flap-bystander-own": {Scope: "local", Source: "ab-flap-bystander"},
	})
	before := bystanderView(t, dyn, "ab-flap-bystander")
	mallory := newAttacker(t, kube, "mallory-flap", "ab-flap", "ab-flap-p1", "ab-flap-p2")

	t.Log("one client alone: the latency of a parent change through the guards")
	var took []time.Duration
	for i := range 20 {
		parent := []string{"ab-flap-p1", "ab-flap-p2"}[i%2]
		begin := time.Now()
		if _, err := mallory.kube.CoreV1().Namespaces().Patch(ctx, "ab-flap", types.MergePatchType,
			[]byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, v1alpha1.LabelParent, parent)), metav1.PatchOptions{}); err != nil {
			t.Fatalf("parent change %d: %v", i, err)
		}
		took = append(took, time.Since(begin))
	}
	slices.Sort(took)
	t.Logf("parent change latency over %d: median %s, max %s", len(took), took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))

	const rounds = 40
	t.Logf("two clients flip ab-flap's parent and inherit labels %d times each", rounds)
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted, refused := 0, 0
	for c := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				var labels string
				switch (i + c) % 3 {
				case 0:
					labels = fmt.Sprintf(`{%q:"ab-flap-p1",%q:null}`, v1alpha1.LabelParent, v1alpha1.LabelInherit)
				case 1:
					labels = fmt.Sprintf(`{%q:"ab-flap-p2",%q:null}`, v1alpha1.LabelParent, v1alpha1.LabelInherit)
				default:
					labels = fmt.Sprintf(`{%q:null,%q:"false"}`, v1alpha1.LabelParent, v1alpha1.LabelInherit)
				}
				_, err := mallory.kube.CoreV1().Namespaces().Patch(ctx, "ab-flap", types.MergePatchType,
					[]byte(`{"metadata":{"labels":`+labels+`}}`), metav1.PatchOptions{})
				mu.Lock()
				if err != nil {
					refused++
				} else {
					accepted++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d label changes admitted, %d refused, in %s", accepted, refused, time.Since(start).Round(time.Millisecond))
	if accepted == 0 {
		t.Fatal("no label change was admitted: the flapping tested nothing")
	}

	t.Log("settle on parent ab-flap-p2: the view follows the last labels")
	settle := fmt.Sprintf(`{"metadata":{"labels":{%q:"ab-flap-p2",%q:null}}}`, v1alpha1.LabelParent, v1alpha1.LabelInherit)
	if _, err := mallory.kube.CoreV1().Namespaces().Patch(ctx, "ab-flap", types.MergePatchType, []byte(settle), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForView(t, dyn, viewRoleBindings, "ab-flap", "ab-flap-", map[string]viewItem{
		"ab-flap-from-p2": {Scope: "parent", Source: "ab-flap-p2"},
	})
	checkReady(t)
	if after := bystanderView(t, dyn, "ab-flap-bystander"); after != before {
		t.Errorf("the bystander's view changed:\nbefore %s\nafter  %s", before, after)
	}
}

// TestAbuseWatchChurn: a tenant opens a thousand watches through
// kube-apiserver and drops them. Every one of them is released: the open
// watchers gauge and the goroutines return to where they were.
func TestAbuseWatchChurn(t *testing.T) {
	kube, dyn := admin(t)
	ctx := t.Context()
	createNamespace(t, kube, "ab-watch", nil, nil)
	createNamespace(t, kube, "ab-watch-bystander", nil, nil)
	createRoleBinding(t, kube, "ab-watch-bystander", "ab-watch-bystander-own", "view", "b")
	waitForView(t, dyn, viewRoleBindings, "ab-watch-bystander", "ab-watch-", map[string]viewItem{
		"ab-watch-bystander-own": {Scope: "local", Source: "ab-watch-bystander"},
	})
	before := bystanderView(t, dyn, "ab-watch-bystander")
	mallory := newAttacker(t, kube, "mallory-watch", "ab-watch")
	base := serverMetrics(t)

	const n = 1000
	t.Logf("mallory opens %d watches of her view, then drops them", n)
	start := time.Now()
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 50)
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			w, err := mallory.dyn.Resource(viewRoleBindings).Namespace("ab-watch").Watch(wctx, metav1.ListOptions{})
			if err != nil {
				errs <- err
				return
			}
			go func() {
				<-wctx.Done()
				w.Stop()
			}()
		}()
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if failed == 0 {
			t.Logf("first refused watch: %v", err)
		}
		failed++
	}
	t.Logf("%d watches opened in %s, %d refused", n-failed, time.Since(start).Round(time.Millisecond), failed)
	if failed == n {
		t.Fatal("no watch was opened: the churn tested nothing")
	}
	peak := serverMetrics(t)
	t.Logf("open watchers %.0f -> %.0f, goroutines %.0f -> %.0f", base["implicit_watch_open_watchers"], peak["implicit_watch_open_watchers"], base["go_goroutines"], peak["go_goroutines"])
	cancel()
	eventually(t, "every dropped watch is released by the server", func(ctx context.Context) error {
		now := serverMetrics(t)
		if now["implicit_watch_open_watchers"] > base["implicit_watch_open_watchers"] {
			return errorf("%.0f open watchers, %.0f before", now["implicit_watch_open_watchers"], base["implicit_watch_open_watchers"])
		}
		// Beside the watches, the server's idle HTTP/2 connections from
		// kube-apiserver's proxy may stay until their idle timeout: one per
		// DefaultHTTP2MaxStreamsPerConnection watches, a few goroutines
		// each. A leak of the watches themselves would be thousands.
		idleConns := (n + server.DefaultHTTP2MaxStreamsPerConnection - 1) / server.DefaultHTTP2MaxStreamsPerConnection
		if now["go_goroutines"] > base["go_goroutines"]+float64(3*idleConns+50) {
			return errorf("%.0f goroutines, %.0f before", now["go_goroutines"], base["go_goroutines"])
		}
		return nil
	})
	checkReady(t)
	if after := bystanderView(t, dyn, "ab-watch-bystander"); after != before {
		t.Errorf("the bystander's view changed:\nbefore %s\nafter  %s", before, after)
	}
}

// TestAbuseSARFlood: a tenant floods SelfSubjectAccessReviews with unique,
// long names in her namespace. RBAC says no to each, so kube-apiserver asks
// the authorization webhook every time; the server's decision cache must
// not keep what the flood sends (issue 13: about 1 MiB retained per review
// before).
func TestAbuseSARFlood(t *testing.T) {
	kube, dyn := admin(t)
	ctx := t.Context()
	createNamespace(t, kube, "ab-sar", nil, nil)
	createNamespace(t, kube, "ab-sar-bystander", nil, nil)
	createRoleBinding(t, kube, "ab-sar-bystander", "ab-sar-bystander-own", "view", "b")
	waitForView(t, dyn, viewRoleBindings, "ab-sar-bystander", "ab-sar-", map[string]viewItem{
		"ab-sar-bystander-own": {Scope: "local", Source: "ab-sar-bystander"},
	})
	before := bystanderView(t, dyn, "ab-sar-bystander")
	mallory := newAttacker(t, kube, "mallory-sar", "ab-sar")
	heapBefore := serverMetrics(t)["go_memstats_heap_inuse_bytes"]

	const n, nameLen = 1000, 200 << 10
	t.Logf("mallory sends %d SelfSubjectAccessReviews with unique %d KiB names", n, nameLen>>10)
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var mu sync.Mutex
	allowed, failed := 0, 0
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			name := fmt.Sprintf("%06d-%s", i, strings.Repeat("n", nameLen))
			review, err := mallory.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: "ab-sar", Verb: "unlock", Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Name: name}},
			}, metav1.CreateOptions{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				failed++
			case review.Status.Allowed:
				allowed++
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	t.Logf("%d reviews in %s (%.1f ms each, 8 at a time): %d allowed, %d failed", n, elapsed.Round(time.Millisecond),
		float64(elapsed.Milliseconds())/n, allowed, failed)
	if failed == n {
		t.Fatal("every review failed: the flood tested nothing")
	}
	if allowed != 0 {
		t.Errorf("%d reviews allowed mallory to unlock RoleBindings, which admin never grants", allowed)
	}
	checkReady(t)
	heapAfter := serverMetrics(t)["go_memstats_heap_inuse_bytes"]
	t.Logf("heap in use %.0f MiB -> %.0f MiB after %d MiB of review names", heapBefore/(1<<20), heapAfter/(1<<20), n*nameLen>>20)
	// The decision cache is bounded at 32 MiB of estimated bytes and never
	// keeps a key over 16 KiB: these 200 MiB of names must leave next to
	// nothing behind.
	if grown := heapAfter - heapBefore; grown > 48<<20 {
		t.Errorf("heap grew by %.0f MiB, want under 48 MiB", grown/(1<<20))
	}
	if after := bystanderView(t, dyn, "ab-sar-bystander"); after != before {
		t.Errorf("the bystander's view changed:\nbefore %s\nafter  %s", before, after)
	}
}

// TestAbuseMalformedReviews: whoever holds kube-apiserver's webhook client
// certificate (kube-apiserver itself, or a stolen copy) sends malformed
// AdmissionReviews and SubjectAccessReviews. Each gets a 4xx, or a 200 that
// decides nothing (a SubjectAccessReview that allows nothing, an
// AdmissionReview response); none takes the server down.
func TestAbuseMalformedReviews(t *testing.T) {
	ca, err := implicit.CABundle()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	cert, err := cp.WebhookClientCertificate()
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, Certificates: []tls.Certificate{cert},
	}}}
	bodies := []struct {
		name string
		body []byte
	}{
		{"empty", nil},
		{"not JSON", []byte("\x00\x01garbage")},
		{"truncated", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x",`)},
		{"wrong kind", []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"}}`)},
		{"no request", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`)},
		{"request without object", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"UPDATE","resource":{"group":"rbac.authorization.k8s.io","version":"v1","resource":"rolebindings"},"namespace":"ab","name":"x"}}`)},
		{"deeply nested", []byte(strings.Repeat("[", 100000) + strings.Repeat("]", 100000))},
		{"over the size limit", append([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"`), append(make([]byte, 8<<20), []byte(`"}}`)...)...)},
	}
	paths := append([]string{authz.Path}, webhookconfig.Paths...)
	for _, path := range paths {
		for _, b := range bodies {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, implicit.URL()+path, bytes.NewReader(b.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("%s, %s: %v", path, b.name, err)
				continue
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK && path == authz.Path:
				var review authorizationv1.SubjectAccessReview
				if err := json.Unmarshal(body, &review); err != nil || review.Status.Allowed {
					t.Errorf("%s, %s: 200 with %s, want a review that allows nothing", path, b.name, body)
				}
			case resp.StatusCode == http.StatusOK:
				var review admissionv1.AdmissionReview
				if err := json.Unmarshal(body, &review); err != nil || review.Response == nil {
					t.Errorf("%s, %s: 200 with %s, want an AdmissionReview response", path, b.name, body)
				}
			case resp.StatusCode < 400 || resp.StatusCode >= 500:
				t.Errorf("%s, %s: %s, want a 4xx", path, b.name, resp.Status)
			}
			if d := time.Since(start); d > time.Second {
				t.Logf("%s, %s: %s in %s", path, b.name, resp.Status, d.Round(time.Millisecond))
			}
		}
	}
	checkReady(t)
}
