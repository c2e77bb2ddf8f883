package integration

import (
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestReplicasLockAfterMove is docs/security.md's row 31 through two
// replicas, each webhook call sent to either. rl-alice may update the
// namespaces rl-c-N and rl-p-N and unlock the RoleBindings of rl-p-N, not
// those of rl-c-N. rl-c-N holds its own locked RoleBinding rb, under
// another parent; rl-p-N holds rb unlocked. At the same moment she moves
// rl-c-N under rl-p-N and locks rl-p-N/rb. Each alone is admitted; never
// both: the lock after the move displaces rl-c-N/rb from rl-c-N's view
// (she may not unlock it), and the move after the lock takes it out of the
// view too. Before, a lock decided within the informers' lag of the move
// asked the mirror alone who inherits from rl-p-N.
func TestReplicasLockAfterMove(t *testing.T) {
	rc := startReplicaCluster(t)
	rc.spread.Store(true)
	ctx := t.Context()
	const rounds = 15
	uids := map[string]string{}
	mkNamespace := func(name string) {
		t.Helper()
		created, err := rc.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[name] = string(created.UID)
	}
	mkBinding := func(namespace string, locked bool) {
		t.Helper()
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "rb"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "rl-auditors-" + namespace}},
		}
		if locked {
			rb.Annotations = map[string]string{v1alpha1.AnnotationLocked: "true"}
		}
		if _, err := rc.kube.RbacV1().RoleBindings(namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for i := range rounds {
		names = append(names, fmt.Sprintf("rl-c-%d", i), fmt.Sprintf("rl-p-%d", i))
	}
	mustCreate := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := rc.kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "rl-alice"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: names,
			Verbs: []string{"get", "update", "patch"}}},
	}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = rc.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "rl-alice"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "rl-alice"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "rl-alice"}},
	}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = rc.kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "rl-alice-bindings"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"},
			Verbs: []string{"get", "update", "patch", "unlock"}}},
	}, metav1.CreateOptions{})
	mustCreate(err)
	mkNamespace("rl-elsewhere")
	for i := range rounds {
		child, parent := fmt.Sprintf("rl-c-%d", i), fmt.Sprintf("rl-p-%d", i)
		mkNamespace(child)
		mkNamespace(parent)
		mkBinding(child, true)
		mkBinding(parent, false)
		// alice's rights on the RoleBindings of the parent, unlock
		// included; none on the child's.
		_, err := rc.kube.RbacV1().RoleBindings(parent).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "rl-alice"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "rl-alice-bindings"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "rl-alice"}},
		}, metav1.CreateOptions{})
		mustCreate(err)
	}
	aliceCfg, err := rc.cp.UserConfig("rl-alice")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := kubernetes.NewForConfig(aliceCfg)
	if err != nil {
		t.Fatal(err)
	}
	for r, s := range rc.replicas {
		t.Logf("replica %d: waiting until it holds the %d namespaces' own rb", r+1, len(names))
		dyn := directClientOf(t, rc.cp, s.URL())
		for _, ns := range names {
			waitForView(t, dyn, viewRoleBindings, ns, "rb", map[string]viewItem{"rb": {Scope: "local", Source: ns}})
		}
	}

	both, moved, locked := 0, 0, 0
	for i := range rounds {
		child, parent := fmt.Sprintf("rl-c-%d", i), fmt.Sprintf("rl-p-%d", i)
		var wg sync.WaitGroup
		var moveErr, lockErr error
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q},"annotations":{%q:%q}}}`, v1alpha1.LabelParent, parent, v1alpha1.AnnotationParentUID, uids[parent])
			_, moveErr = alice.CoreV1().Namespaces().Patch(ctx, child, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		}()
		go func() {
			defer wg.Done()
			<-start
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, v1alpha1.AnnotationLocked)
			_, lockErr = alice.RbacV1().RoleBindings(parent).Patch(ctx, "rb", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		}()
		close(start)
		wg.Wait()
		switch {
		case moveErr == nil && lockErr == nil:
			both++
			t.Errorf("round %d: both admitted: %s moved under %s and %s/rb locked; %s/rb, locked, left %s's view without unlock", i, child, parent, parent, child, child)
		case moveErr == nil:
			moved++
		case lockErr == nil:
			locked++
		default:
			t.Logf("round %d: both refused (move: %v; lock: %v)", i, moveErr, lockErr)
		}
		if i == 0 {
			t.Logf("round 0: move: %v; lock: %v", moveErr, lockErr)
		}
	}
	t.Logf("%d of %d rounds admitted both; the move alone %d, the lock alone %d; webhook calls: replica 1 %d, replica 2 %d",
		both, rounds, moved, locked, rc.calls[0].Load(), rc.calls[1].Load())
	if moved == 0 || locked == 0 {
		t.Logf("one side never won a round (move %d, lock %d): the race was lopsided this run", moved, locked)
	}
}
