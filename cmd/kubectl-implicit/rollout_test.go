package main

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

const globalNS = "implicit-global"

var (
	rbSource = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
	npSource = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
)

// newFake is a fake dynamic client that checks what the server checks of a
// rollout's writes: an update's resourceVersion and a delete's uid
// precondition (the fake's tracker checks neither).
func newFake(t *testing.T, objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	t.Helper()
	c := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		rbSource: "RoleBindingList", npSource: "NetworkPolicyList",
		gvr("rolebindings"): "RoleBindingList", gvr("networkpolicies"): "NetworkPolicyList",
		fleetv1alpha1.GroupVersionResource: "MemberClusterList",
	}, objs...)
	tracker := c.Tracker()
	current := func(a clienttesting.Action, name string) (metav1.Object, error) {
		cur, err := tracker.Get(a.GetResource(), a.GetNamespace(), name)
		if err != nil {
			return nil, err
		}
		return meta.Accessor(cur)
	}
	c.PrependReactor("update", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured)
		cur, err := current(a, obj.GetName())
		if err != nil {
			return true, nil, err
		}
		if rv := obj.GetResourceVersion(); rv != "" && rv != cur.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), obj.GetName(), errors.New("the object has been modified"))
		}
		if isDryRun(a) {
			return true, served(obj), nil
		}
		return false, nil, nil
	})
	c.PrependReactor("create", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if isDryRun(a) {
			return true, served(a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured)), nil
		}
		return false, nil, nil
	})
	c.PrependReactor("delete", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		d := a.(clienttesting.DeleteAction)
		cur, err := current(a, d.GetName())
		if err != nil {
			return true, nil, err
		}
		if p := d.GetDeleteOptions().Preconditions; p != nil && p.UID != nil && *p.UID != cur.GetUID() {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), d.GetName(), errors.New("the UID in the precondition does not match"))
		}
		if p := d.GetDeleteOptions().Preconditions; p != nil && p.ResourceVersion != nil && *p.ResourceVersion != cur.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), d.GetName(), errors.New("the ResourceVersion in the precondition does not match"))
		}
		if isDryRun(a) {
			return true, nil, nil
		}
		return false, nil, nil
	})
	return c
}

// isDryRun reports whether a is a server dry run: the fake then stores nothing.
func isDryRun(a clienttesting.Action) bool {
	var dryRun []string
	switch a := a.(type) {
	case clienttesting.CreateActionImpl:
		dryRun = a.CreateOptions.DryRun
	case clienttesting.UpdateActionImpl:
		dryRun = a.UpdateOptions.DryRun
	case clienttesting.DeleteActionImpl:
		dryRun = a.DeleteOptions.DryRun
	}
	return len(dryRun) == 1 && dryRun[0] == metav1.DryRunAll
}

// served is obj as a server answers it: with managedFields.
func served(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := obj.DeepCopy()
	out.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl-implicit", Operation: metav1.ManagedFieldsOperationUpdate}})
	return out
}

func object(apiVersion, kind, ns, name string, uid types.UID, rv string, annotations map[string]string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range fields {
		u.Object[k] = runtime.DeepCopyJSONValue(v)
	}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(uid)
	u.SetResourceVersion(rv)
	if annotations != nil {
		u.SetAnnotations(annotations)
	}
	return u
}

func subjects(names ...string) []any {
	var out []any
	for _, n := range names {
		out = append(out, map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": n})
	}
	return out
}

func roleRef(name string) map[string]any {
	return map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}
}

func binding(name string, uid types.UID, rv string, annotations map[string]string, ref string, subs ...string) *unstructured.Unstructured {
	return object("rbac.authorization.k8s.io/v1", "RoleBinding", globalNS, name, uid, rv, annotations,
		map[string]any{"roleRef": roleRef(ref), "subjects": subjects(subs...)})
}

func candidateAnnotations(forName string, extra ...string) map[string]string {
	a := map[string]string{v1alpha1.AnnotationCandidateFor: forName, v1alpha1.AnnotationCanarySelector: v1alpha1.LabelStage + "=canary"}
	for i := 0; i+1 < len(extra); i += 2 {
		a[extra[i]] = extra[i+1]
	}
	return a
}

// viewItem is namespace ns's view item of org-viewers: from sourceNS,
// overlaid by overlays, built from candidate ("" for none).
func viewItem(ns, sourceNS, overlays, candidate string) *unstructured.Unstructured {
	u := object("implicit.dev/v1alpha1", "RoleBinding", ns, "org-viewers", "stable-uid", "1", nil, nil)
	u.SetLabels(map[string]string{v1alpha1.LabelSourceNamespace: sourceNS, v1alpha1.LabelScope: "global"})
	a := map[string]string{}
	if overlays != "" {
		a[v1alpha1.AnnotationOverlays] = overlays
	}
	if candidate != "" {
		a[v1alpha1.AnnotationCandidate] = candidate
	}
	u.SetAnnotations(a)
	return u
}

