package integration

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

// The authorization webhook is checked the way people meet it: real
// requests of certificate users through client-go, and kubectl auth can-i
// as admin impersonating them, against kube-apiserver with the
// AuthorizationConfiguration main_test.go writes (Node, RBAC, then
// implicit-apiserver's webhook with failurePolicy NoOpinion and
// authorizedTTL/unauthorizedTTL 1s; implicit-global, kube-system,
// kube-public and kube-node-lease never reach the webhook).

const (
	// azRevoked bounds how long an inherited grant may outlive the deletion
	// of its binding. kube-apiserver keeps the webhook's last "allowed" for
	// authorizedTTL (1s) from when it got it: the test asks just before the
	// delete, so up to 1s of the bound is that cache, by design. The other
	// second is for implicit-apiserver's informer to see the delete over a
	// loopback watch (milliseconds: its own decision cache is keyed by the
	// views' generation, so it never answers from a stale entry), for the
	// 50ms poll and the request itself, on a loaded 2-core machine. A
	// webhook that answered "allowed" from stale views after the TTL would
	// re-arm kube-apiserver's cache for another second, past the bound.
	azRevoked = 2 * time.Second
	// azRevokePoll and azRevokeWait: how often and how long the revocation
	// is polled for (a bounded wait, beyond azRevoked so a slow revocation
	// is measured, not just reported late).
	azRevokePoll = 50 * time.Millisecond
	azRevokeWait = 5 * time.Second
	// azExcluded bounds how long an excluded inherited binding may go on
	// granting: a namespace update reaches implicit-apiserver as quickly as
	// a RoleBinding's, plus kube-apiserver's 1s cache.
	azExcluded = 5 * time.Second
	// azQuick is how long a call RBAC decides may take while
	// implicit-apiserver is down: the webhook isn't consulted once RBAC
	// allows, and a refused connection is no opinion at once.
	azQuick = 5 * time.Second
	// azLatencyRequests is the number of SubjectAccessReviews per case.
	azLatencyRequests = 200
)

// azClient is a clientset authenticating as user in groups with a client
// certificate of its own.
func azClient(t *testing.T, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	cfg, err := cp.UserConfig(user, groups...)
	if err != nil {
		t.Fatalf("client configuration of %s: %v", user, err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// azCanI runs kubectl auth can-i as admin impersonating user in groups.
func azCanI(t *testing.T, user string, groups []string, verb, resource, namespace string) bool {
	t.Helper()
	args := []string{verb, resource, "-n", namespace, "--as", user}
	for _, g := range groups {
		args = append(args, "--as-group", g)
	}
	return gdAdmin(t).canI(args...)
}

// azExpectCan fails the test unless kubectl auth can-i answers want.
func azExpectCan(t *testing.T, want bool, user string, groups []string, verb, resource, namespace string) {
	t.Helper()
	got := azCanI(t, user, groups, verb, resource, namespace)
	if got != want {
		t.Errorf("kubectl auth can-i %s %s -n %s --as %s (groups %v): %s, want %s", verb, resource, namespace, user, groups, yesNo(got), yesNo(want))
		return
	}
	t.Logf("kubectl auth can-i %s %s -n %s --as %s: %s", verb, resource, namespace, user, yesNo(got))
}

// azTTL is kube-apiserver's authorizedTTL for the webhook's answers.
const azTTL = time.Second

// azPastTTL waits until every webhook answer kube-apiserver cached before
// since has expired. kubectl auth can-i (a SelfSubjectAccessReview of an
// impersonated user) has its own cache entry, apart from the real
// requests' (a certificate user's extra differs): an answer it got just
// before a revocation may stand for up to azTTL after, even once the real
// requests are refused.
func azPastTTL(t *testing.T, since time.Time) {
	t.Helper()
	if d := time.Until(since.Add(azTTL + 100*time.Millisecond)); d > 0 {
		t.Logf("waiting %s, until kubectl auth can-i's answers from before are out of kube-apiserver's cache", d.Round(time.Millisecond))
		time.Sleep(d) // on purpose: kube-apiserver's cache says nothing of its expiries
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// azForbidden fails the test unless err is a 403.
func azForbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: %v, want 403 Forbidden", what, err)
		return
	}
	t.Logf("%s: Forbidden", what)
}

// azBind binds a Role or ClusterRole to user in namespace with opts, and
// deletes the binding when the test ends.
func azBind(t *testing.T, kube kubernetes.Interface, namespace, name, kind, role, user string, opts ...rbOpt) *rbacv1.RoleBinding {
	t.Helper()
	rb := azBinding(namespace, name, kind, role, user, opts...)
	out, err := kube.RbacV1().RoleBindings(namespace).Create(t.Context(), rb, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating rolebinding %s/%s: %v", namespace, name, err)
	}
	azCleanupBinding(t, kube, namespace, name)
	return out
}

func azBinding(namespace, name, kind, role, user string, opts ...rbOpt) *rbacv1.RoleBinding {
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, o := range opts {
		o(rb)
	}
	return rb
}

func azCleanupBinding(t *testing.T, kube kubernetes.Interface, namespace, name string) {
	t.Cleanup(func() {
		err := kube.RbacV1().RoleBindings(namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting rolebinding %s/%s: %v", namespace, name, err)
		}
	})
}

// azRole creates a Role with rules and deletes it when the test ends.
func azRole(t *testing.T, kube kubernetes.Interface, namespace, name string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Rules: rules}
	if _, err := kube.RbacV1().Roles(namespace).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating role %s/%s: %v", namespace, name, err)
	}
	t.Cleanup(func() {
		err := kube.RbacV1().Roles(namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting role %s/%s: %v", namespace, name, err)
		}
	})
}

func azConfigMap(namespace, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Data: map[string]string{"by": "authz_test"}}
}

