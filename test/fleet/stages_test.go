package fleet

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestClusterStages walks a hub candidate through cluster stages: with
// implicit.dev/canary-clusters selecting member-1's registered label, the
// candidate is in effect in member-1's canary namespace only; member-2
// knows it as out of its cluster, until the hub's admin relabels member-2
// (and back); widened to every member, both members' canaries see it; once
// promoted, every namespace of both sees its content from the stable
// source. Each member's report agrees with a fresh list of its views, and
// `kubectl implicit rollout status` on the hub shows each member's share.
func TestClusterStages(t *testing.T) {
	ctx := t.Context()
	hubKube, hubDyn := clients(t, hub)
	_, dyn1 := clients(t, member1)
	_, dyn2 := clients(t, member2)
	for _, cp := range []*controlplane.ControlPlane{member1, member2} {
		kube, _ := clients(t, cp)
		for _, ns := range []*corev1.Namespace{
			{ObjectMeta: metav1.ObjectMeta{Name: "cs-canary", Labels: map[string]string{v1alpha1.LabelStage: "canary"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "cs-main"}},
		} {
			if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
	}
	putRoleBinding(t, hubKube, globalNS, "cs-viewers", "org:cs-stable", nil)
	candidate := testfixture.GroupBinding(metav1.ObjectMeta{Name: "cs-viewers.next", Namespace: globalNS, Annotations: map[string]string{
		v1alpha1.AnnotationCandidateFor:   "cs-viewers",
		v1alpha1.AnnotationCanarySelector: v1alpha1.LabelStage + "=canary",
		v1alpha1.AnnotationCanaryClusters: "implicit.dev/cluster-stage=canary",
	}}, "view", "org:cs-next")
	if _, err := hubKube.RbacV1().RoleBindings(globalNS).Create(ctx, candidate, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = hubKube.RbacV1().RoleBindings(globalNS).Delete(context.WithoutCancel(ctx), "cs-viewers.next", metav1.DeleteOptions{})
		_ = hubKube.RbacV1().RoleBindings(globalNS).Delete(context.WithoutCancel(ctx), "cs-viewers", metav1.DeleteOptions{})
	})

	// One cluster: member-1's canary sees the candidate; its other
	// namespaces, and every namespace of member-2, the stable source.
	waitItem(t, dyn1, "cs-canary", "cs-viewers", sees("cs-viewers.next", "org:cs-next"))
	waitItem(t, dyn1, "cs-main", "cs-viewers", sees("", "org:cs-stable"))
	waitCandidateReport(t, "member-2", "cs-viewers.next", false, 0)
	waitItem(t, dyn2, "cs-canary", "cs-viewers", sees("", "org:cs-stable"))
	waitCandidateReport(t, "member-1", "cs-viewers.next", true, canaryCount(t, dyn1, "cs-viewers.next"))
	out := hubPlugin(t, "rollout", "status", "rolebindings", "cs-viewers", "-n", globalNS, "--watch=false")
	for _, want := range []string{"MEMBER CLUSTERS", "member-1 cs-viewers.next yes", "member-2 cs-viewers.next no 0/"} {
		if !strings.Contains(squeeze(out), want) {
			t.Errorf("rollout status on the hub lacks %q:\n%s", want, out)
		}
	}

	// The hub's admin moves member-2 into the canary clusters, and back.
	relabel(t, hubDyn, "member-2", "canary")
	waitItem(t, dyn2, "cs-canary", "cs-viewers", sees("cs-viewers.next", "org:cs-next"))
	waitItem(t, dyn2, "cs-main", "cs-viewers", sees("", "org:cs-stable"))
	relabel(t, hubDyn, "member-2", "main")
	waitItem(t, dyn2, "cs-canary", "cs-viewers", sees("", "org:cs-stable"))

	// The fleet: without canary-clusters, every member's canaries.
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, v1alpha1.AnnotationCanaryClusters))
	if _, err := hubKube.RbacV1().RoleBindings(globalNS).Patch(ctx, "cs-viewers.next", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitItem(t, dyn2, "cs-canary", "cs-viewers", sees("cs-viewers.next", "org:cs-next"))
	waitItem(t, dyn2, "cs-main", "cs-viewers", sees("", "org:cs-stable"))
	waitCandidateReport(t, "member-2", "cs-viewers.next", true, canaryCount(t, dyn2, "cs-viewers.next"))

	// Promoted: every namespace of both members, from the stable source.
	hubPlugin(t, "rollout", "promote", "rolebindings", "cs-viewers", "-n", globalNS)
	for _, dyn := range []dynamic.Interface{dyn1, dyn2} {
		for _, ns := range []string{"cs-canary", "cs-main"} {
			waitItem(t, dyn, ns, "cs-viewers", sees("", "org:cs-next"))
		}
	}
}

