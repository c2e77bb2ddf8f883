package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// stormAuthzNamespaces is how many namespaces' views
// TestStormOfReadsOneClusterWideReview lists at once.
const stormAuthzNamespaces = 400

// TestStormOfReadsOneClusterWideReview: a user allowed to read the views
// in every namespace (a ClusterRoleBinding, not system:masters) lists 400
// namespaces' views at once through kube-apiserver, as a reconnect storm's
// informers do. Every list answers 200, and implicit-apiserver asks
// kube-apiserver a handful of SubjectAccessReviews (the first namespace,
// then one cluster-wide question that the others wait for), not one per
// request: issue 45's burst sent 281 for 2,000 lists, each paying for them
// (test/bench -burst; docs/benchmarks.md).
func TestStormOfReadsOneClusterWideReview(t *testing.T) {
	ctx := t.Context()
	kube, _ := admin(t)
	const reader = "storm-reader"
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: reader},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{viewRoleBindings.Group}, Resources: []string{"rolebindings"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: reader},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: reader}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(t.Context(), reader, metav1.DeleteOptions{})
		_ = kube.RbacV1().ClusterRoles().Delete(t.Context(), reader, metav1.DeleteOptions{})
	})
	// Registered before the namespaces' own cleanups, so it runs after
	// their deletions: the namespace controller finishes these 400 before
	// the next test's deletion waits behind them (TestTerminatingParent
	// timed out in that queue).
	t.Cleanup(func() { waitNamespacesGone(t, kube, "storm-authz-") })
	var names []string
	for i := range stormAuthzNamespaces {
		names = append(names, fmt.Sprintf("storm-authz-%d", i))
		createNamespace(t, kube, names[i], nil, nil)
	}
	cfg, err := cp.UserConfig(reader)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimSuffix(cfg.Host, "/")
	get := func(path string) (int, string, error) {
		for tries := 0; ; tries++ {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, host+path, nil)
			if err != nil {
				return 0, "", err
			}
			req.Header.Set("Accept", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				return 0, "", err
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
			resp.Body.Close()
			if resp.StatusCode != http.StatusTooManyRequests || tries == 10 {
				return resp.StatusCode, string(body), nil
			}
			// kube-apiserver's priority and fairness: again after its
			// Retry-After, as client-go does.
			after, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			time.Sleep(time.Duration(max(after, 1)) * time.Second)
		}
	}
	// The connection is up before the storm, and the user is known to the
	// server from none of these namespaces yet.
	if code, body, err := get("/version"); err != nil || code != http.StatusOK {
		t.Fatalf("GET /version as %s: %d %v %s", reader, code, err, body)
	}
	// The answers of the user's earlier reads (none here) are past the
	// server's allow TTL, 10 s by default: none is reused.
	before := serverMetrics(t)["apiserver_delegated_authz_request_total"]
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for _, ns := range names {
		wg.Go(func() {
			<-start
			code, body, err := get("/apis/implicit.dev/v1alpha1/namespaces/" + ns + "/rolebindings")
			if err != nil || code != http.StatusOK {
				mu.Lock()
				failures = append(failures, fmt.Sprintf("%s: %d %v %.200s", ns, code, err, body))
				mu.Unlock()
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(began)
	reviews := serverMetrics(t)["apiserver_delegated_authz_request_total"] - before
	t.Logf("FIGURES storm of reads: lists=%d failed=%d took=%s delegated_reviews=%.0f", len(names), len(failures), took.Round(time.Millisecond), reviews)
	if len(failures) > 0 {
		t.Errorf("%d of %d lists as %s failed: %v", len(failures), len(names), reader, failures[:min(5, len(failures))])
	}
	// The first namespace's review and the cluster-wide one; the rest is
	// slack for reviews of other requests meanwhile.
	if reviews > 4 {
		t.Errorf("implicit-apiserver sent %.0f SubjectAccessReviews for %d lists at once by one user allowed cluster-wide, want at most 4 (the first namespace and one cluster-wide question)", reviews, len(names))
	}
}

// waitNamespacesGone waits, up to three minutes, until no namespace named
// with prefix is left; it says how many remain if some do.
func waitNamespacesGone(t *testing.T, kube kubernetes.Interface, prefix string) {
	t.Helper()
	left := -1
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		nss, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		left = 0
		for _, ns := range nss.Items {
			if strings.HasPrefix(ns.Name, prefix) {
				left++
			}
		}
		return left == 0, nil
	})
	if err != nil {
		t.Errorf("%d namespaces %s* still there after 3 minutes: %v", left, prefix, err)
	}
}
