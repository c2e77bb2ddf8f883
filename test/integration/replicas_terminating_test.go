package integration

import (
	"context"
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

// TestReplicasTerminatingParent is issue 39's Terminating case through two
// replicas, each webhook call sent to either. A tenant with update and
// delete on two namespaces under an org that holds a locked RoleBinding,
// and no unlock, at the same moment moves one (tc-N) under the other
// (tp-N) and deletes tp-N. Each alone is admitted; both would leave tc-N
// under a namespace going away, losing the locked item when it goes. So
// never both: whichever comes second, on either replica, is judged with the
// first (the re-parent under a Terminating namespace is refused; the
// deletion of a parent whose child would lose a locked item needs unlock).
// Then, tp-N held Terminating (this control plane runs no namespace
// controller), moving any child under it is refused on both replicas.
func TestReplicasTerminatingParent(t *testing.T) {
	rc := startReplicaCluster(t)
	rc.spread.Store(true)
	ctx := t.Context()
	const org, rounds = "rt-org", 15
	// This control plane registers no mutating webhook: a parent label
	// comes with the parent's uid, as parent-uid.implicit.dev would write.
	uids := map[string]string{}
	mkNamespace := func(name, parent string) {
		t.Helper()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if parent != "" {
			ns.Labels = map[string]string{v1alpha1.LabelParent: parent}
			ns.Annotations = map[string]string{v1alpha1.AnnotationParentUID: uids[parent]}
		}
		created, err := rc.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[name] = string(created.UID)
	}
	mkNamespace(org, "")
	if _, err := rc.kube.RbacV1().RoleBindings(org).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "rt-sec", Annotations: map[string]string{v1alpha1.AnnotationLocked: "true"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "rt-auditors"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range rounds + 1 {
		names = append(names, fmt.Sprintf("tc-%d", i), fmt.Sprintf("tp-%d", i))
	}
	if _, err := rc.kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "rt-bob"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: names,
			Verbs: []string{"get", "update", "patch", "delete"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "rt-bob"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "rt-bob"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "rt-bob"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bobCfg, err := rc.cp.UserConfig("rt-bob")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := kubernetes.NewForConfig(bobCfg)
	if err != nil {
		t.Fatal(err)
	}
	reparent := func(child, parent string) error {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q},"annotations":{%q:%q}}}`, v1alpha1.LabelParent, parent, v1alpha1.AnnotationParentUID, uids[parent])
		_, err := bob.CoreV1().Namespaces().Patch(ctx, child, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	for i := range rounds + 1 {
		mkNamespace(fmt.Sprintf("tc-%d", i), org)
		mkNamespace(fmt.Sprintf("tp-%d", i), org)
	}
	// Both replicas' mirrors hold the namespaces before the races: each
	// one's view of every namespace holds the org's locked rt-sec.
	for r, s := range rc.replicas {
		t.Logf("waiting until replica %d holds the %d namespaces under %s", r+1, len(names), org)
		dyn := directClientOf(t, rc.cp, s.URL())
		for _, ns := range names {
			waitForView(t, dyn, viewRoleBindings, ns, "rt-", map[string]viewItem{"rt-sec": {Scope: "parent", Source: org}})
		}
	}

	both, moved, deleted := 0, 0, 0
	for i := range rounds {
		child, parent := fmt.Sprintf("tc-%d", i), fmt.Sprintf("tp-%d", i)
		var wg sync.WaitGroup
		var moveErr, deleteErr error
		start := make(chan struct{})
		wg.Add(2)
		go func() { defer wg.Done(); <-start; moveErr = reparent(child, parent) }()
		go func() {
			defer wg.Done()
			<-start
			deleteErr = bob.CoreV1().Namespaces().Delete(ctx, parent, metav1.DeleteOptions{})
		}()
		close(start)
		wg.Wait()
		switch {
		case moveErr == nil && deleteErr == nil:
			both++
			t.Errorf("round %d: both admitted: %s moved under %s and %s deleted; %s loses %s/rt-sec, locked, without unlock", i, child, parent, parent, child, org)
		case moveErr == nil:
			moved++
		case deleteErr == nil:
			deleted++
		default:
			t.Logf("round %d: both refused (move: %v; delete: %v)", i, moveErr, deleteErr)
		}
		if i == 0 {
			t.Logf("round 0: move: %v; delete: %v", moveErr, deleteErr)
		}
	}
	t.Logf("%d of %d rounds admitted both; the move alone %d, the deletion alone %d; webhook calls: replica 1 %d, replica 2 %d",
		both, rounds, moved, deleted, rc.calls[0].Load(), rc.calls[1].Load())

	last := fmt.Sprintf("tp-%d", rounds)
	if err := bob.CoreV1().Namespaces().Delete(ctx, last, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting %s, which has no child: %v", last, err)
	}
	eventually(t, last+" is Terminating", func(ctx context.Context) error {
		ns, err := rc.kube.CoreV1().Namespaces().Get(ctx, last, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ns.DeletionTimestamp == nil {
			return errorf("%s is %s", last, ns.Status.Phase)
		}
		return nil
	})
	for i := range 6 {
		child := fmt.Sprintf("tc-%d", rounds)
		if err := reparent(child, last); err == nil {
			t.Fatalf("attempt %d: %s moved under the Terminating %s", i, child, last)
		} else if i == 0 {
			t.Logf("moving %s under the Terminating %s: %v", child, last, err)
		}
	}
}