func rbRollout(dyn *dynamicfake.FakeDynamicClient, name string) *rollout {
	return &rollout{dyn: dyn, source: rbSource, view: "rolebindings", namespace: globalNS, name: name}
}

func TestRolloutStatus(t *testing.T) {
	t.Parallel()
	stable := binding("org-viewers", "stable-uid", "7", nil, "view", "org:viewers")
	cand := binding("org-viewers.next", "cand-uid", "8", candidateAnnotations("org-viewers"), "view", "org:viewers", "org:auditors")
	other := binding("unrelated", "u-uid", "9", nil, "view", "x")
	views := []runtime.Object{
		viewItem("team-a", globalNS, "", "org-viewers.next"),
		viewItem("team-b", globalNS, "", ""),
		viewItem("team-c", "org", "", ""), // org's own org-viewers shadows the global one
		viewItem("team-d", "org", "org/org-viewers,"+globalNS+"/org-viewers", "org-viewers.next"),
	}
	for _, tc := range []struct {
		name      string
		objs      []runtime.Object
		source    string
		want      *RolloutStatus
		wantErr   func(error) bool
		wantTable []string
	}{
		{
			name:   "a candidate",
			objs:   append([]runtime.Object{stable, cand, other}, views...),
			source: "org-viewers",
			want: &RolloutStatus{
				APIVersion: "implicit.dev/v1alpha1", Kind: "RolloutStatus",
				Resource: "rolebindings.rbac.authorization.k8s.io", Source: globalNS + "/org-viewers", StableExists: true,
				Candidates:     []RolloutCandidate{{Name: "org-viewers.next", UID: "cand-uid", Selector: "implicit.dev/stage=canary"}},
				CandidateCount: 2, StableCount: 1,
				Namespaces: []NamespaceVersion{
					{Namespace: "team-a", Version: "candidate", As: "source"},
					{Namespace: "team-b", Version: "stable", As: "source"},
					{Namespace: "team-d", Version: "candidate", As: "overlay"},
				},
			},
			wantTable: []string{
				"rolebindings.rbac.authorization.k8s.io implicit-global/org-viewers: candidate org-viewers.next, selector implicit.dev/stage=canary.",
				"Namespace implicit-global holds the candidate as a real object",
				"2 namespace(s) see the candidate, 1 the stable version.",
				"NAMESPACE   VERSION     AS",
				"team-a      candidate   source",
				"team-b      stable      source",
				"team-d      candidate   overlay",
			},
		},
		{
			name:   "no candidate",
			objs:   []runtime.Object{stable, other, viewItem("team-a", globalNS, "", ""), viewItem("team-b", globalNS, "", "")},
			source: "org-viewers",
			want: &RolloutStatus{
				APIVersion: "implicit.dev/v1alpha1", Kind: "RolloutStatus",
				Resource: "rolebindings.rbac.authorization.k8s.io", Source: globalNS + "/org-viewers", StableExists: true,
				Candidates: []RolloutCandidate{}, StableCount: 2,
				Namespaces: []NamespaceVersion{{Namespace: "team-a", Version: "stable", As: "source"}, {Namespace: "team-b", Version: "stable", As: "source"}},
			},
			wantTable: []string{
				"rolebindings.rbac.authorization.k8s.io implicit-global/org-viewers has no candidate.",
				"0 namespace(s) see the candidate, 2 the stable version.",
			},
		},
		{
			name:   "a staged creation",
			objs:   []runtime.Object{cand, viewItem("team-a", globalNS, "", "org-viewers.next")},
			source: "org-viewers",
			want: &RolloutStatus{
				APIVersion: "implicit.dev/v1alpha1", Kind: "RolloutStatus",
				Resource: "rolebindings.rbac.authorization.k8s.io", Source: globalNS + "/org-viewers",
				Candidates:     []RolloutCandidate{{Name: "org-viewers.next", UID: "cand-uid", Selector: "implicit.dev/stage=canary"}},
				CandidateCount: 1,
				Namespaces:     []NamespaceVersion{{Namespace: "team-a", Version: "candidate", As: "source"}},
			},
			wantTable: []string{
				"rolebindings.rbac.authorization.k8s.io implicit-global/org-viewers does not exist: candidate org-viewers.next stages its creation, selector implicit.dev/stage=canary.",
				"1 namespace(s) see the candidate, 0 the stable version.",
			},
		},
		{
			name: "two candidates and a malformed one",
			objs: []runtime.Object{stable, cand,
				binding("org-viewers.again", "again-uid", "10", map[string]string{v1alpha1.AnnotationCandidateFor: "org-viewers", v1alpha1.AnnotationCanarySelector: "team=a"}, "view", "y"),
				viewItem("team-b", globalNS, "", "")},
			source: "org-viewers",
			want: &RolloutStatus{
				APIVersion: "implicit.dev/v1alpha1", Kind: "RolloutStatus",
				Resource: "rolebindings.rbac.authorization.k8s.io", Source: globalNS + "/org-viewers", StableExists: true,
				Candidates: []RolloutCandidate{
					{Name: "org-viewers.again", UID: "again-uid", Selector: "team=a",
						Problem: `annotation implicit.dev/canary-selector: "team=a" selects on "team": a canary selector may only use the namespace label implicit.dev/stage, e.g. implicit.dev/stage=canary or implicit.dev/stage in (canary,early)`},
					{Name: "org-viewers.next", UID: "cand-uid", Selector: "implicit.dev/stage=canary"},
				},
				StableCount: 1,
				Namespaces:  []NamespaceVersion{{Namespace: "team-b", Version: "stable", As: "source"}},
			},
			wantTable: []string{
				"has 2 candidates (org-viewers.again, org-viewers.next): none applies",
				"Candidate org-viewers.again is malformed and reaches no namespace",
			},
		},
		{
			name:    "neither a source nor a candidate",
			objs:    []runtime.Object{other},
			source:  "org-viewers",
			wantErr: apierrors.IsNotFound,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, err := rbRollout(newFake(t, tc.objs...), tc.source).status(context.Background())
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("err %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(st, tc.want) {
				t.Errorf("status\n%+v\nwant\n%+v", st, tc.want)
			}
			var out bytes.Buffer
			if err := printRolloutStatus(&out, st); err != nil {
				t.Fatal(err)
			}
			for _, line := range tc.wantTable {
				if !strings.Contains(out.String(), line) {
					t.Errorf("output lacks %q:\n%s", line, out.String())
				}
			}
		})
	}
}

