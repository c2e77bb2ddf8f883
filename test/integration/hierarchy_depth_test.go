package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// defaultMaxDepth is implicit-apiserver's --max-depth default, which the
// suite's server keeps.
const defaultMaxDepth = 32

// waitForHierarchyEvent waits for a Warning Event of reason on namespace.
func waitForHierarchyEvent(t *testing.T, kube kubernetes.Interface, namespace, reason string) {
	t.Helper()
	eventually(t, reason+" event on "+namespace, func(ctx context.Context) error {
		evs, err := kube.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Namespace,involvedObject.name=" + namespace})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == reason && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("no %s event among %d events", reason, len(evs.Items))
	})
}

// waitForHierarchyLog waits for the server to log a hierarchy problem of
// reason on namespace.
func waitForHierarchyLog(t *testing.T, namespace, reason string) {
	t.Helper()
	eventually(t, reason+" for "+namespace+" in the server's log", func(context.Context) error {
		log, err := os.ReadFile(implicit.LogPath())
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, `"Hierarchy problem"`) && strings.Contains(line, `namespace="`+namespace+`"`) && strings.Contains(line, `reason="`+reason+`"`) {
				return nil
			}
		}
		return errorf("no Hierarchy problem %s logged for %s", reason, namespace)
	})
}

// TestHierarchyDepthCap builds a chain one namespace deeper than the cap:
// the deepest namespace does not inherit from the root, reports
// DepthExceeded, and still sees the global items.
func TestHierarchyDepthCap(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	name := func(i int) string { return fmt.Sprintf("hd-%02d", i) }
	deepest := defaultMaxDepth + 1 // its ancestors are hd-00 .. hd-32: one too many

	t.Logf("a chain %s <- ... <- %s of %d namespaces; %s has %d ancestors, the cap is %d", name(0), name(deepest), deepest+1, name(deepest), deepest, defaultMaxDepth)
	createRoleBinding(t, kube, globalNS, "hd-org-viewers", "view", "org:viewers")
	for i := 0; i <= deepest; i++ {
		var labels map[string]string
		if i > 0 {
			labels = map[string]string{v1alpha1.LabelParent: name(i - 1)}
		}
		createNamespace(t, kube, name(i), labels, nil)
	}
	createRoleBinding(t, kube, name(0), "hd-root", "edit", "root:devs")

	t.Logf("%s, %d levels below the root, inherits from it", name(defaultMaxDepth), defaultMaxDepth)
	waitForView(t, dyn, viewRoleBindings, name(defaultMaxDepth), "hd-", map[string]viewItem{
		"hd-org-viewers": {Scope: "global", Source: globalNS},
		"hd-root":        {Scope: "parent", Source: name(0)},
	})
	t.Logf("%s, one level deeper, does not; the global item is still there", name(deepest))
	waitForView(t, dyn, viewRoleBindings, name(deepest), "hd-", map[string]viewItem{
		"hd-org-viewers": {Scope: "global", Source: globalNS},
	})

	t.Logf("%s's problem is reported: a Warning Event and the log", name(deepest))
	reason := string(merge.ProblemDepthExceeded)
	waitForHierarchyEvent(t, kube, name(deepest), "Hierarchy"+reason)
	waitForHierarchyLog(t, name(deepest), reason)
}

// TestHierarchyParentRecreated deletes a parent and creates a namespace of
// the same name again: its children, whether they record the parent's uid
// or not (labelled before the uid was recorded), don't inherit from the new
// one.
func TestHierarchyParentRecreated(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	createRoleBinding(t, kube, globalNS, "hr-org-viewers", "view", "org:viewers")

	parent := createNamespace(t, kube, "hr-parent", nil, nil)
	createRoleBinding(t, kube, "hr-parent", "hr-team-admins", "admin", "team:admins")
	t.Logf("hr-recorded records hr-parent's uid %s; hr-legacy will have only the label (created after hr-parent)", parent.UID)
	createNamespace(t, kube, "hr-recorded", map[string]string{v1alpha1.LabelParent: "hr-parent"},
		map[string]string{v1alpha1.AnnotationParentUID: string(parent.UID)})
	// hr-legacy stands for a namespace labelled before the parent-uid
	// webhook existed: created after hr-parent, labelled while the guards
	// (validating and mutating) are not registered, so it records no uid and
	// the creation-time rule decides (docs/design.md, "Parent identity").
	legacy := createNamespace(t, kube, "hr-legacy", nil, nil)
	withoutGuards(t, func() {
		err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(t.Context(), controlplane.GuardsConfiguration, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		// Until kube-apiserver has seen the configurations go, the webhook
		// may still record the uid, or the guard refuse its removal: retry.
		eventually(t, "hr-legacy labelled without a recorded uid", func(ctx context.Context) error {
			ns, err := kube.CoreV1().Namespaces().Get(ctx, "hr-legacy", metav1.GetOptions{})
			if err != nil {
				return err
			}
			ns.Labels[v1alpha1.LabelParent] = "hr-parent"
			delete(ns.Annotations, v1alpha1.AnnotationParentUID)
			if ns, err = kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
				return err
			}
			if uid, ok := ns.Annotations[v1alpha1.AnnotationParentUID]; ok {
				return errorf("the parent-uid webhook still recorded %s", uid)
			}
			legacy = ns
			return nil
		})
	})
	inherited := map[string]viewItem{
		"hr-org-viewers": {Scope: "global", Source: globalNS},
		"hr-team-admins": {Scope: "parent", Source: "hr-parent"},
	}
	for _, child := range []string{"hr-recorded", "hr-legacy"} {
		waitForView(t, dyn, viewRoleBindings, child, "hr-", inherited)
	}

	t.Log("deleting hr-parent and waiting until it is gone")
	if err := kube.CoreV1().Namespaces().Delete(t.Context(), "hr-parent", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "hr-parent is gone", func(ctx context.Context) error {
		ns, err := kube.CoreV1().Namespaces().Get(ctx, "hr-parent", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still %s", ns.Status.Phase)
	})

	// creationTimestamps have whole seconds, and a parent created in its
	// child's second counts as older (docs/design.md, "Parent identity").
	eventually(t, "a second after hr-legacy's creation", func(context.Context) error {
		if time.Now().Before(legacy.CreationTimestamp.Add(time.Second)) {
			return errorf("still within hr-legacy's creation second")
		}
		return nil
	})
	t.Log("someone else creates hr-parent again, with a RoleBinding of their own")
	squatted := createNamespace(t, kube, "hr-parent", nil, nil)
	if squatted.UID == parent.UID {
		t.Fatalf("hr-parent was created again with the same uid %s", parent.UID)
	}
	createRoleBinding(t, kube, "hr-parent", "hr-squatter", "admin", "squatter:admins")
	waitForView(t, dyn, viewRoleBindings, "hr-parent", "hr-", map[string]viewItem{
		"hr-org-viewers": {Scope: "global", Source: globalNS},
		"hr-squatter":    {Scope: "local", Source: "hr-parent"},
	})
	for _, child := range []string{"hr-recorded", "hr-legacy"} {
		t.Logf("%s inherits nothing from the new hr-parent, and reports ParentUIDMismatch", child)
		waitForView(t, dyn, viewRoleBindings, child, "hr-", map[string]viewItem{
			"hr-org-viewers": {Scope: "global", Source: globalNS},
		})
		waitForHierarchyEvent(t, kube, child, "Hierarchy"+string(merge.ProblemParentUIDMismatch))
	}
}