// sees checks a view item: built from candidate ("" for the stable source
// itself) and binding group.
func sees(candidate, group string) func(*unstructured.Unstructured) error {
	return func(u *unstructured.Unstructured) error {
		if got := u.GetAnnotations()[v1alpha1.AnnotationCandidate]; got != candidate {
			return fmt.Errorf("built from candidate %q, want %q", got, candidate)
		}
		subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
		if len(subjects) != 1 {
			return fmt.Errorf("subjects %v, want the group %s", subjects, group)
		}
		if name, _, _ := unstructured.NestedString(subjects[0].(map[string]any), "name"); name != group {
			return fmt.Errorf("subject %s, want %s", name, group)
		}
		return nil
	}
}

// canaryCount is the oracle of a report's canaryNamespaces: a fresh list of
// the member's views built from candidate.
func canaryCount(t *testing.T, dyn dynamic.Interface, candidate string) int32 {
	t.Helper()
	l, err := dyn.Resource(viewRoleBindings).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := int32(0)
	for _, it := range l.Items {
		if it.GetAnnotations()[v1alpha1.AnnotationCandidate] == candidate {
			n++
		}
	}
	return n
}

// waitCandidateReport waits for member's report of candidate: in the
// cluster or not, with canaries canary namespaces.
func waitCandidateReport(t *testing.T, member, candidate string, inCluster bool, canaries int32) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, converge, true, func(context.Context) (bool, error) {
		mc := memberCluster(t, member)
		last = fmt.Sprintf("%+v", mc.Status.Candidates)
		for _, c := range mc.Status.Candidates {
			if c.Name == candidate && c.InCluster == inCluster && c.CanaryNamespaces == canaries {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%s's report of %s: %s, want inCluster %v with %d canary namespaces", member, candidate, last, inCluster, canaries)
	}
}

// relabel sets member's registered implicit.dev/cluster-stage, as the
// hub's admin.
func relabel(t *testing.T, hubDyn dynamic.Interface, member, stage string) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"implicit.dev/cluster-stage":%q}}}`, stage))
	if _, err := hubDyn.Resource(fleetv1alpha1.GroupVersionResource).Patch(t.Context(), member, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// hubPlugin runs `kubectl implicit args...` on the hub as its admin, and
// returns its output.
func hubPlugin(t *testing.T, args ...string) string {
	t.Helper()
	dir := pluginDir(t)
	cmd := exec.CommandContext(t.Context(), "kubectl", append([]string{"implicit"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+hub.KubeconfigPath(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl implicit %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// pluginDir builds kubectl-implicit once per test binary.
func pluginDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(work, "plugin")
	if _, err := os.Stat(filepath.Join(dir, "kubectl-implicit")); err == nil {
		return dir
	}
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", filepath.Join(dir, "kubectl-implicit"), "../../cmd/kubectl-implicit")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building kubectl-implicit: %v\n%s", err, out)
	}
	return dir
}

// squeeze collapses runs of blanks, for matching table rows.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }
