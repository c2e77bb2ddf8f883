package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// candidateOf makes a RoleBinding a candidate for the stable binding forName,
// seen by the namespaces selector selects.
func candidateOf(forName, selector string) rbOpt {
	return func(rb *rbacv1.RoleBinding) {
		if rb.Annotations == nil {
			rb.Annotations = map[string]string{}
		}
		rb.Annotations[v1alpha1.AnnotationCandidateFor] = forName
		rb.Annotations[v1alpha1.AnnotationCanarySelector] = selector
	}
}

// stageOf labels a namespace's stage.
func stageOf(stage string) map[string]string { return map[string]string{v1alpha1.LabelStage: stage} }

// rbVersion is what a namespace's view shows of one RoleBinding name: the
// group it binds and the candidate it comes from ("" the stable source);
// absent when the view has no item of that name.
type rbVersion struct {
	absent    bool
	group     string
	candidate string
	uid       string // the source uid the item names (implicit.dev/source-uid)
}

func (v rbVersion) String() string {
	switch {
	case v.absent:
		return "absent"
	case v.candidate != "":
		return v.group + " (candidate " + v.candidate + ")"
	}
	return v.group + " (stable)"
}

func viewVersion(ctx context.Context, dyn dynamic.Interface, namespace, name string) (rbVersion, error) {
	u, err := dyn.Resource(viewRoleBindings).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return rbVersion{absent: true}, nil
	}
	if err != nil {
		return rbVersion{}, err
	}
	return versionOf(u), nil
}

func versionOf(u *unstructured.Unstructured) rbVersion {
	v := rbVersion{candidate: u.GetAnnotations()[v1alpha1.AnnotationCandidate], uid: u.GetAnnotations()[v1alpha1.AnnotationSourceUID]}
	subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
	var groups []string
	for _, s := range subjects {
		if m, ok := s.(map[string]any); ok {
			groups = append(groups, fmt.Sprint(m["name"]))
		}
	}
	v.group = strings.Join(groups, ",")
	return v
}

// waitForVersions waits until each namespace's view of name is want's.
func waitForVersions(t *testing.T, dyn dynamic.Interface, what, name string, want map[string]rbVersion) {
	t.Helper()
	eventually(t, what, func(ctx context.Context) error {
		for ns, w := range want {
			got, err := viewVersion(ctx, dyn, ns, name)
			if err != nil {
				return err
			}
			if got.absent != w.absent || got.group != w.group || got.candidate != w.candidate {
				return errorf("%s: %s is %s, want %s", ns, name, got, w)
			}
		}
		return nil
	})
}

// nsWatches watches one view name in each of namespaces, from the
// resourceVersion of a list.
type nsWatches map[string]watch.Interface

func watchName(t *testing.T, dyn dynamic.Interface, name string, namespaces ...string) nsWatches {
	t.Helper()
	out := nsWatches{}
	for _, ns := range namespaces {
		c := dyn.Resource(viewRoleBindings).Namespace(ns)
		opts := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
		l, err := c.List(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		opts.ResourceVersion = l.GetResourceVersion()
		w, err := c.Watch(t.Context(), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		out[ns] = w
	}
	return out
}

// expect reads each watch: namespaces in want get exactly their events (in
// order, the version each shows), the others none, within a quiet period
// after the last expected one.
func (ws nsWatches) expect(t *testing.T, step string, want map[string][]string) {
	t.Helper()
	ws.expectDescribed(t, step, want, func(u *unstructured.Unstructured) string { return versionOf(u).String() })
}

// expectDescribed is expect with each event described as its type and
// describe of its object.
func (ws nsWatches) expectDescribed(t *testing.T, step string, want map[string][]string, describe func(*unstructured.Unstructured) string) {
	t.Helper()
	got := map[string][]string{}
	// One select over every watch, the deadline and, once every wanted
	// event came, the quiet window: anything more within a second and a
	// half is an extra event.
	names := slices.Sorted(maps.Keys(ws))
	cases := make([]reflect.SelectCase, len(names), len(names)+2)
	for i, ns := range names {
		cases[i] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ws[ns].ResultChan())}
	}
	deadline := time.NewTimer(converge)
	defer deadline.Stop()
	var quiet <-chan time.Time
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline.C)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(quiet)})
	for {
		complete := true
		for ns, w := range want {
			if len(got[ns]) < len(w) {
				complete = false
			}
		}
		if complete && quiet == nil {
			quiet = time.After(1500 * time.Millisecond)
			cases[len(names)+1].Chan = reflect.ValueOf(quiet)
		}
		i, v, ok := reflect.Select(cases)
		if i == len(names)+1 {
			break // quiet
		}
		if i == len(names) {
			t.Fatalf("%s: events %v, want %v (not all within %s)", step, got, want, converge)
		}
		ns := names[i]
		if !ok {
			t.Fatalf("%s: the watch of %s ended", step, ns)
		}
		e := v.Interface().(watch.Event)
		if e.Type == watch.Error {
			t.Fatalf("%s: error event in %s: %v", step, ns, apierrors.FromObject(e.Object))
		}
		desc := string(e.Type)
		if u, ok := e.Object.(*unstructured.Unstructured); ok {
			desc += " " + describe(u)
		}
		got[ns] = append(got[ns], desc)
	}
	for ns := range ws {
		if !slices.Equal(got[ns], want[ns]) {
			t.Errorf("%s: %s got %q, want %q", step, ns, got[ns], want[ns])
		}
	}
	t.Logf("%s: events %v", step, got)
}