// azCreateConfigMap creates a ConfigMap through c; one already there counts.
func azCreateConfigMap(ctx context.Context, c kubernetes.Interface, namespace, name string) error {
	_, err := c.CoreV1().ConfigMaps(namespace).Create(ctx, azConfigMap(namespace, name), metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func azListPods(ctx context.Context, c kubernetes.Interface, namespace string) error {
	_, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	return err
}

func azListConfigMaps(ctx context.Context, c kubernetes.Interface, namespace string) error {
	_, err := c.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{})
	return err
}

// azUntilRefused polls call every interval, for at most limit, until
// refused accepts its error, and returns how long after since that was and
// how many calls succeeded before. A call that neither succeeds nor is
// refused ends the wait with its error.
func azUntilRefused(t *testing.T, since time.Time, interval, limit time.Duration, refused func(error) bool, call func(ctx context.Context) error) (time.Duration, int, error) {
	t.Helper()
	var took time.Duration
	allowed := 0
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), interval, limit, true, func(ctx context.Context) (bool, error) {
		last = call(ctx)
		switch {
		case last == nil:
			allowed++
			return false, nil
		case refused(last):
			took = time.Since(since)
			return true, nil
		default:
			return false, fmt.Errorf("neither allowed nor refused: %w", last)
		}
	})
	if err != nil && last == nil {
		err = fmt.Errorf("still allowed after %s (%d calls allowed)", time.Since(since).Round(time.Millisecond), allowed)
	}
	return took, allowed, err
}

// azUntilForbidden is azUntilRefused until a 403.
func azUntilForbidden(t *testing.T, since time.Time, interval, limit time.Duration, call func(ctx context.Context) error) (time.Duration, int, error) {
	t.Helper()
	return azUntilRefused(t, since, interval, limit, apierrors.IsForbidden, call)
}

