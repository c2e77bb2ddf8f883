package integration

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/internal/offlinegen"
	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/offline"
)

// offlineSeedEnv replays a run of TestOfflineMatchesServer.
const offlineSeedEnv = "IMPLICIT_OFFLINE_SEED"

// TestOfflineMatchesServer: for 20 random hierarchies and edits, what
// pkg/offline (kubectl implicit test and diff --from --to) says of the files
// is what the live server does with them. Each round creates a random
// world object by object, then makes random edits (sources created,
// changed, deleted; parents changed, to missing ones and into cycles;
// exclusions added), as the edits offline.Diff computes between the files,
// in its order. Each edit offline.Diff judges refused must be refused by
// kube-apiserver (its admission webhooks: the guards), and each it judges
// allowed must be admitted; after each step, every namespace's views, as
// offline.Build makes them from the objects admitted, must equal what the
// server serves: names, scope, source namespace, and the items' content
// (conflict annotation, labels, spec, roleRef and subjects).
func TestOfflineMatchesServer(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv(offlineSeedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("%s: %v", offlineSeedEnv, err)
		}
	}
	t.Logf("seed %d (replay with %s=%d)", seed, offlineSeedEnv, seed)
	r := rand.New(rand.NewSource(seed))
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	path := buildPlugin(t)
	var refused, allowed int
	for round := 0; round < 20; round++ {
		prefix := fmt.Sprintf("off%d-%d-", seed%10000, round)
		w := offlinegen.Generate(r, offlinegen.Config{Namespaces: 5, Sources: 12, Names: 4, Prefix: prefix, GlobalNamespace: globalNS})
		t.Cleanup(func() { cleanupRound(dyn, w) })

		// Step 1: the world, object by object, from nothing.
		var state []offline.Object
		state, a, d := offlineStep(t, dyn, prefix, nil, objectsOf(w.Objects()))
		allowed, refused = allowed+a, refused+d
		// Step 2: random edits of what was admitted.
		next := editFiles(r, w, state)
		state, a, d = offlineStep(t, dyn, prefix, state, next)
		allowed, refused = allowed+a, refused+d
		// Step 3: kubectl implicit test, the command, on the admitted
		// files and a test stating every served view of the round.
		pluginTestsLiveViews(t, dyn, path, prefix, state)
	}
	t.Logf("%d edits admitted, %d refused, offline and live alike", allowed, refused)
	if refused == 0 || allowed == 0 {
		t.Errorf("the random edits made %d refusals and %d admissions: both must be exercised", refused, allowed)
	}
}

// offlineStep applies the edits turning from into to, judged offline,
// to the live server in offline.Diff's order, checks each answer, then
// the views, and returns the objects admitted.
func offlineStep(t *testing.T, dyn dynamic.Interface, prefix string, from, to []offline.Object) ([]offline.Object, int, int) {
	t.Helper()
	ctx := t.Context()
	rep, err := offline.Diff(ctx, from, to, offline.Options{}, offline.DiffOptions{ShowData: true})
	if err != nil {
		t.Fatal(err)
	}
	admitted := map[offline.Key]*unstructured.Unstructured{}
	for _, o := range from {
		admitted[offline.KeyOf(o.Unstructured)] = o.Unstructured
	}
	before := liveViews(t, dyn, prefix)
	var allowed, refused int
	for _, e := range rep.Edits {
		liveErr := applyLive(ctx, dyn, e)
		switch {
		case liveErr != nil && !apierrors.IsForbidden(liveErr) && !apierrors.IsInvalid(liveErr):
			t.Fatalf("%s %s: %v", e.Operation, e.Object, liveErr)
		case e.Verdict.Allowed && liveErr != nil:
			t.Errorf("%s %s: offline allowed it (warnings %q); kube-apiserver refused it: %v", e.Operation, e.Object, e.Verdict.Warnings, liveErr)
		case !e.Verdict.Allowed && liveErr == nil:
			t.Errorf("%s %s: offline refused it (%s: %s); kube-apiserver admitted it", e.Operation, e.Object, e.Verdict.Guard, e.Verdict.Reason)
		case !e.Verdict.Allowed:
			refused++
			t.Logf("refused alike: %s %s: %s", e.Operation, e.Object, e.Verdict.Reason)
		default:
			allowed++
		}
		if liveErr == nil && e.Operation != offline.Delete && e.Manifest.GetAnnotations()[v1alpha1.AnnotationLocked] == "true" {
			// The shadows webhook matches the names of locked sources,
			// synced from the mirror about once a second: a shadow sent
			// before that never reaches the guard. Offline knows no
			// such window; the test waits it out, as users' applies do.
			waitShadowCondition(t, gvrOf(e.Manifest).Resource, e.Manifest.GetName())
		}
		if liveErr == nil {
			k := offline.KeyOf(e.Manifest)
			if e.Operation == offline.Delete {
				delete(admitted, k)
			} else {
				admitted[k] = e.Manifest
			}
		}
	}
	var state []offline.Object
	for _, u := range admitted {
		state = append(state, offline.Object{Unstructured: u, From: "admitted"})
	}
	world, err := offline.Build(state, offline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	compareViews(t, dyn, world, prefix)
	if refused == 0 {
		// Every edit was admitted: what diff --from --to reports changing
		// is what changed in the served views.
		got, want := liveChanges(before, liveViews(t, dyn, prefix)), reportedChanges(rep, prefix)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("the views changed by\n  %s\ndiff --from --to reported\n  %s\nthe report's changes: %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "), reportedFields(rep, prefix))
		}
		t.Logf("diff --from --to reported the %d view changes the server made", len(got))
	}
	return state, allowed, refused
}