// verbs lists the fake's actions as "verb name".
func verbs(c *dynamicfake.FakeDynamicClient) []string {
	var out []string
	for _, a := range c.Actions() {
		v := a.GetVerb()
		switch a := a.(type) {
		case clienttesting.GetAction:
			v += " " + a.GetName()
		case clienttesting.DeleteAction:
			v += " " + a.GetName()
		case clienttesting.CreateAction:
			v += " " + a.GetObject().(*unstructured.Unstructured).GetName()
		case clienttesting.UpdateAction:
			v += " " + a.GetObject().(*unstructured.Unstructured).GetName()
		}
		if isDryRun(a) {
			v += " (server dry run)"
		}
		out = append(out, v)
	}
	return out
}

func get(t *testing.T, c *dynamicfake.FakeDynamicClient, res schema.GroupVersionResource, name string) *unstructured.Unstructured {
	t.Helper()
	o, err := c.Tracker().Get(res, globalNS, name) // past the tests' reactors
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return o.(*unstructured.Unstructured)
}

func TestRolloutPromote(t *testing.T) {
	t.Parallel()
	// A locked stable source with labels of its own; a candidate that
	// repeats neither the lock nor the tier label (issue 24, item 3).
	stable := binding("org-viewers", "stable-uid", "7", map[string]string{v1alpha1.AnnotationLocked: "true", lastApplied: "stable's", "note": "stable's"}, "view", "org:viewers")
	stable.SetLabels(map[string]string{"tier": "org", "owner": "platform"})
	cand := binding("org-viewers.next", "cand-uid", "8", candidateAnnotations("org-viewers", lastApplied, "candidate's", "note", "candidate's", "reviewed", "yes"), "view", "org:viewers", "org:auditors")
	cand.SetLabels(map[string]string{"owner": "release"})

	// The bindings as promoted: the stable one's metadata, the candidate's
	// subjects, and its labels and annotations (less the candidate ones)
	// added to the stable one's, whose lock stays.
	promotedBinding := binding("org-viewers", "stable-uid", "7", map[string]string{v1alpha1.AnnotationLocked: "true", lastApplied: "stable's", "note": "candidate's", "reviewed": "yes"}, "view", "org:viewers", "org:auditors")
	promotedBinding.SetLabels(map[string]string{"tier": "org", "owner": "release"})
	created := binding("org-viewers", "", "", map[string]string{"note": "candidate's", "reviewed": "yes"}, "view", "org:viewers", "org:auditors")
	created.SetLabels(map[string]string{"owner": "release"})

	// An unlocked stable source whose candidate stages a lock and an
	// overlay: neither is promoted, and the output says so.
	plain := binding("org-viewers", "stable-uid", "7", nil, "view", "org:viewers")
	lockingCand := binding("org-viewers.next", "cand-uid", "8", candidateAnnotations("org-viewers", v1alpha1.AnnotationLocked, "true", v1alpha1.AnnotationMerge, "overlay"), "view", "org:auditors")
	plainPromoted := binding("org-viewers", "stable-uid", "7", nil, "view", "org:auditors")
	// A staged creation keeps the candidate's lock: there is no stable lock to keep.
	lockedCreation := binding("org-viewers.next", "cand-uid", "8", candidateAnnotations("org-viewers", v1alpha1.AnnotationLocked, "true"), "view", "org:auditors")
	lockedCreated := binding("org-viewers", "", "", map[string]string{v1alpha1.AnnotationLocked: "true"}, "view", "org:auditors")

	policy := func(name string, uid types.UID, rv string, annotations map[string]string, spec map[string]any) *unstructured.Unstructured {
		return object("networking.k8s.io/v1", "NetworkPolicy", globalNS, name, uid, rv, annotations, map[string]any{"spec": spec})
	}
	stablePolicy := policy("default-deny", "np-uid", "3", nil, map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Ingress"}})
	stablePolicy.Object["status"] = map[string]any{"conditions": []any{}}
	stablePolicy.Object["extra"] = "dropped: the candidate has none"
	candPolicy := policy("default-deny.next", "np-cand-uid", "4", candidateAnnotations("default-deny"), map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Ingress", "Egress"}})
	promotedPolicy := policy("default-deny", "np-uid", "3", nil, map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Ingress", "Egress"}})
	promotedPolicy.Object["status"] = map[string]any{"conditions": []any{}}

	conflictOnDelete := func(c *dynamicfake.FakeDynamicClient) {
		c.PrependReactor("delete", "rolebindings", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(rbSource.GroupResource(), "org-viewers.next", errors.New("implicit.dev: deleting this candidate needs unlock"))
		})
	}
	staleRead := func(c *dynamicfake.FakeDynamicClient) {
		c.PrependReactor("get", "rolebindings", func(a clienttesting.Action) (bool, runtime.Object, error) {
			if a.(clienttesting.GetAction).GetName() != "org-viewers" {
				return false, nil, nil
			}
			old := stable.DeepCopy()
			old.SetResourceVersion("6")
			return true, old, nil
		})
	}

	candidateEdited := func(c *dynamicfake.FakeDynamicClient) {
		c.PrependReactor("update", "rolebindings", func(clienttesting.Action) (bool, runtime.Object, error) {
			edited := cand.DeepCopy()
			edited.SetResourceVersion("11")
			return false, nil, c.Tracker().Update(rbSource, edited, globalNS)
		})
	}
	// abortedOn deletes the candidate (a concurrent rollout abort) when
	// the stable source is written with verb, after the promotion read it.
	abortedOn := func(verb string) func(*dynamicfake.FakeDynamicClient) {
		return func(c *dynamicfake.FakeDynamicClient) {
			c.PrependReactor(verb, "rolebindings", func(clienttesting.Action) (bool, runtime.Object, error) {
				return false, nil, c.Tracker().Delete(rbSource, globalNS, "org-viewers.next")
			})
		}
	}

	for _, tc := range []struct {
		name       string
		source     schema.GroupVersionResource
		stable     string
		objs       []runtime.Object
		react      func(*dynamicfake.FakeDynamicClient)
		dryRun     dryRun
		wantErr    func(error) bool
		wantOut    []string
		wantNotOut []string
		wantErrs   []string // printError's lines
		verbs      []string
		// After the run: the stable source (nil: none), whether the candidate still exists.
		wantStable    *unstructured.Unstructured
		wantCandidate string
	}{
		{
			name: "update then delete", source: rbSource, stable: "org-viewers",
			objs:       []runtime.Object{stable, cand},
			wantOut:    []string{"rolebindings.rbac.authorization.k8s.io/org-viewers updated in implicit-global from candidate org-viewers.next", "rolebindings.rbac.authorization.k8s.io/org-viewers.next deleted in implicit-global"},
			verbs:      []string{"get org-viewers", "list", "update org-viewers", "delete org-viewers.next"},
			wantStable: promotedBinding,
		},
		{
			name: "a staged creation", source: rbSource, stable: "org-viewers",
			objs:       []runtime.Object{cand},
			wantOut:    []string{"rolebindings.rbac.authorization.k8s.io/org-viewers created in implicit-global from candidate org-viewers.next", "org-viewers.next deleted"},
			verbs:      []string{"get org-viewers", "list", "create org-viewers", "delete org-viewers.next"},
			wantStable: created,
		},
		{
			name: "another kind: every top-level field but metadata and status", source: npSource, stable: "default-deny",
			objs:       []runtime.Object{stablePolicy, candPolicy},
			verbs:      []string{"get default-deny", "list", "update default-deny", "delete default-deny.next"},
			wantStable: promotedPolicy,
		},
		{
			name: "the second write fails", source: rbSource, stable: "org-viewers",
			objs: []runtime.Object{stable, cand}, react: conflictOnDelete,
			wantErr: func(err error) bool { var p *partialError; return errors.As(err, &p) && apierrors.IsForbidden(err) },
			wantOut: []string{"org-viewers updated in implicit-global from candidate org-viewers.next"},
			wantErrs: []string{
				`Error from server (Forbidden): rolebindings.rbac.authorization.k8s.io "org-viewers.next" is forbidden: implicit.dev: deleting this candidate needs unlock`,
				"error: the stable source rolebindings.rbac.authorization.k8s.io/org-viewers in implicit-global now holds the content of the candidate org-viewers.next as read at resourceVersion 8, and the candidate still exists: delete it (kubectl delete rolebindings.rbac.authorization.k8s.io org-viewers.next -n implicit-global)",
			},
			verbs:         []string{"get org-viewers", "list", "update org-viewers", "delete org-viewers.next"},
			wantStable:    promotedBinding,
			wantCandidate: "org-viewers.next",
		},
		{
			name: "the candidate changed after it was read: it is not deleted", source: rbSource, stable: "org-viewers",
			objs: []runtime.Object{stable, cand}, react: candidateEdited,
			wantErr: func(err error) bool { var p *partialError; return errors.As(err, &p) && apierrors.IsConflict(err) },
			wantErrs: []string{
				`Error from server (Conflict): Operation cannot be fulfilled on rolebindings.rbac.authorization.k8s.io "org-viewers.next": the ResourceVersion in the precondition does not match`,
				"error: the stable source rolebindings.rbac.authorization.k8s.io/org-viewers in implicit-global now holds the content of the candidate org-viewers.next as read at resourceVersion 8, but the candidate changed or was replaced after that read, and still exists: check it, then promote again to take its current version, or delete it (kubectl delete rolebindings.rbac.authorization.k8s.io org-viewers.next -n implicit-global)",
			},
			verbs:         []string{"get org-viewers", "list", "update org-viewers", "delete org-viewers.next"},
			wantStable:    promotedBinding,
			wantCandidate: "org-viewers.next",
		},
		{
			name: "the candidate was aborted after it was read: an error that says what the source holds, and the version it replaced", source: rbSource, stable: "org-viewers",
			objs: []runtime.Object{stable, cand}, react: abortedOn("update"),
			wantErr: func(err error) bool { var p *partialError; return errors.As(err, &p) && apierrors.IsNotFound(err) },
			wantOut: []string{
				"org-viewers updated in implicit-global from candidate org-viewers.next",
				"The version of rolebindings.rbac.authorization.k8s.io/org-viewers the promotion replaced (resourceVersion 7), for kubectl replace -f:",
				"  name: org:viewers\n",
				"    tier: org\n",
			},
			wantNotOut: []string{"org:auditors", "resourceVersion:", "uid:", "deleted in"},
			wantErrs: []string{
				`Error from server (NotFound): rolebindings.rbac.authorization.k8s.io "org-viewers.next" not found`,
				"error: the stable source rolebindings.rbac.authorization.k8s.io/org-viewers in implicit-global now holds the content of the candidate org-viewers.next as read at resourceVersion 8, but the candidate was deleted after that read (a rollout abort?): if the abort should stand, write back the version it replaced, printed above (kubectl replace -f FILE); if the promotion should stand, nothing is left to do",
			},
			verbs:      []string{"get org-viewers", "list", "update org-viewers", "delete org-viewers.next"},
			wantStable: promotedBinding,
		},
		{
			name: "a staged creation's candidate was aborted after it was read", source: rbSource, stable: "org-viewers",
			objs: []runtime.Object{cand}, react: abortedOn("create"),
			wantErr: func(err error) bool { var p *partialError; return errors.As(err, &p) && apierrors.IsNotFound(err) },
			wantErrs: []string{
				`Error from server (NotFound): rolebindings.rbac.authorization.k8s.io "org-viewers.next" not found`,
				"error: the stable source rolebindings.rbac.authorization.k8s.io/org-viewers in implicit-global now holds the content of the candidate org-viewers.next as read at resourceVersion 8, but the candidate was deleted after that read (a rollout abort?): if the abort should stand, delete the created source (kubectl delete rolebindings.rbac.authorization.k8s.io org-viewers -n implicit-global); if the promotion should stand, nothing is left to do",
			},
			verbs:      []string{"get org-viewers", "list", "create org-viewers", "delete org-viewers.next"},
			wantStable: created,
		},
		{
			name: "a candidate's lock and merge mode are not promoted over the stable source's", source: rbSource, stable: "org-viewers",
			objs: []runtime.Object{plain, lockingCand},
			wantOut: []string{
				`The candidate's implicit.dev/locked: "true" is not promoted: the stable source's stays (absent); change it with kubectl annotate.`,
				`The candidate's implicit.dev/merge: "overlay" is not promoted: the stable source's stays (absent); change it with kubectl annotate.`,
				"org-viewers.next deleted",
			},
			verbs:      []string{"get org-viewers", "list", "update org-viewers", "delete org-viewers.next"},
			wantStable: plainPromoted,
		},
		{
			name: "a staged creation takes the candidate's lock", source: rbSource, stable: "org-viewers",
			objs:       []runtime.Object{lockedCreation},
			wantNotOut: []string{"is not promoted"},
			verbs:      []string{"get org-viewers", "list", "create org-viewers", "delete org-viewers.next"},
			wantStable: lockedCreated,
		},
		{
			name: "the first write conflicts: nothing deleted", source: rbSource, stable: "org-viewers",
			objs: []runtime.Object{stable, cand}, react: staleRead,
			wantErr:       apierrors.IsConflict,
			wantErrs:      []string{`Error from server (Conflict): Operation cannot be fulfilled on rolebindings.rbac.authorization.k8s.io "org-viewers": the object has been modified`},
			verbs:         []string{"get org-viewers", "list", "update org-viewers"},
			wantStable:    stable,
			wantCandidate: "org-viewers.next",
		},
		{
			name: "a roleRef change is refused", source: rbSource, stable: "org-viewers",
			objs:          []runtime.Object{stable, binding("org-viewers.next", "cand-uid", "8", candidateAnnotations("org-viewers"), "admin", "org:viewers")},
			wantErr:       func(err error) bool { return err != nil && strings.Contains(err.Error(), "changes roleRef") },
			verbs:         []string{"get org-viewers", "list"},
			wantStable:    stable,
			wantCandidate: "org-viewers.next",
		},
		{
			name: "a malformed candidate is refused", source: rbSource, stable: "org-viewers",
			objs:          []runtime.Object{stable, binding("org-viewers.next", "cand-uid", "8", map[string]string{v1alpha1.AnnotationCandidateFor: "org-viewers"}, "view", "x")},
			wantErr:       func(err error) bool { return err != nil && strings.Contains(err.Error(), "is malformed") },
			verbs:         []string{"get org-viewers", "list"},
			wantStable:    stable,
			wantCandidate: "org-viewers.next",
		},
		{
			name: "no candidate", source: rbSource, stable: "org-viewers",
			objs:       []runtime.Object{stable},
			wantErr:    func(err error) bool { return err != nil && strings.Contains(err.Error(), "has no candidate") },
			verbs:      []string{"get org-viewers", "list"},
			wantStable: stable,
		},
		{
			name: "dry run", source: rbSource, stable: "org-viewers", dryRun: dryRunClient,
			objs: []runtime.Object{stable, cand},
			wantOut: []string{
				"rolebindings.rbac.authorization.k8s.io/org-viewers would be updated in implicit-global from candidate org-viewers.next (dry run):",
				"  name: org:auditors",
				"  resourceVersion: \"7\"",
				"rolebindings.rbac.authorization.k8s.io/org-viewers.next (uid cand-uid) would then be deleted in implicit-global (dry run)",
			},
			verbs:         []string{"get org-viewers", "list"},
			wantStable:    stable,
			wantCandidate: "org-viewers.next",
		},
		{
			// Both writes go to the server as dry runs (its guards judge
			// them); the object it answers is printed without managedFields.
			name: "server dry run", source: rbSource, stable: "org-viewers", dryRun: dryRunServer,
			objs: []runtime.Object{stable, cand},
			wantOut: []string{
				"rolebindings.rbac.authorization.k8s.io/org-viewers updated in implicit-global from candidate org-viewers.next (server dry run)",
				"  name: org:auditors",
				"rolebindings.rbac.authorization.k8s.io/org-viewers.next deleted in implicit-global (server dry run)",
			},
			wantNotOut:    []string{"managedFields", "kubectl-implicit"},
			verbs:         []string{"get org-viewers", "list", "update org-viewers (server dry run)", "delete org-viewers.next (server dry run)"},
			wantStable:    stable,
			wantCandidate: "org-viewers.next",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newFake(t, tc.objs...)
			if tc.react != nil {
				tc.react(c)
			}
			r := &rollout{dyn: c, source: tc.source, view: tc.source.Resource, namespace: globalNS, name: tc.stable}
			var out bytes.Buffer
			err := r.promote(context.Background(), &out, tc.dryRun, "")
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("err %v", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			for _, line := range tc.wantOut {
				if !strings.Contains(out.String(), line) {
					t.Errorf("output lacks %q:\n%s", line, out.String())
				}
			}
			for _, s := range tc.wantNotOut {
				if strings.Contains(out.String(), s) {
					t.Errorf("output has %q:\n%s", s, out.String())
				}
			}
			if len(tc.wantErrs) > 0 {
				var errOut bytes.Buffer
				printError(&errOut, err)
				if got, want := errOut.String(), strings.Join(tc.wantErrs, "\n")+"\n"; got != want {
					t.Errorf("error printed\n%s\nwant\n%s", got, want)
				}
			}
			if got := verbs(c); !reflect.DeepEqual(got, tc.verbs) {
				t.Errorf("actions %v, want %v", got, tc.verbs)
			}
			for _, a := range c.Actions() {
				switch a := a.(type) {
				case clienttesting.DeleteAction:
					p := a.GetDeleteOptions().Preconditions
					if p == nil || p.UID == nil || *p.UID == "" {
						t.Errorf("delete %s without a uid precondition", a.GetName())
					}
				case clienttesting.UpdateAction: // a create too
					if a.GetVerb() == "update" && a.GetObject().(*unstructured.Unstructured).GetResourceVersion() == "" {
						t.Error("update without a resourceVersion precondition")
					}
				}
			}
			got := get(t, c, tc.source, tc.stable)
			if got != nil && tc.wantStable != nil {
				// The fake's create keeps what it was given: no uid, no resourceVersion.
				if !reflect.DeepEqual(got.Object, tc.wantStable.Object) {
					t.Errorf("stable source\n%v\nwant\n%v", got.Object, tc.wantStable.Object)
				}
			} else if (got == nil) != (tc.wantStable == nil) {
				t.Errorf("stable source %v, want %v", got, tc.wantStable)
			}
			candName := tc.stable + ".next"
			if exists := get(t, c, tc.source, candName) != nil; exists != (tc.wantCandidate != "") {
				t.Errorf("candidate %s exists: %v, want %v", candName, exists, tc.wantCandidate != "")
			}
		})
	}
}

func TestRolloutAbort(t *testing.T) {
	t.Parallel()
	stable := binding("org-viewers", "stable-uid", "7", nil, "view", "org:viewers")
	cand := binding("org-viewers.next", "cand-uid", "8", candidateAnnotations("org-viewers"), "view", "org:auditors")
	replaced := binding("org-viewers.next", "new-uid", "9", candidateAnnotations("org-viewers"), "view", "org:auditors")
	for _, tc := range []struct {
		name          string
		objs          []runtime.Object
		react         func(*dynamicfake.FakeDynamicClient)
		dryRun        dryRun
		wantErr       func(error) bool
		wantOut       []string
		verbs         []string
		wantCandidate bool
	}{
		{
			name:    "deletes the candidate",
			objs:    []runtime.Object{stable, cand},
			wantOut: []string{"rolebindings.rbac.authorization.k8s.io/org-viewers.next deleted in implicit-global", "Every namespace is back on the stable org-viewers."},
			verbs:   []string{"get org-viewers", "list", "delete org-viewers.next"},
		},
		{
			name:    "a staged creation",
			objs:    []runtime.Object{cand},
			wantOut: []string{"The staged creation of org-viewers is withdrawn."},
			verbs:   []string{"get org-viewers", "list", "delete org-viewers.next"},
		},
		{
			name: "the candidate was replaced between the read and the delete: uid precondition",
			objs: []runtime.Object{stable, cand},
			react: func(c *dynamicfake.FakeDynamicClient) {
				c.PrependReactor("list", "rolebindings", func(clienttesting.Action) (bool, runtime.Object, error) {
					if err := c.Tracker().Update(rbSource, replaced, globalNS); err != nil {
						return true, nil, err
					}
					l := &unstructured.UnstructuredList{}
					l.SetAPIVersion("rbac.authorization.k8s.io/v1")
					l.SetKind("RoleBindingList")
					l.Items = []unstructured.Unstructured{*stable, *cand}
					return true, l, nil
				})
			},
			wantErr:       apierrors.IsConflict,
			verbs:         []string{"get org-viewers", "list", "delete org-viewers.next"},
			wantCandidate: true,
		},
		{
			name:          "dry run",
			objs:          []runtime.Object{stable, cand},
			dryRun:        dryRunClient,
			wantOut:       []string{"rolebindings.rbac.authorization.k8s.io/org-viewers.next (uid cand-uid) would be deleted in implicit-global (dry run)"},
			verbs:         []string{"get org-viewers", "list"},
			wantCandidate: true,
		},
		{
			name:          "server dry run",
			objs:          []runtime.Object{stable, cand},
			dryRun:        dryRunServer,
			wantOut:       []string{"rolebindings.rbac.authorization.k8s.io/org-viewers.next deleted in implicit-global (server dry run)"},
			verbs:         []string{"get org-viewers", "list", "delete org-viewers.next (server dry run)"},
			wantCandidate: true,
		},
		{
			name:    "no candidate",
			objs:    []runtime.Object{stable},
			wantErr: func(err error) bool { return err != nil && strings.Contains(err.Error(), "has no candidate") },
			verbs:   []string{"get org-viewers", "list"},
		},
		{
			name: "two candidates",
			objs: []runtime.Object{stable, cand, binding("org-viewers.again", "again-uid", "10", candidateAnnotations("org-viewers"), "view", "y")},
			wantErr: func(err error) bool {
				return err != nil && strings.Contains(err.Error(), "has 2 candidates (org-viewers.again, org-viewers.next)")
			},
			verbs:         []string{"get org-viewers", "list"},
			wantCandidate: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newFake(t, tc.objs...)
			if tc.react != nil {
				tc.react(c)
			}
			var out bytes.Buffer
			err := rbRollout(c, "org-viewers").abort(context.Background(), &out, tc.dryRun)
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("err %v", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			for _, line := range tc.wantOut {
				if !strings.Contains(out.String(), line) {
					t.Errorf("output lacks %q:\n%s", line, out.String())
				}
			}
			if got := verbs(c); !reflect.DeepEqual(got, tc.verbs) {
				t.Errorf("actions %v, want %v", got, tc.verbs)
			}
			if exists := get(t, c, rbSource, "org-viewers.next") != nil; exists != tc.wantCandidate {
				t.Errorf("candidate exists: %v, want %v", exists, tc.wantCandidate)
			}
			if tc.objs[0] == stable && get(t, c, rbSource, "org-viewers") == nil {
				t.Error("the stable source was deleted")
			}
		})
	}
}

func TestSourceResource(t *testing.T) {
	t.Parallel()
	implicitGV := schema.GroupVersion{Group: "implicit.dev", Version: "v1alpha1"}
	rbacGV := schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}
	policyGV := schema.GroupVersion{Group: "policy.example.com", Version: "v1"}
	otherGV := schema.GroupVersion{Group: "other.example.com", Version: "v1"}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{implicitGV, rbacGV, policyGV, otherGV})
	for _, gv := range []schema.GroupVersion{implicitGV, rbacGV} {
		mapper.Add(gv.WithKind("RoleBinding"), meta.RESTScopeNamespace)
	}
	for _, gv := range []schema.GroupVersion{implicitGV, policyGV, otherGV} {
		mapper.Add(gv.WithKind("Guardrail"), meta.RESTScopeNamespace)
	}
	mapper.Add(implicitGV.WithKind("Orphan"), meta.RESTScopeNamespace)
	for _, tc := range []struct {
		name, kind, view string
		want             schema.GroupVersionResource
		wantErr          string
	}{
		{name: "a built-in kind", kind: "rolebinding", view: "rolebindings", want: rbacGV.WithResource("rolebindings")},
		{name: "the view's group named", kind: "rolebindings.implicit.dev", view: "rolebindings", want: rbacGV.WithResource("rolebindings")},
		{name: "two groups serve it", kind: "guardrails", view: "guardrails", wantErr: "names several source resources"},
		{name: "the group picks one", kind: "guardrails.policy.example.com", view: "guardrails", want: policyGV.WithResource("guardrails")},
		{name: "no source", kind: "orphans", view: "orphans", wantErr: "serves no source resource"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := sourceResource(mapper, tc.kind, tc.view)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPrintError(t *testing.T) {
	t.Parallel()
	conflict := apierrors.NewConflict(rbSource.GroupResource(), "x", errors.New("the object has been modified"))
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{name: "an API error", err: conflict,
			want: `Error from server (Conflict): Operation cannot be fulfilled on rolebindings.rbac.authorization.k8s.io "x": the object has been modified` + "\n"},
		{name: "unauthorized", err: apierrors.NewUnauthorized("no token"),
			want: "error: You must be logged in to the server (no token)\n"},
		{name: "another error", err: errors.New("--output \"xml\": want yaml or json"),
			want: "error: --output \"xml\": want yaml or json\n"},
		{name: "a promotion halfway", err: &partialError{msg: "the stable source is promoted", cause: conflict},
			want: `Error from server (Conflict): Operation cannot be fulfilled on rolebindings.rbac.authorization.k8s.io "x": the object has been modified` + "\nerror: the stable source is promoted\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			printError(&out, tc.err)
			if out.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", out.String(), tc.want)
			}
		})
	}
}