// azOutageRefused reports whether err refuses a request while
// implicit-apiserver is down, and how. No authorizer allows it and the
// webhook has no opinion (failurePolicy NoOpinion), so access is withdrawn;
// but kube-apiserver's union authorizer keeps the webhook's error beside the
// no-opinion decision, and its authorization filter answers a request that
// nothing allowed with an error as 500 Internal Server Error, not 403 (see
// k8s.io/apiserver pkg/authorization/union and pkg/endpoints/filters/
// authorization.go, v0.37.1). Either is a refusal; a 500 must name the
// webhook's unreachable address.
func azOutageRefused(err error) (string, bool) {
	switch {
	case apierrors.IsForbidden(err):
		return "403 Forbidden", true
	case apierrors.IsInternalError(err) && strings.Contains(err.Error(), authz.Path) && strings.Contains(err.Error(), "connection refused"):
		return "500 Internal Server Error naming the webhook", true
	}
	return "", false
}

// azWaitViewItem waits until namespace's view of rolebinding (or role) name is
// at scope from source, and check (if any) accepts its annotations.
func azWaitViewItem(t *testing.T, resource, namespace, name, scope, source string, check func(annotations map[string]string) error) {
	t.Helper()
	_, dyn := admin(t)
	gvr := viewRoleBindings
	if resource == "roles" {
		gvr = viewRoles
	}
	eventually(t, fmt.Sprintf("%s/%s in %s's view is %s from %s", resource, name, namespace, scope, source), func(ctx context.Context) error {
		it, err := dyn.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got := viewItem{Scope: it.GetLabels()["implicit.dev/scope"], Source: it.GetLabels()["implicit.dev/source-namespace"]}
		if want := (viewItem{Scope: scope, Source: source}); got != want {
			return errorf("%s, want %s", got, want)
		}
		if check != nil {
			return check(it.GetAnnotations())
		}
		return nil
	})
}