// liveViews lists the round's namespaces' views, items of the round only:
// "namespace/resource/name" to the item's content.
func liveViews(t *testing.T, dyn dynamic.Interface, prefix string) map[string]string {
	t.Helper()
	nss, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, ns := range nss.Items {
		if !strings.HasPrefix(ns.GetName(), prefix) || ns.GetDeletionTimestamp() != nil {
			continue
		}
		for _, res := range []string{"rolebindings", "networkpolicies"} {
			items, err := listView(t.Context(), dyn, v1alpha1.SchemeGroupVersion.WithResource(res), ns.GetName(), prefix, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for name, u := range items {
				out[ns.GetName()+"/"+res+"/"+name] = viewContent(u)
			}
		}
	}
	return out
}

// liveChanges lists the view items added (+), removed (-) and changed (~)
// between two listings, sorted.
func liveChanges(before, after map[string]string) []string {
	var out []string
	for k, v := range after {
		prev, ok := before[k]
		switch {
		case !ok:
			out = append(out, "+ "+k)
		case prev != v:
			out = append(out, "~ "+k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, "- "+k)
		}
	}
	sort.Strings(out)
	return out
}

// reportedChanges lists a diff report's changes of the round's items as
// liveChanges does.
func reportedChanges(rep offline.Report, prefix string) []string {
	var out []string
	for _, nd := range rep.Namespaces {
		if !strings.HasPrefix(nd.Namespace, prefix) {
			continue
		}
		for _, v := range nd.Views {
			add := func(sign, name string) {
				if strings.HasPrefix(name, prefix) {
					out = append(out, sign+" "+nd.Namespace+"/"+v.Resource+"/"+name)
				}
			}
			for _, it := range v.Added {
				add("+", it.Name)
			}
			for _, it := range v.Removed {
				add("-", it.Name)
			}
			for _, c := range v.Changed {
				add("~", c.After.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}

// reportedFields prints a diff report's changed items with their fields'
// paths and values, for a failure's message.
func reportedFields(rep offline.Report, prefix string) string {
	var b strings.Builder
	for _, nd := range rep.Namespaces {
		if !strings.HasPrefix(nd.Namespace, prefix) {
			continue
		}
		for _, v := range nd.Views {
			for _, c := range v.Changed {
				fmt.Fprintf(&b, "\n  ~ %s/%s/%s %+v -> %+v:", nd.Namespace, v.Resource, c.After.Name, c.Before, c.After)
				for _, f := range c.Fields {
					fmt.Fprintf(&b, " %s (%v -> %v)", f.Path, f.Before, f.After)
				}
			}
		}
	}
	return b.String()
}

// pluginTestsLiveViews writes state's files and an ImplicitTest whose
// expectations are the round's views as the server serves them (every item
// with its scope and source namespace, nothing else), and runs kubectl
// implicit test on them: it must pass.
func pluginTestsLiveViews(t *testing.T, dyn dynamic.Interface, path, prefix string, state []offline.Object) {
	t.Helper()
	dir := t.TempDir()
	var objs []*unstructured.Unstructured
	for _, o := range state {
		objs = append(objs, o.Unstructured)
	}
	if err := offlinegen.WriteFile(dir+"/objects.yaml", objs...); err != nil {
		t.Fatal(err)
	}
	live := liveItems(t, dyn, prefix)
	var views []any
	for _, key := range slices.Sorted(maps.Keys(live)) {
		ns, res, _ := strings.Cut(key, "/")
		views = append(views, map[string]any{"namespace": ns, "resource": res, "contains": live[key], "only": true})
	}
	test := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": offline.TestAPIVersion, "kind": offline.KindTest,
		"metadata": map[string]any{"name": prefix + "live-views"}, "views": views,
	}}
	if err := offlinegen.WriteFile(dir+"/tests/live.yaml", test); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "kubectl", "implicit", "test", dir)
	cmd.Env = append(os.Environ(), "PATH="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("kubectl implicit test on the admitted files, expecting the served views: %v\n%s", err, out)
	}
}

// liveItems lists the round's served views: "namespace/resource" to the
// items (name, scope, source namespace), every round namespace and served
// resource included, empty views too.
func liveItems(t *testing.T, dyn dynamic.Interface, prefix string) map[string][]any {
	t.Helper()
	nss, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]any{}
	for _, ns := range nss.Items {
		if !strings.HasPrefix(ns.GetName(), prefix) || ns.GetDeletionTimestamp() != nil {
			continue
		}
		for _, res := range []string{"rolebindings", "networkpolicies"} {
			items, err := listView(t.Context(), dyn, v1alpha1.SchemeGroupVersion.WithResource(res), ns.GetName(), "", metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			list := []any{}
			for _, name := range slices.Sorted(maps.Keys(items)) {
				if !strings.HasPrefix(name, prefix) {
					continue // another test's, or another round's global item
				}
				l := items[name].GetLabels()
				list = append(list, map[string]any{"name": name, "scope": l[v1alpha1.LabelScope], "sourceNamespace": l[v1alpha1.LabelSourceNamespace]})
			}
			out[ns.GetName()+"/"+res] = list
		}
	}
	return out
}

// waitShadowCondition waits until the shadows webhook matches creations of
// resource named name.
func waitShadowCondition(t *testing.T, resource, name string) {
	t.Helper()
	kube, _ := admin(t)
	eventually(t, "the shadows webhook's match condition names "+resource+"/"+name, func(ctx context.Context) error {
		cfg, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, controlplane.GuardsConfiguration, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, w := range cfg.Webhooks {
			if w.Name != "shadows.implicit.dev" {
				continue
			}
			for _, c := range w.MatchConditions {
				_, rest, ok := strings.Cut(c.Expression, "request.resource.resource == "+strconv.Quote(resource))
				if part, _, _ := strings.Cut(rest, ")"); ok && strings.Contains(part, strconv.Quote(name)) {
					return nil
				}
			}
		}
		return errorf("not yet")
	})
}

// applyLive sends an edit to kube-apiserver as the admin.
func applyLive(ctx context.Context, dyn dynamic.Interface, e offline.JudgedEdit) error {
	u := e.Manifest.DeepCopy()
	ri := dyn.Resource(gvrOf(u)).Namespace(u.GetNamespace())
	switch e.Operation {
	case offline.Create:
		_, err := ri.Create(ctx, u, metav1.CreateOptions{})
		return err
	case offline.Delete:
		return ri.Delete(ctx, u.GetName(), metav1.DeleteOptions{})
	default:
		cur, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		u.SetResourceVersion(cur.GetResourceVersion())
		_, err = ri.Update(ctx, u, metav1.UpdateOptions{})
		return err
	}
}

func gvrOf(u *unstructured.Unstructured) schema.GroupVersionResource {
	gv := u.GroupVersionKind().GroupVersion()
	kind := strings.ToLower(u.GetKind())
	if strings.HasSuffix(kind, "y") {
		return gv.WithResource(strings.TrimSuffix(kind, "y") + "ies")
	}
	return gv.WithResource(kind + "s")
}

// compareViews waits until every namespace of the round's views, as the
// server serves them (items of the round only), equal the offline world's.
func compareViews(t *testing.T, dyn dynamic.Interface, world *offline.World, prefix string) {
	t.Helper()
	for _, ns := range world.Namespaces() {
		if !strings.HasPrefix(ns, prefix) {
			continue
		}
		for _, res := range []string{"rolebindings", "networkpolicies"} {
			items, err := world.View(ns, res)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{}
			for _, it := range items {
				if strings.HasPrefix(it.Name, prefix) {
					want[it.Name] = viewContent(it.Object)
				}
			}
			gvr := v1alpha1.SchemeGroupVersion.WithResource(res)
			var mismatch error
			eventually(t, fmt.Sprintf("%s's view of %s equals the offline one", ns, res), func(ctx context.Context) error {
				live, err := listView(ctx, dyn, gvr, ns, prefix, metav1.ListOptions{})
				if err != nil && mismatch != nil {
					return mismatch // the deadline: say what differed
				}
				if err != nil {
					return err
				}
				got := map[string]string{}
				for name, u := range live {
					got[name] = viewContent(u)
				}
				if !reflect.DeepEqual(got, want) {
					mismatch = fmt.Errorf("\nlive    %s\noffline %s", describeContent(got), describeContent(want))
					return mismatch
				}
				return nil
			})
		}
	}
}

// viewContent is what a view item shows: labels (scope, source namespace),
// annotations (conflict, lock, overlays, candidate; not the source's uid or
// version), and every field but metadata. It must judge a change as
// offline.Diff does: a narrower content made the test blame the diff for an
// overlays annotation the server did change.
func viewContent(u *unstructured.Unstructured) string {
	c := map[string]any{}
	for k, v := range u.Object {
		if k != "metadata" && k != "apiVersion" && k != "kind" {
			c[k] = v
		}
	}
	c["labels"] = u.GetLabels()
	// Every annotation counts (the conflict, the lock, the overlays merged
	// on top, the candidate, the source's own) but the two whose values name
	// one build's objects: offline has no uids or versions of its own.
	ann := map[string]string{}
	for k, v := range u.GetAnnotations() {
		if k != v1alpha1.AnnotationSourceUID && k != v1alpha1.AnnotationSourceResourceVersion {
			ann[k] = v
		}
	}
	c["annotations"] = ann
	return fmt.Sprint(c)
}

func describeContent(m map[string]string) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "\n  %s: %s", n, m[n])
	}
	return b.String()
}

