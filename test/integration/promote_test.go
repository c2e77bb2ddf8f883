package integration

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestPromoteKeepsStableLock promotes, with kubectl implicit rollout
// promote, the candidate of a locked global RoleBinding labelled tier=org
// whose candidate repeats neither the lock nor the label (issue 24, item 3):
// the source keeps its lock, for every namespace at once, and its own label;
// it takes the candidate's subjects and the candidate's own label.
func TestPromoteKeepsStableLock(t *testing.T) {
	kube, dyn := admin(t)
	ctx := t.Context()
	ensureNamespace(t, kube, globalNS)
	createNamespace(t, kube, "pk-a", stageOf("canary"), nil)
	createNamespace(t, kube, "pk-b", nil, nil)

	t.Log("pk-bind: locked, tier=org, binds pk:stable; its candidate pk-bind.next binds pk:next, labelled release=next, with no lock annotation")
	createRoleBinding(t, kube, globalNS, "pk-bind", "view", "pk:stable", locked, withLabel("tier", "org"))
	createRoleBinding(t, kube, globalNS, "pk-bind.next", "view", "pk:next",
		candidateOf("pk-bind", v1alpha1.LabelStage+"=canary"), withLabel("release", "next"))
	waitForVersions(t, dyn, "the canary sees the candidate, the other the stable version", "pk-bind", map[string]rbVersion{
		"pk-a": {group: "pk:next", candidate: "pk-bind.next"}, "pk-b": {group: "pk:stable"},
	})

	adm := pluginUser{t: t, name: "admin", path: buildPlugin(t), kubeconfig: cp.KubeconfigPath(), home: t.TempDir()}
	adm.expect(0, nil, "rollout", "promote", "rolebinding", "pk-bind", "-n", globalNS)

	t.Log("the source holds the candidate's subjects and is still locked, tier=org beside release=next")
	rb, err := kube.RbacV1().RoleBindings(globalNS).Get(ctx, "pk-bind", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rb.Subjects) != 1 || rb.Subjects[0].Name != "pk:next" {
		t.Errorf("promoted subjects %v, want the candidate's pk:next", rb.Subjects)
	}
	if got := rb.Annotations[v1alpha1.AnnotationLocked]; got != "true" {
		t.Errorf("promoted source's %s is %q, want \"true\": the promotion unlocked it (annotations %v)", v1alpha1.AnnotationLocked, got, rb.Annotations)
	}
	for k, want := range map[string]string{"tier": "org", "release": "next"} {
		if got := rb.Labels[k]; got != want {
			t.Errorf("promoted source's label %s is %q, want %q (labels %v)", k, got, want, rb.Labels)
		}
	}
	for _, k := range []string{v1alpha1.AnnotationCandidateFor, v1alpha1.AnnotationCanarySelector} {
		if _, ok := rb.Annotations[k]; ok {
			t.Errorf("promoted source carries the candidate annotation %s", k)
		}
	}

	t.Log("every namespace sees the promoted binding, locked")
	waitForVersions(t, dyn, "both namespaces on the promoted version", "pk-bind", map[string]rbVersion{
		"pk-a": {group: "pk:next"}, "pk-b": {group: "pk:next"},
	})
	eventually(t, "pk-b's item of pk-bind is locked", func(ctx context.Context) error {
		u, err := dyn.Resource(viewRoleBindings).Namespace("pk-b").Get(ctx, "pk-bind", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := u.GetAnnotations()[v1alpha1.AnnotationLocked]; got != "true" {
			return errorf("pk-b's pk-bind has %s %q, want \"true\"", v1alpha1.AnnotationLocked, got)
		}
		return nil
	})
}

// TestPromoteStagedCreationEvents pins the watch events of a staged
// creation's promotion with kubectl implicit rollout promote (issue 24,
// item 9; docs/design.md, "Staged rollout"): the create gives each canary
// one MODIFIED (the item, still the candidate's content and annotated with
// it, takes the created source's uid) and every other namespace an ADDED;
// the candidate's delete gives each canary a second MODIFIED (the item now
// built from the source), and the others nothing.
func TestPromoteStagedCreationEvents(t *testing.T) {
	kube, dyn := admin(t)
	ctx := t.Context()
	ensureNamespace(t, kube, globalNS)
	createNamespace(t, kube, "pc-a", stageOf("canary"), nil)
	createNamespace(t, kube, "pc-b", nil, nil)

	t.Log("pc-new does not exist; its candidate pc-new.next reaches the canary pc-a only")
	cand := createRoleBinding(t, kube, globalNS, "pc-new.next", "view", "pc:new", candidateOf("pc-new", v1alpha1.LabelStage+"=canary"))
	t.Cleanup(func() {
		err := kube.RbacV1().RoleBindings(globalNS).Delete(context.Background(), "pc-new", metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting rolebinding %s/pc-new: %v", globalNS, err)
		}
	})
	waitForVersions(t, dyn, "the canary sees pc-new from the candidate, the other nothing", "pc-new", map[string]rbVersion{
		"pc-a": {group: "pc:new", candidate: "pc-new.next"}, "pc-b": {absent: true},
	})
	ws := watchName(t, dyn, "pc-new", "pc-a", "pc-b")

	adm := pluginUser{t: t, name: "admin", path: buildPlugin(t), kubeconfig: cp.KubeconfigPath(), home: t.TempDir()}
	adm.expect(0, nil, "rollout", "promote", "rolebinding", "pc-new", "-n", globalNS)
	created, err := kube.RbacV1().RoleBindings(globalNS).Get(ctx, "pc-new", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// An event names the source its item comes from by uid.
	source := map[string]string{string(cand.UID): "candidate's uid", string(created.UID): "created source's uid"}
	ws.expectDescribed(t, "a staged creation promoted", map[string][]string{
		"pc-a": {
			"MODIFIED pc:new (candidate pc-new.next), created source's uid",
			"MODIFIED pc:new (stable), created source's uid",
		},
		"pc-b": {"ADDED pc:new (stable), created source's uid"},
	}, func(u *unstructured.Unstructured) string {
		v := versionOf(u)
		name, ok := source[v.uid]
		if !ok {
			name = "uid " + v.uid
		}
		return v.String() + ", " + name
	})
}