// TestInheritedGlobalBinding: a global RoleBinding grants in every tenant,
// nowhere else, no more than its role, and stops granting within
// kube-apiserver's webhook cache TTL of its deletion.
func TestInheritedGlobalBinding(t *testing.T) {
	kube, _ := admin(t)
	ensureNamespace(t, kube, globalNS)
	gdNamespace(t, kube, "az-team", nil, nil)
	gdNamespace(t, kube, "az-solo", map[string]string{"implicit.dev/inherit": "false"}, nil)
	bob := azClient(t, "az-bob")

	t.Log("az-bob's only grant: the global RoleBinding az-bob-view, to ClusterRole view")
	azBind(t, kube, globalNS, "az-bob-view", "ClusterRole", "view", "az-bob")
	azWaitViewItem(t, "rolebindings", "az-team", "az-bob-view", "global", globalNS, nil)
	start := time.Now()
	eventually(t, "az-bob lists pods in the tenant az-team", func(ctx context.Context) error { return azListPods(ctx, bob, "az-team") })
	t.Logf("az-bob lists pods in az-team (after %s)", time.Since(start).Round(time.Millisecond))
	azExpectCan(t, true, "az-bob", nil, "list", "pods", "az-team")

	t.Log("nowhere else: not in kube-system (never sent to the webhook), not in az-solo (implicit.dev/inherit=false)")
	for _, ns := range []string{"kube-system", "az-solo"} {
		azExpectCan(t, false, "az-bob", nil, "list", "pods", ns)
		azForbidden(t, "az-bob lists pods in "+ns, azListPods(t.Context(), bob, ns))
	}

	t.Log("no more than view: az-bob can't create pods in az-team")
	azExpectCan(t, false, "az-bob", nil, "create", "pods", "az-team")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "az-bob-pod", Namespace: "az-team"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	_, err := bob.CoreV1().Pods("az-team").Create(t.Context(), pod, metav1.CreateOptions{})
	azForbidden(t, "az-bob creates a pod in az-team", err)

	t.Log("deleting az-bob-view, just after an allowed list (kube-apiserver caches that answer for authorizedTTL=1s)")
	if err := azListPods(t.Context(), bob, "az-team"); err != nil {
		t.Fatalf("az-bob lists pods in az-team before the delete: %v", err)
	}
	if err := kube.RbacV1().RoleBindings(globalNS).Delete(t.Context(), "az-bob-view", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	took, allowed, err := azUntilForbidden(t, deleted, azRevokePoll, azRevokeWait, func(ctx context.Context) error { return azListPods(ctx, bob, "az-team") })
	if err != nil {
		t.Fatalf("az-bob lists pods in az-team after az-bob-view's delete: %v", err)
	}
	t.Logf("az-bob's list in az-team is Forbidden %s after the delete returned (%d lists allowed meanwhile, polling every %s)",
		took.Round(time.Millisecond), allowed, azRevokePoll)
	if took > azRevoked {
		t.Errorf("revocation took %s, want <= %s (authorizedTTL 1s + propagation)", took.Round(time.Millisecond), azRevoked)
	}
	azPastTTL(t, deleted)
	azExpectCan(t, false, "az-bob", nil, "list", "pods", "az-team")
}

// TestParentBindingGrantsSubtree: a RoleBinding in a parent grants in its
// children and their children, and only there.
func TestParentBindingGrantsSubtree(t *testing.T) {
	kube, _ := admin(t)
	ensureNamespace(t, kube, globalNS)
	gdNamespace(t, kube, "az-org", nil, nil)
	gdNamespace(t, kube, "az-a", map[string]string{"implicit.dev/parent": "az-org"}, nil)
	gdNamespace(t, kube, "az-b", map[string]string{"implicit.dev/parent": "az-org"}, nil)
	gdNamespace(t, kube, "az-c", map[string]string{"implicit.dev/parent": "az-a"}, nil)
	gdNamespace(t, kube, "az-other", nil, nil)

	t.Log("az-org's RoleBinding az-devs-edit binds group az:devs to ClusterRole edit")
	createRoleBinding(t, kube, "az-org", "az-devs-edit", "edit", "az:devs")
	for _, ns := range []string{"az-a", "az-b", "az-c"} {
		azWaitViewItem(t, "rolebindings", ns, "az-devs-edit", "parent", "az-org", nil)
	}
	dev := azClient(t, "az-dan", "az:devs")
	devGroups := []string{"az:devs"}

	t.Log("az-dan, in az:devs, creates a ConfigMap in az-org (native RBAC: the binding is there), az-a, az-b and az-c (grandchild)")
	for _, ns := range []string{"az-org", "az-a", "az-b", "az-c"} {
		start := time.Now()
		eventually(t, "az-dan creates a ConfigMap in "+ns, func(ctx context.Context) error {
			return azCreateConfigMap(ctx, dev, ns, "az-dan-cm")
		})
		t.Logf("az-dan created %s/az-dan-cm (after %s)", ns, time.Since(start).Round(time.Millisecond))
		azExpectCan(t, true, "az-dan", devGroups, "create", "configmaps", ns)
	}

	t.Log("not in az-other, which has no parent")
	azExpectCan(t, false, "az-dan", devGroups, "create", "configmaps", "az-other")
	azForbidden(t, "az-dan creates a ConfigMap in az-other", azCreateConfigMap(t.Context(), dev, "az-other", "az-dan-cm"))

	t.Log("and only for the group: az-dan without az:devs can't")
	azExpectCan(t, false, "az-dan", nil, "create", "configmaps", "az-c")
	azForbidden(t, "az-dan without az:devs creates a ConfigMap in az-c",
		azCreateConfigMap(t.Context(), azClient(t, "az-dan"), "az-c", "az-dan-cm2"))
}

// TestLocalShadowNarrows: a local RoleBinding shadowing an inherited one of
// the same name replaces it in the namespace (narrowing it), unless the
// inherited one is locked.
func TestLocalShadowNarrows(t *testing.T) {
	kube, _ := admin(t)
	ensureNamespace(t, kube, globalNS)
	gdNamespace(t, kube, "az-narrow", nil, nil)
	gdNamespace(t, kube, "az-wide", nil, nil)

	t.Log("the global az-shared binds az-carol to edit; az-narrow's own az-shared binds her to view")
	azBind(t, kube, globalNS, "az-shared", "ClusterRole", "edit", "az-carol")
	azBind(t, kube, "az-narrow", "az-shared", "ClusterRole", "view", "az-carol")
	azWaitViewItem(t, "rolebindings", "az-narrow", "az-shared", "local", "az-narrow", nil)
	azWaitViewItem(t, "rolebindings", "az-wide", "az-shared", "global", globalNS, nil)
	carol := azClient(t, "az-carol")

	t.Log("in az-wide, az-carol edits (the global az-shared)")
	eventually(t, "az-carol creates a ConfigMap in az-wide", func(ctx context.Context) error {
		return azCreateConfigMap(ctx, carol, "az-wide", "az-carol-cm")
	})
	azExpectCan(t, true, "az-carol", nil, "create", "configmaps", "az-wide")

	t.Log("in az-narrow, az-carol views (the local az-shared, native RBAC) and can't create")
	eventually(t, "az-carol lists configmaps in az-narrow", func(ctx context.Context) error {
		return azListConfigMaps(ctx, carol, "az-narrow")
	})
	azExpectCan(t, true, "az-carol", nil, "list", "configmaps", "az-narrow")
	azExpectCan(t, false, "az-carol", nil, "create", "configmaps", "az-narrow")
	azForbidden(t, "az-carol creates a ConfigMap in az-narrow", azCreateConfigMap(t.Context(), carol, "az-narrow", "az-carol-cm"))

	t.Log("the global az-locked-edit, locked, binds az-dave to edit")
	azBind(t, kube, globalNS, "az-locked-edit", "ClusterRole", "edit", "az-dave", locked)
	azWaitViewItem(t, "rolebindings", "az-narrow", "az-locked-edit", "global", globalNS, nil)

	t.Log("with the guards away (the shadow guard refuses new shadows of locked items), az-narrow gets its own az-locked-edit binding az-dave to view")
	shadow := azBinding("az-narrow", "az-locked-edit", "ClusterRole", "view", "az-dave")
	azCleanupBinding(t, kube, "az-narrow", "az-locked-edit")
	withoutGuards(t, func() {
		// kube-apiserver may call the guards a moment longer, until its
		// informer sees their configuration go.
		eventually(t, "creating az-narrow/az-locked-edit with the guards away", func(ctx context.Context) error {
			_, err := kube.RbacV1().RoleBindings("az-narrow").Create(ctx, shadow, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
	})
	azWaitViewItem(t, "rolebindings", "az-narrow", "az-locked-edit", "global", globalNS, func(ann map[string]string) error {
		if c := ann["implicit.dev/conflict"]; !strings.Contains(c, "az-narrow/az-locked-edit") {
			return errorf("implicit.dev/conflict %q does not name the blocked shadow az-narrow/az-locked-edit", c)
		}
		return nil
	})
	t.Log("the locked global binding still wins in az-narrow's view: az-dave edits there")
	dave := azClient(t, "az-dave")
	eventually(t, "az-dave creates a ConfigMap in az-narrow", func(ctx context.Context) error {
		return azCreateConfigMap(ctx, dave, "az-narrow", "az-dave-cm")
	})
	azExpectCan(t, true, "az-dave", nil, "create", "configmaps", "az-narrow")
	azExpectCan(t, true, "az-dave", nil, "delete", "configmaps", "az-narrow")
}

// TestNoEscalationByLocalRole: an inherited binding to a Role is resolved
// where the binding comes from; a tenant's Role of the same name changes
// nothing. An exclusion removes the inherited binding's grant.
func TestNoEscalationByLocalRole(t *testing.T) {
	kube, _ := admin(t)
	ensureNamespace(t, kube, globalNS)
	gdNamespace(t, kube, "az-esc", nil, nil)

	t.Log("the global Role az-reader (get, list configmaps) and RoleBinding az-reader-binding for az-erin")
	azRole(t, kube, globalNS, "az-reader", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}})
	azBind(t, kube, globalNS, "az-reader-binding", "Role", "az-reader", "az-erin")
	t.Log("az-esc's own Role az-reader grants * on * (what a tenant could write)")
	azRole(t, kube, "az-esc", "az-reader", rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}})
	azWaitViewItem(t, "roles", "az-esc", "az-reader", "local", "az-esc", nil)
	azWaitViewItem(t, "rolebindings", "az-esc", "az-reader-binding", "global", globalNS, nil)
	if _, err := kube.CoreV1().ConfigMaps("az-esc").Create(t.Context(), azConfigMap("az-esc", "az-esc-cm"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	erin := azClient(t, "az-erin")

	t.Log("az-erin lists configmaps in az-esc: the global Role")
	eventually(t, "az-erin lists configmaps in az-esc", func(ctx context.Context) error { return azListConfigMaps(ctx, erin, "az-esc") })
	azExpectCan(t, true, "az-erin", nil, "list", "configmaps", "az-esc")

	t.Log("but the local az-reader doesn't widen it: no delete, no secrets")
	azExpectCan(t, false, "az-erin", nil, "delete", "configmaps", "az-esc")
	azExpectCan(t, false, "az-erin", nil, "list", "secrets", "az-esc")
	azExpectCan(t, false, "az-erin", nil, "create", "rolebindings", "az-esc")
	azForbidden(t, "az-erin deletes az-esc/az-esc-cm", erin.CoreV1().ConfigMaps("az-esc").Delete(t.Context(), "az-esc-cm", metav1.DeleteOptions{}))
	_, err := erin.CoreV1().Secrets("az-esc").List(t.Context(), metav1.ListOptions{})
	azForbidden(t, "az-erin lists secrets in az-esc", err)
	if _, err := kube.CoreV1().ConfigMaps("az-esc").Get(t.Context(), "az-esc-cm", metav1.GetOptions{}); err != nil {
		t.Errorf("az-esc/az-esc-cm after az-erin's refused delete: %v", err)
	}

	t.Log("annotating az-esc with implicit.dev/exclude: rolebindings/az-reader-binding, just after an allowed list")
	if err := azListConfigMaps(t.Context(), erin, "az-esc"); err != nil {
		t.Fatalf("az-erin lists configmaps in az-esc before the exclusion: %v", err)
	}
	patch := []byte(`{"metadata":{"annotations":{"implicit.dev/exclude":"rolebindings/az-reader-binding"}}}`)
	if _, err := kube.CoreV1().Namespaces().Patch(t.Context(), "az-esc", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	excluded := time.Now()
	took, allowed, err := azUntilForbidden(t, excluded, 100*time.Millisecond, azExcluded, func(ctx context.Context) error { return azListConfigMaps(ctx, erin, "az-esc") })
	if err != nil {
		t.Fatalf("az-erin lists configmaps in az-esc after the exclusion: %v", err)
	}
	t.Logf("az-erin's list in az-esc is Forbidden %s after the exclusion (%d lists allowed meanwhile)", took.Round(time.Millisecond), allowed)
	azPastTTL(t, excluded)
	azExpectCan(t, false, "az-erin", nil, "list", "configmaps", "az-esc")
	t.Log("the exclusion is az-esc's alone: the global az-reader-binding still shows elsewhere")
	gdNamespace(t, kube, "az-esc-sibling", nil, nil)
	azWaitViewItem(t, "rolebindings", "az-esc-sibling", "az-reader-binding", "global", globalNS, nil)
	eventually(t, "az-erin lists configmaps in az-esc-sibling", func(ctx context.Context) error { return azListConfigMaps(ctx, erin, "az-esc-sibling") })
}

// TestAuthzOutage stops implicit-apiserver: RBAC goes on deciding (at once),
// inherited grants are withdrawn (the webhook's failure is no opinion; see
// azOutageRefused for the status code the caller sees), and come back with
// the server.
func TestAuthzOutage(t *testing.T) {
	kube, _ := admin(t)
	ensureNamespace(t, kube, globalNS)
	gdNamespace(t, kube, "az-out", nil, nil)

	t.Log("az-frank edits az-out through a local RoleBinding; az-gina views it through the global az-gina-view only")
	azBind(t, kube, "az-out", "az-frank-edit", "ClusterRole", "edit", "az-frank")
	azBind(t, kube, globalNS, "az-gina-view", "ClusterRole", "view", "az-gina")
	frank, gina := azClient(t, "az-frank"), azClient(t, "az-gina")
	eventually(t, "az-frank creates a ConfigMap in az-out", func(ctx context.Context) error {
		return azCreateConfigMap(ctx, frank, "az-out", "az-frank-before")
	})
	eventually(t, "az-gina lists configmaps in az-out", func(ctx context.Context) error { return azListConfigMaps(ctx, gina, "az-out") })

	t.Log("stopping implicit-apiserver")
	if err := implicit.Stop(); err != nil {
		t.Fatalf("stopping implicit-apiserver: %v", err)
	}
	stopped := time.Now()
	restart := func() {
		t.Helper()
		if err := implicit.Restart(context.Background()); err != nil {
			t.Fatalf("restarting implicit-apiserver: %v\n%s", err, implicit.LogTail(40))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := cp.WaitAPIServiceAvailable(ctx); err != nil {
			t.Fatalf("after the restart: %v", err)
		}
	}
	t.Cleanup(func() {
		if implicit.Process() == nil {
			restart()
		}
	})

	t.Log("while it is down, what RBAC allows goes on, quickly")
	quick := func(who string, call func(ctx context.Context) error) {
		t.Helper()
		start := time.Now()
		err := call(t.Context())
		took := time.Since(start)
		if err != nil {
			t.Errorf("%s while implicit-apiserver is down: %v (after %s)", who, err, took.Round(time.Millisecond))
			return
		}
		t.Logf("%s: %s", who, took.Round(time.Millisecond))
		if took > azQuick {
			t.Errorf("%s took %s while implicit-apiserver is down, want under %s", who, took.Round(time.Millisecond), azQuick)
		}
	}
	quick("az-frank lists configmaps in az-out", func(ctx context.Context) error { return azListConfigMaps(ctx, frank, "az-out") })
	quick("az-frank creates a ConfigMap in az-out", func(ctx context.Context) error {
		return azCreateConfigMap(ctx, frank, "az-out", "az-frank-down")
	})
	quick("az-frank deletes a ConfigMap in az-out", func(ctx context.Context) error {
		return frank.CoreV1().ConfigMaps("az-out").Delete(ctx, "az-frank-before", metav1.DeleteOptions{})
	})
	quick("admin lists pods in az-out", func(ctx context.Context) error { return azListPods(ctx, kube, "az-out") })
	quick("admin creates a ConfigMap in az-out", func(ctx context.Context) error {
		return azCreateConfigMap(ctx, kube, "az-out", "az-admin-down")
	})
	quick("admin lists secrets in kube-system", func(ctx context.Context) error {
		_, err := kube.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
		return err
	})
	azExpectCan(t, true, "az-frank", nil, "create", "configmaps", "az-out")

	t.Log("what only the inherited az-gina-view granted is refused (the webhook can't be reached: no opinion, and RBAC doesn't allow)")
	refused := func(err error) bool { _, ok := azOutageRefused(err); return ok }
	took, allowed, err := azUntilRefused(t, stopped, 100*time.Millisecond, azRevokeWait, refused, func(ctx context.Context) error {
		return azListConfigMaps(ctx, gina, "az-out")
	})
	if err != nil {
		t.Fatalf("az-gina lists configmaps in az-out while implicit-apiserver is down: %v", err)
	}
	t.Logf("az-gina's list is refused %s after the stop returned (%d lists allowed meanwhile, kube-apiserver's cache)", took.Round(time.Millisecond), allowed)
	statuses := map[string]int{}
	for i := range 3 {
		start := time.Now()
		err := azListConfigMaps(t.Context(), gina, "az-out")
		d := time.Since(start)
		how, ok := azOutageRefused(err)
		if !ok {
			t.Errorf("az-gina lists configmaps in az-out while down (%d): %v, want it refused", i, err)
		} else {
			statuses[how]++
			t.Logf("az-gina lists configmaps in az-out while down: %s in %s: %v", how, d.Round(time.Millisecond), err)
		}
		if d > azQuick {
			t.Errorf("az-gina's list took %s while implicit-apiserver is down, want under %s", d.Round(time.Millisecond), azQuick)
		}
		time.Sleep(1100 * time.Millisecond) // on purpose: past unauthorizedTTL, kube-apiserver calls the webhook again
	}
	if n := statuses["500 Internal Server Error naming the webhook"]; n > 0 {
		t.Logf("NOTE: %d of 3 refusals of an inherited-only grant were 500, not 403: kube-apiserver turns the unreachable webhook's error into 500 when nothing allows", n)
	}
	t.Log("where the webhook isn't asked (kube-system, by its match condition), a refusal stays 403")
	azForbidden(t, "az-gina lists configmaps in kube-system while down", azListConfigMaps(t.Context(), gina, "kube-system"))
	azExpectCan(t, false, "az-gina", nil, "list", "configmaps", "az-out")

	t.Log("restarting implicit-apiserver")
	restart()
	start := time.Now()
	eventually(t, "az-gina lists configmaps in az-out after the restart", func(ctx context.Context) error {
		return azListConfigMaps(ctx, gina, "az-out")
	})
	t.Logf("az-gina lists configmaps in az-out again %s after the APIService became Available", time.Since(start).Round(time.Millisecond))
	azExpectCan(t, true, "az-gina", nil, "list", "configmaps", "az-out")
}

// TestAuthzLatency measures SubjectAccessReviews through kube-apiserver (a
// figure for docs/benchmarks.md, not pass/fail): a user RBAC allows (the
// webhook isn't consulted), a user only an inherited binding allows (the
// webhook allows) and a user with no grant (the webhook has no opinion).
// Every review names another ConfigMap, so neither kube-apiserver's webhook
// cache nor implicit-apiserver's decision cache answers.
func TestAuthzLatency(t *testing.T) {
	kube, _ := admin(t)
	ensureNamespace(t, kube, globalNS)
	gdNamespace(t, kube, "az-lat", nil, nil)
	azBind(t, kube, "az-lat", "az-lat-native", "ClusterRole", "view", "az-lat-native")
	azBind(t, kube, globalNS, "az-lat-inherited", "ClusterRole", "view", "az-lat-inherited")
	cfg := cp.AdminConfig()
	cfg.QPS, cfg.Burst = 10_000, 10_000 // measure the server, not client-side throttling
	sarClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	review := func(ctx context.Context, user, name string) (bool, time.Duration, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   user,
			Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: "az-lat", Verb: "get", Resource: "configmaps", Name: name,
			},
		}}
		start := time.Now()
		out, err := sarClient.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		d := time.Since(start)
		if err != nil {
			return false, d, err
		}
		return out.Status.Allowed, d, nil
	}
	cases := []struct {
		name, user string
		allowed    bool
	}{
		{"native-rbac", "az-lat-native", true},
		{"inherited", "az-lat-inherited", true},
		{"no-grant", "az-lat-nobody", false},
	}
	for _, c := range cases {
		eventually(t, c.user+"'s review says "+yesNo(c.allowed), func(ctx context.Context) error {
			got, _, err := review(ctx, c.user, "az-lat-warmup")
			if err != nil {
				return err
			}
			if got != c.allowed {
				return errorf("allowed %v", got)
			}
			return nil
		})
	}
	for _, c := range cases {
		durations := make([]time.Duration, 0, azLatencyRequests)
		wrong := 0
		for i := range azLatencyRequests {
			got, d, err := review(t.Context(), c.user, fmt.Sprintf("az-lat-%s-%d", c.name, i))
			if err != nil {
				t.Fatalf("review %d of %s: %v", i, c.name, err)
			}
			if got != c.allowed {
				wrong++
			}
			durations = append(durations, d)
		}
		if wrong > 0 {
			t.Errorf("%s: %d of %d reviews answered allowed=%v", c.name, wrong, azLatencyRequests, !c.allowed)
		}
		slices.Sort(durations)
		t.Logf("authz-latency %s p50=%s p99=%s", c.name, azPercentile(durations, 0.50), azPercentile(durations, 0.99))
	}
}

// azPercentile is the nearest-rank percentile of sorted durations.
func azPercentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i].Round(10 * time.Microsecond)
}