// editFiles makes three random edits of state's files: the objects as
// the files would state them after a pull request. A RoleBinding changed
// keeps its roleRef (immutable: kube-apiserver refuses that before any
// guard is asked); one deleted and made again among the three edits may
// not, and offline refuses that UPDATE as kube-apiserver does.
func editFiles(r *rand.Rand, w offlinegen.World, state []offline.Object) []offline.Object {
	files := map[offline.Key]*unstructured.Unstructured{}
	for _, o := range state {
		files[offline.KeyOf(o.Unstructured)] = o.Unstructured
	}
	for i := 0; i < 3; i++ {
		obj, deleted := w.Edit(r)
		k := offline.KeyOf(obj)
		if deleted {
			delete(files, k)
			continue
		}
		if prev, ok := files[k]; ok && k.Kind == "RoleBinding" {
			obj.Object["roleRef"] = prev.Object["roleRef"]
		}
		files[k] = obj
	}
	var out []offline.Object
	for _, u := range files {
		out = append(out, offline.Object{Unstructured: u, From: "edited"})
	}
	return out
}

func objectsOf(us []*unstructured.Unstructured) []offline.Object {
	out := make([]offline.Object, len(us))
	for i, u := range us {
		out[i] = offline.Object{Unstructured: u, From: "generated"}
	}
	return out
}