// TestStagedRollout stages a change of a global RoleBinding through
// kube-apiserver: a candidate whose canary selector matches two of five
// tenants, who see its subjects (and are granted by them) while the others
// keep the stable ones; the selector widened to every tenant, the candidate
// promoted, a new candidate aborted, with exactly one MODIFIED where a
// namespace's version changed and none elsewhere; the guards' refusals; a
// candidate of a parent's source staying in the parent's subtree; a staged
// creation.
func TestStagedRollout(t *testing.T) {
	kube, dyn := admin(t)
	ctx := t.Context()
	ensureNamespace(t, kube, globalNS)
	tenants := []string{"st-a", "st-b", "st-c", "st-d", "st-e"}
	for _, ns := range tenants[:2] {
		createNamespace(t, kube, ns, stageOf("canary"), nil)
	}
	for _, ns := range tenants[2:] {
		createNamespace(t, kube, ns, nil, nil)
	}

	t.Log("st-bind grants view to st:stable everywhere; its candidate st-bind.next, to st:canary, selects implicit.dev/stage=canary (st-a, st-b)")
	stable := createRoleBinding(t, kube, globalNS, "st-bind", "view", "st:stable")
	createRoleBinding(t, kube, globalNS, "st-bind.next", "view", "st:canary", candidateOf("st-bind", v1alpha1.LabelStage+"=canary"))
	canary := rbVersion{group: "st:canary", candidate: "st-bind.next"}
	stableV := rbVersion{group: "st:stable"}
	waitForVersions(t, dyn, "the two canaries see the candidate, the others the stable version", "st-bind", map[string]rbVersion{
		"st-a": canary, "st-b": canary, "st-c": stableV, "st-d": stableV, "st-e": stableV,
	})
	for _, ns := range tenants {
		if v, err := viewVersion(ctx, dyn, ns, "st-bind.next"); err != nil || !v.absent {
			t.Errorf("%s's view has the candidate under its own name (%v, %v)", ns, v, err)
		}
		// A view item's own uid is the namespace's (derived from the
		// source's); the source it names stays the stable one whichever
		// version the namespace sees, so switching versions is a MODIFIED.
		if v, err := viewVersion(ctx, dyn, ns, "st-bind"); err != nil || v.uid != string(stable.UID) {
			t.Errorf("%s: st-bind names source uid %q (%v), want the stable source's %s", ns, v.uid, err, stable.UID)
		}
	}

	t.Log("enforcement follows the view: kubectl auth can-i for the candidate's subject is yes exactly in the canaries")
	for _, ns := range tenants {
		canaryNS := ns == "st-a" || ns == "st-b"
		azExpectCan(t, canaryNS, "st-carol", []string{"st:canary"}, "list", "pods", ns)
		azExpectCan(t, !canaryNS, "st-sam", []string{"st:stable"}, "list", "pods", ns)
	}

	t.Log("the guards: a second candidate, a selector on another key, a roleRef change, a locked source's candidate without unlock")
	second := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "st-bind.other", Namespace: globalNS},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "st:other"}},
	}
	candidateOf("st-bind", v1alpha1.LabelStage+"=canary")(second)
	expectRefused(t, "a second candidate for st-bind", func() error {
		_, err := kube.RbacV1().RoleBindings(globalNS).Create(ctx, second, metav1.CreateOptions{})
		return err
	}, "st-bind.next")
	otherKey := second.DeepCopy()
	otherKey.Name = "st-other.next"
	candidateOf("st-other", "team=a")(otherKey)
	expectRefused(t, "a selector on another key", func() error {
		_, err := kube.RbacV1().RoleBindings(globalNS).Create(ctx, otherKey, metav1.CreateOptions{})
		return err
	}, "team")
	newRef := second.DeepCopy()
	newRef.Name = "st-ref.next"
	newRef.RoleRef.Name = "edit"
	candidateOf("st-ref", v1alpha1.LabelStage+"=canary")(newRef)
	createRoleBinding(t, kube, globalNS, "st-ref", "view", "st:ref")
	expectRefused(t, "a candidate changing roleRef", func() error {
		_, err := kube.RbacV1().RoleBindings(globalNS).Create(ctx, newRef, metav1.CreateOptions{})
		return err
	}, "roleRef")
	createRoleBinding(t, kube, globalNS, "st-locked", "view", "st:locked", locked)
	createRoleBinding(t, kube, globalNS, "st-releasers", "admin", "st:releasers")
	releaser := kubernetes.NewForConfigOrDie(mustUserConfig(t, "st-rita", "st:releasers"))
	lockedNext := second.DeepCopy()
	lockedNext.Name = "st-locked.next"
	candidateOf("st-locked", v1alpha1.LabelStage+"=canary")(lockedNext)
	expectRefused(t, "a candidate of a locked source, without unlock", func() error {
		_, err := releaser.RbacV1().RoleBindings(globalNS).Create(ctx, lockedNext, metav1.CreateOptions{})
		return err
	}, "unlock")

	t.Log("a tenant with admin in st-c (and update on the namespace object) may not set st-c's stage")
	tenant := newAttacker(t, kube, "st-tina", "st-c")
	expectRefused(t, "the tenant labels its own stage", func() error {
		_, err := tenant.kube.CoreV1().Namespaces().Patch(ctx, "st-c", types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"`+v1alpha1.LabelStage+`":"canary"}}}`), metav1.PatchOptions{})
		return err
	}, "stage")

	ws := watchName(t, dyn, "st-bind", tenants...)
	t.Log("the selector widened to canary and late: only the candidate's own namespaces change (its version moved)")
	stPatch(t, patchRoleBinding(ctx, kube, globalNS, "st-bind.next", map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		v1alpha1.AnnotationCanarySelector: v1alpha1.LabelStage + " in (canary,late)"}}}))
	ws.expect(t, "selector widened", map[string][]string{
		"st-a": {"MODIFIED " + canary.String()}, "st-b": {"MODIFIED " + canary.String()},
	})
	t.Log("st-c, st-d and st-e join stage late, one MODIFIED each")
	for _, ns := range tenants[2:] {
		labelNamespace(t, kube, ns, v1alpha1.LabelStage, "late")
	}
	ws.expect(t, "three namespaces join", map[string][]string{
		"st-c": {"MODIFIED " + canary.String()}, "st-d": {"MODIFIED " + canary.String()}, "st-e": {"MODIFIED " + canary.String()},
	})

	t.Log("promotion: the candidate's subjects into st-bind (no namespace sees st-bind's stable version now: no event), then the candidate deleted (every namespace back on st-bind, now with st:canary)")
	stPatch(t, patchRoleBinding(ctx, kube, globalNS, "st-bind", map[string]any{"subjects": []any{map[string]any{
		"apiGroup": rbacv1.GroupName, "kind": rbacv1.GroupKind, "name": "st:canary"}}}))
	ws.expect(t, "stable source updated under the candidate", map[string][]string{})
	if err := kube.RbacV1().RoleBindings(globalNS).Delete(ctx, "st-bind.next", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	promoted := rbVersion{group: "st:canary"}
	want := map[string][]string{}
	for _, ns := range tenants {
		want[ns] = []string{"MODIFIED " + promoted.String()}
	}
	ws.expect(t, "candidate deleted after promotion", want)

	t.Log("a new candidate for stage canary only, then aborted: st-a and st-b switch and switch back; the others never move")
	for _, ns := range tenants[2:] {
		labelNamespace(t, kube, ns, v1alpha1.LabelStage, "")
	}
	ws.expect(t, "stage labels removed (everyone on the stable version already)", map[string][]string{})
	createRoleBinding(t, kube, globalNS, "st-bind.v3", "view", "st:v3", candidateOf("st-bind", v1alpha1.LabelStage+"=canary"))
	v3 := rbVersion{group: "st:v3", candidate: "st-bind.v3"}
	ws.expect(t, "new candidate", map[string][]string{"st-a": {"MODIFIED " + v3.String()}, "st-b": {"MODIFIED " + v3.String()}})
	adm := pluginUser{t: t, name: "admin", path: buildPlugin(t), kubeconfig: cp.KubeconfigPath(), home: t.TempDir()}
	adm.expect(0, func(r pluginRun) error {
		var st struct {
			CandidateCount int `json:"candidateCount"`
			Namespaces     []struct {
				Namespace string `json:"namespace"`
				Version   string `json:"version"`
			} `json:"namespaces"`
		}
		if err := decode(r, &st); err != nil {
			return err
		}
		var on []string
		for _, n := range st.Namespaces {
			if strings.HasPrefix(n.Namespace, "st-") && n.Version == "candidate" {
				on = append(on, n.Namespace)
			}
		}
		slices.Sort(on)
		if !slices.Equal(on, []string{"st-a", "st-b"}) {
			return errorf("namespaces on the candidate %v, want st-a and st-b", on)
		}
		return nil
	}, "rollout", "status", "rolebinding", "st-bind", "-n", globalNS, "-o", "json", "--watch=false")
	adm.expect(0, nil, "rollout", "abort", "rolebinding", "st-bind", "-n", globalNS)
	ws.expect(t, "aborted with kubectl implicit rollout abort", map[string][]string{"st-a": {"MODIFIED " + promoted.String()}, "st-b": {"MODIFIED " + promoted.String()}})

	t.Log("a candidate of a parent's source stays in the parent's subtree")
	createNamespace(t, kube, "st-org", stageOf("canary"), nil)
	createNamespace(t, kube, "st-kid", map[string]string{v1alpha1.LabelParent: "st-org", v1alpha1.LabelStage: "canary"}, nil)
	createNamespace(t, kube, "st-kid2", map[string]string{v1alpha1.LabelParent: "st-org"}, nil)
	createRoleBinding(t, kube, "st-org", "st-org-bind", "view", "st:org")
	createRoleBinding(t, kube, "st-org", "st-org-bind.next", "view", "st:org-next", candidateOf("st-org-bind", v1alpha1.LabelStage+"=canary"))
	waitForVersions(t, dyn, "st-kid sees the parent's candidate, st-kid2 its stable source, st-a (a canary outside the subtree) neither", "st-org-bind", map[string]rbVersion{
		"st-kid":  {group: "st:org-next", candidate: "st-org-bind.next"},
		"st-kid2": {group: "st:org"},
		"st-a":    {absent: true},
	})
	waitForVersions(t, dyn, "st-org's own view shows both of its real objects under their own names", "st-org-bind.next", map[string]rbVersion{
		"st-org": {group: "st:org-next"}, "st-kid": {absent: true},
	})

	t.Log("a staged creation: st-new does not exist; its candidate st-new.next reaches the canaries only")
	createRoleBinding(t, kube, globalNS, "st-new.next", "view", "st:new", candidateOf("st-new", v1alpha1.LabelStage+"=canary"))
	waitForVersions(t, dyn, "the canaries see st-new, the others nothing", "st-new", map[string]rbVersion{
		"st-a": {group: "st:new", candidate: "st-new.next"}, "st-b": {group: "st:new", candidate: "st-new.next"},
		"st-c": {absent: true}, "st-d": {absent: true},
	})
}

// expectRefused fails the test unless do is refused by a guard with a
// message containing each of want.
func expectRefused(t *testing.T, what string, do func() error, want ...string) {
	t.Helper()
	err := do()
	if err == nil {
		t.Errorf("%s: allowed, want refused", what)
		return
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
		t.Errorf("%s: %v, want a refusal", what, err)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %v, want it to name %q", what, err, w)
		}
	}
	t.Logf("%s: refused: %v", what, err)
}

func mustUserConfig(t *testing.T, user string, groups ...string) *rest.Config {
	t.Helper()
	cfg, err := cp.UserConfig(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// labelNamespace sets (or, with "", removes) one label of a namespace as admin.
func labelNamespace(t *testing.T, kube kubernetes.Interface, namespace, key, value string) {
	t.Helper()
	var v any = value
	if value == "" {
		v = nil
	}
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: v}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Patch(t.Context(), namespace, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		t.Fatalf("labelling namespace %s: %v", namespace, err)
	}
}

// stPatch fails the test on a patch's error.
func stPatch(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("patch: %v", err)
	}
}