// cleanupRound deletes a round's global sources (those its edits created
// too) and namespaces.
func cleanupRound(dyn dynamic.Interface, w offlinegen.World) {
	ctx := context.Background()
	for _, gvr := range []schema.GroupVersionResource{
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
		{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
	} {
		list, err := dyn.Resource(gvr).Namespace(w.GlobalNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		for _, it := range list.Items {
			if strings.HasPrefix(it.GetName(), w.Prefix) {
				_ = dyn.Resource(gvr).Namespace(w.GlobalNamespace).Delete(ctx, it.GetName(), metav1.DeleteOptions{})
			}
		}
	}
	for _, ns := range w.Namespaces {
		_ = dyn.Resource(gvrOf(ns)).Delete(ctx, ns.GetName(), metav1.DeleteOptions{})
	}
}

// TestOfflineOverlayConfiguredKind: the suite's Guardrail kind, configured
// with the Overlay strategy, merges offline (the schema of its
// CustomResourceDefinition, as kube-apiserver publishes it) as the live
// server merges it (the host's OpenAPI): a dev overlay adds a rule and
// changes the action of one global guardrail, and can't change a locked
// one's action; both views' content equal.
func TestOfflineOverlayConfiguredKind(t *testing.T) {
	kube, dyn := admin(t)
	ctx := t.Context()
	ensureNamespace(t, kube, globalNS)
	crd, err := dyn.Resource(testfixture.CRDs).Get(ctx, testfixture.GuardrailCRD(false).GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Kept for the rest of the suite, as TestConfiguredKindOverlay keeps it.
		crd, err = dyn.Resource(testfixture.CRDs).Create(ctx, testfixture.GuardrailCRD(false), metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	const dev = "offov-dev"
	createNamespace(t, kube, dev, nil, nil)
	eventually(t, "guardrails.implicit.dev is served", func(ctx context.Context) error {
		_, err := dyn.Resource(testfixture.GuardrailViews).Namespace(dev).List(ctx, metav1.ListOptions{})
		return err
	})
	objs := []*unstructured.Unstructured{
		testfixture.Guardrail(globalNS, "offov-baseline", false, map[string]any{"action": "Enforce", "rules": testfixture.GuardrailRules("a", "b")}),
		testfixture.Guardrail(globalNS, "offov-locked", true, map[string]any{"action": "Enforce", "rules": testfixture.GuardrailRules("a")}),
		testfixture.Guardrail(dev, "offov-baseline", false, map[string]any{"action": "Audit", "rules": testfixture.GuardrailRules("c")}),
		testfixture.Guardrail(dev, "offov-locked", false, map[string]any{"action": "Audit", "rules": testfixture.GuardrailRules("d")}),
	}
	for _, u := range objs {
		if _, err := dyn.Resource(testfixture.Guardrails).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating guardrail %s/%s: %v", u.GetNamespace(), u.GetName(), err)
		}
		t.Cleanup(func() {
			_ = dyn.Resource(testfixture.Guardrails).Namespace(u.GetNamespace()).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
		})
	}

	config, err := os.ReadFile("testdata/implicit-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files, err := offline.Decode([]offline.File{{Path: "implicit-config.yaml", Data: config}})
	if err != nil {
		t.Fatal(err)
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": dev}}}
	files = append(files, objectsOf(append([]*unstructured.Unstructured{crd, ns}, objs...))...)
	world, err := offline.Build(files, offline.Options{GlobalNamespace: globalNS})
	if err != nil {
		t.Fatal(err)
	}
	items, err := world.View(dev, "guardrails")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, it := range items {
		if strings.HasPrefix(it.Name, "offov-") {
			want[it.Name] = viewContent(it.Object)
		}
	}
	if len(want) != 2 || !strings.Contains(want["offov-baseline"], "Audit") || !strings.Contains(want["offov-locked"], "spec.action") {
		t.Fatalf("offline view of %s: %s\nwant both guardrails, the baseline overlaid (Audit), the locked one's action kept (a conflict on spec.action)", dev, describeContent(want))
	}
	var mismatch error
	eventually(t, "the live guardrails view equals the offline one", func(ctx context.Context) error {
		live, err := listView(ctx, dyn, testfixture.GuardrailViews, dev, "offov-", metav1.ListOptions{})
		if err != nil && mismatch != nil {
			return mismatch
		}
		if err != nil {
			return err
		}
		got := map[string]string{}
		for name, u := range live {
			got[name] = viewContent(u)
		}
		if !reflect.DeepEqual(got, want) {
			mismatch = fmt.Errorf("\nlive    %s\noffline %s", describeContent(got), describeContent(want))
			return mismatch
		}
		return nil
	})
}
