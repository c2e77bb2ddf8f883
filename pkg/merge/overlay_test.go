package merge_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kube-openapi/pkg/schemaconv"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

const guardrailModel = "com.example.policy.v1.Guardrail"

// guardrailSchemas are the OpenAPI v3 components a kube-apiserver publishes
// for a CRD policy.example.com/v1 Guardrail: spec.action, a scalar, and
// spec.rules, a list-map keyed by name. ObjectMeta is a minimal stand-in for
// the real one, which the overlay reads only labels and annotations of.
const guardrailSchemas = `{
	"com.example.policy.v1.Guardrail": {
		"type": "object",
		"x-kubernetes-group-version-kind": [{"group": "policy.example.com", "kind": "Guardrail", "version": "v1"}],
		"properties": {
			"apiVersion": {"type": "string"},
			"kind": {"type": "string"},
			"metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]},
			"spec": {
				"type": "object",
				"properties": {
					"action": {"type": "string"},
					"rules": {
						"type": "array",
						"x-kubernetes-list-type": "map",
						"x-kubernetes-list-map-keys": ["name"],
						"items": {
							"type": "object",
							"required": ["name"],
							"properties": {"name": {"type": "string"}, "match": {"type": "string"}}
						}
					}
				}
			}
		}
	},
	"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
		"type": "object",
		"properties": {
			"name": {"type": "string"},
			"namespace": {"type": "string"},
			"uid": {"type": "string"},
			"resourceVersion": {"type": "string"},
			"labels": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
			"annotations": {"type": "object", "additionalProperties": {"type": "string", "default": ""}}
		}
	}
}`

func guardrailModels(t testing.TB) map[string]*spec.Schema {
	t.Helper()
	models := map[string]*spec.Schema{}
	if err := json.Unmarshal([]byte(guardrailSchemas), &models); err != nil {
		t.Fatalf("parsing the Guardrail schemas: %v", err)
	}
	return models
}

func guardrailOverlayer(t testing.TB) merge.Overlayer {
	t.Helper()
	o, err := merge.NewOverlayer(guardrailModels(t), guardrailModel)
	if err != nil {
		t.Fatalf("NewOverlayer: %v", err)
	}
	return o
}

// guardrailType is the Guardrail's structured-merge-diff type, to validate
// merged objects independently of the overlayer.
func guardrailType(t testing.TB) typed.ParseableType {
	t.Helper()
	s, err := schemaconv.ToSchemaFromOpenAPI(guardrailModels(t), false)
	if err != nil {
		t.Fatalf("converting the Guardrail schemas: %v", err)
	}
	name := guardrailModel
	return typed.ParseableType{Schema: s, TypeRef: schema.TypeRef{NamedType: &name}}
}

// guardrail builds an unstructured Guardrail. rules are "name=match", or
// "name" for a rule without match; action "" leaves it unset.
func guardrail(namespace, name, action string, rules ...string) *unstructured.Unstructured {
	spec := map[string]interface{}{}
	if action != "" {
		spec["action"] = action
	}
	if rules != nil {
		list := []interface{}{}
		for _, r := range rules {
			n, m, ok := strings.Cut(r, "=")
			rule := map[string]interface{}{"name": n}
			if ok {
				rule["match"] = m
			}
			list = append(list, rule)
		}
		spec["rules"] = list
	}
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "policy.example.com/v1",
		"kind":       "Guardrail",
		"metadata": map[string]interface{}{
			"name":            name,
			"namespace":       namespace,
			"uid":             "uid-" + namespace + "-" + name,
			"resourceVersion": "7",
		},
		"spec": spec,
	}}
}

// with returns u changed by f, for cases that need more than guardrail.
func with(u *unstructured.Unstructured, f func(u *unstructured.Unstructured)) *unstructured.Unstructured {
	f(u)
	return u
}

func layer(obj *unstructured.Unstructured, isLocked bool) merge.Item {
	return merge.Item{Namespace: obj.GetNamespace(), Name: obj.GetName(), Locked: isLocked, Object: obj}
}

// specOf renders a Guardrail's spec as "action; rule=match rule ...", rules
// sorted by name: their order is not part of the contract.
func specOf(t *testing.T, obj any) string {
	t.Helper()
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		t.Fatalf("merged object is %T, want *unstructured.Unstructured", obj)
	}
	action, _, _ := unstructured.NestedString(u.Object, "spec", "action")
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	var rs []string
	for _, r := range rules {
		m, _ := r.(map[string]interface{})
		s := fmt.Sprint(m["name"])
		if match, ok := m["match"]; ok {
			s += "=" + fmt.Sprint(match)
		}
		rs = append(rs, s)
	}
	sort.Strings(rs)
	return action + "; " + strings.Join(rs, " ")
}

// checkConflicts asserts each conflict contains its substrings.
func checkConflicts(t *testing.T, got []string, want [][]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("conflicts = %q, want %d matching %q", got, len(want), want)
	}
	for i, subs := range want {
		for _, s := range subs {
			if !strings.Contains(got[i], s) {
				t.Errorf("conflict %d = %q, want it to contain %q", i, got[i], s)
			}
		}
	}
}

func TestOverlayGuardrail(t *testing.T) {
	t.Parallel()
	o := guardrailOverlayer(t)
	g := func(action string, rules ...string) *unstructured.Unstructured {
		return guardrail(globalNS, "g", action, rules...)
	}
	org := func(action string, rules ...string) *unstructured.Unstructured {
		return guardrail("org", "g", action, rules...)
	}
	team := func(action string, rules ...string) *unstructured.Unstructured {
		return guardrail("team", "g", action, rules...)
	}
	const (
		globalRef = globalNS + "/g"
		orgRef    = "org/g"
		teamRef   = "team/g"
	)

	tests := []struct {
		name      string
		base      merge.Item
		overlays  []merge.Item
		want      string
		conflicts [][]string
	}{
		{
			name: "no overlays: the base",
			base: layer(g("Enforce", "a=x", "b=y"), false),
			want: "Enforce; a=x b=y",
		},
		{
			name:     "add a rule",
			base:     layer(g("Enforce", "a=x", "b=y"), false),
			overlays: []merge.Item{layer(team("", "c=z"), false)},
			want:     "Enforce; a=x b=y c=z",
		},
		{
			name:     "change the action",
			base:     layer(g("Enforce", "a=x", "b=y"), false),
			overlays: []merge.Item{layer(team("Audit"), false)},
			want:     "Audit; a=x b=y",
		},
		{
			name:     "change the action and add a rule",
			base:     layer(g("Enforce", "a=x", "b=y"), false),
			overlays: []merge.Item{layer(team("Audit", "c=z"), false)},
			want:     "Audit; a=x b=y c=z",
		},
		{
			name:      "change both under a lock: the action stays, the rule is added",
			base:      layer(g("Enforce", "a=x", "b=y"), true),
			overlays:  []merge.Item{layer(team("Audit", "c=z"), false)},
			want:      "Enforce; a=x b=y c=z",
			conflicts: [][]string{{"overlay by " + teamRef + " blocked at .spec.action: set by locked " + globalRef}},
		},
		{
			name:     "overlay of an existing rule by key",
			base:     layer(g("Enforce", "a=x", "b=y"), false),
			overlays: []merge.Item{layer(team("", "a=w"), false)},
			want:     "Enforce; a=w b=y",
		},
		{
			name:      "overlay of an existing rule by key under a lock",
			base:      layer(g("Enforce", "a=x", "b=y"), true),
			overlays:  []merge.Item{layer(team("", "a=w", "c=z"), false)},
			want:      "Enforce; a=x b=y c=z",
			conflicts: [][]string{{"overlay by " + teamRef + ` blocked at .spec.rules[name="a"].match: set by locked ` + globalRef}},
		},
		{
			name:      "every blocked field of an overlay in one conflict",
			base:      layer(g("Enforce", "a=x", "b=y"), true),
			overlays:  []merge.Item{layer(team("Audit", "a=w", "b=y", "c=z"), false)},
			want:      "Enforce; a=x b=y c=z",
			conflicts: [][]string{{`blocked at .spec.action, .spec.rules[name="a"].match: set by locked ` + globalRef}},
		},
		{
			name:     "a field the lock does not set may be added: a rule's missing match",
			base:     layer(g("", "a", "b=y"), true),
			overlays: []merge.Item{layer(team("Audit", "a=w"), false)},
			want:     "Audit; a=w b=y",
		},
		{
			name:     "setting a locked field to its own value is no conflict",
			base:     layer(g("Enforce", "a=x"), true),
			overlays: []merge.Item{layer(team("Enforce", "a=x", "c=z"), false)},
			want:     "Enforce; a=x c=z",
		},
		{
			name:     "unlocked overlays never block: the last one wins",
			base:     layer(g("Enforce", "a=x"), false),
			overlays: []merge.Item{layer(org("Audit", "a=y"), false), layer(team("Warn", "a=z"), false)},
			want:     "Warn; a=z",
		},
		{
			name: "three levels with a locked middle overlay",
			base: layer(g("Enforce", "a=x"), false),
			overlays: []merge.Item{
				layer(org("Audit", "b=y"), true),
				layer(team("Warn", "a=q", "b=z", "c"), false),
			},
			want:      "Audit; a=q b=y c",
			conflicts: [][]string{{"overlay by " + teamRef, `blocked at .spec.action, .spec.rules[name="b"].match: set by locked ` + orgRef}},
		},
		{
			name: "three levels, locked base and locked middle: each blocked by its topmost owner",
			base: layer(g("Enforce", "a=x"), true),
			overlays: []merge.Item{
				layer(org("Audit", "a=x", "b=y"), true),
				layer(team("Warn", "a=q", "b=z"), false),
			},
			want: "Enforce; a=x b=y",
			conflicts: [][]string{
				{"overlay by " + orgRef + " blocked at .spec.action: set by locked " + globalRef},
				{"overlay by " + teamRef + ` blocked at .spec.action, .spec.rules[name="a"].match: set by locked ` + globalRef},
				{"overlay by " + teamRef + ` blocked at .spec.rules[name="b"].match: set by locked ` + orgRef},
			},
		},
		{
			name: "a lock on the last overlay protects nothing below it",
			base: layer(g("Enforce"), false),
			overlays: []merge.Item{
				layer(org("Audit"), false),
				layer(team("Warn"), true),
			},
			want: "Warn; ",
		},
		{
			name: "invalid overlay: action is a number, ignored entirely; the next one applies",
			base: layer(g("Enforce", "a=x"), false),
			overlays: []merge.Item{
				layer(with(org("", "b=y"), func(u *unstructured.Unstructured) {
					_ = unstructured.SetNestedField(u.Object, int64(3), "spec", "action")
				}), false),
				layer(team("", "c=z"), false),
			},
			want:      "Enforce; a=x c=z",
			conflicts: [][]string{{"overlay by " + orgRef + " ignored: does not match the schema", ".spec.action"}},
		},
		{
			name:      "invalid overlay: duplicate rule keys, never half-applied",
			base:      layer(g("Enforce", "a=x"), false),
			overlays:  []merge.Item{layer(team("Audit", "b=y", "b=z"), false)},
			want:      "Enforce; a=x",
			conflicts: [][]string{{"overlay by " + teamRef + " ignored: does not match the schema", "duplicate"}},
		},
		{
			name: "invalid overlay: a field the schema does not know",
			base: layer(g("Enforce", "a=x"), false),
			overlays: []merge.Item{layer(with(team("Audit"), func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "yes", "spec", "extra")
			}), false)},
			want:      "Enforce; a=x",
			conflicts: [][]string{{"overlay by " + teamRef + " ignored: does not match the schema", "extra"}},
		},
		{
			name: "invalid overlay under a lock: reported as invalid, not as blocked",
			base: layer(g("Enforce", "a=x"), true),
			overlays: []merge.Item{layer(with(team("", "c"), func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, true, "spec", "action")
			}), false)},
			want:      "Enforce; a=x",
			conflicts: [][]string{{"overlay by " + teamRef + " ignored"}},
		},
		{
			name:      "overlay of an unsupported Go type: ignored",
			base:      layer(g("Enforce", "a=x"), false),
			overlays:  []merge.Item{{Namespace: "team", Name: "g", Object: "not an object"}},
			want:      "Enforce; a=x",
			conflicts: [][]string{{"overlay by " + teamRef + " ignored", "string"}},
		},
		{
			name:      "locked labels stay, new labels are added",
			base:      layer(with(g("Enforce"), func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"tier": "prod"}) }), true),
			overlays:  []merge.Item{layer(with(team("Enforce"), func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"tier": "dev", "env": "dev"}) }), false)},
			want:      "Enforce; ",
			conflicts: [][]string{{"blocked at .metadata.labels.tier: set by locked " + globalRef}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			merged, conflicts := o.Overlay(tt.base, tt.overlays)
			checkConflicts(t, conflicts, tt.conflicts)
			if got := specOf(t, merged); got != tt.want {
				t.Errorf("merged spec = %q, want %q", got, tt.want)
			}
			// The merged object is base's identity, and is a valid Guardrail.
			u := merged.(*unstructured.Unstructured)
			base := tt.base.Object.(*unstructured.Unstructured)
			if u.GetNamespace() != base.GetNamespace() || u.GetName() != base.GetName() || u.GetUID() != base.GetUID() ||
				u.GetResourceVersion() != base.GetResourceVersion() || u.GetAPIVersion() != base.GetAPIVersion() || u.GetKind() != base.GetKind() {
				t.Errorf("merged identity = %s %s/%s uid %s rv %s, want base's", u.GetAPIVersion(), u.GetNamespace(), u.GetName(), u.GetUID(), u.GetResourceVersion())
			}
			if _, err := guardrailType(t).FromUnstructured(contentOf(u.Object)); err != nil {
				t.Errorf("merged object does not validate: %v", err)
			}
		})
	}
}

// contentOf is what the schema validates of an object: its metadata down to
// labels and annotations (the stand-in ObjectMeta has no other fields).
func contentOf(obj map[string]interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range obj {
		out[k] = v
	}
	if meta, ok := obj["metadata"].(map[string]interface{}); ok {
		kept := map[string]interface{}{}
		for _, f := range []string{"labels", "annotations"} {
			if v, ok := meta[f]; ok {
				kept[f] = v
			}
		}
		out["metadata"] = kept
	}
	return out
}

func TestOverlayMetadata(t *testing.T) {
	t.Parallel()
	o := guardrailOverlayer(t)
	base := with(guardrail(globalNS, "g", "Enforce"), func(u *unstructured.Unstructured) {
		u.SetLabels(map[string]string{"tier": "prod"})
		u.SetAnnotations(map[string]string{v1alpha1.AnnotationMerge: "overlay", "owner": "platform"})
	})
	overlay := with(guardrail("team", "g", "Audit"), func(u *unstructured.Unstructured) {
		u.SetAPIVersion("policy.example.com/v2")
		u.SetKind("Other")
		u.SetUID(types.UID("overlay-uid"))
		u.SetResourceVersion("99")
		u.SetGeneration(4)
		u.SetLabels(map[string]string{"env": "dev", v1alpha1.LabelScope: "local", v1alpha1.LabelParent: "x"})
		u.SetAnnotations(map[string]string{"note": "relaxed", v1alpha1.AnnotationLocked: "true", v1alpha1.AnnotationConflict: "spoofed"})
	})
	baseBefore := base.DeepCopy()
	overlayBefore := overlay.DeepCopy()

	merged, conflicts := o.Overlay(layer(base, false), []merge.Item{layer(overlay, false)})
	if len(conflicts) != 0 {
		t.Fatalf("conflicts = %q, want none", conflicts)
	}
	u := merged.(*unstructured.Unstructured)
	want := baseBefore.DeepCopy()
	want.SetLabels(map[string]string{"tier": "prod", "env": "dev"})
	want.SetAnnotations(map[string]string{v1alpha1.AnnotationMerge: "overlay", "owner": "platform", "note": "relaxed"})
	_ = unstructured.SetNestedField(want.Object, "Audit", "spec", "action")
	if !reflect.DeepEqual(u.Object, want.Object) {
		t.Errorf("merged =\n%v\nwant\n%v", u.Object, want.Object)
	}
	if !reflect.DeepEqual(base, baseBefore) || !reflect.DeepEqual(overlay, overlayBefore) {
		t.Errorf("Overlay changed its inputs")
	}
	// The merged object shares nothing with the inputs.
	_ = unstructured.SetNestedField(u.Object, "changed", "spec", "action")
	u.GetLabels()
	if !reflect.DeepEqual(base, baseBefore) || !reflect.DeepEqual(overlay, overlayBefore) {
		t.Errorf("changing the merged object changed an input")
	}
}

// TestOverlayLastApplied: client-side kubectl apply keeps its own
// last-applied-configuration on every object it writes; an overlay's is
// bookkeeping of the overlay, so it neither merges nor conflicts with a
// locked base's.
func TestOverlayLastApplied(t *testing.T) {
	t.Parallel()
	o := guardrailOverlayer(t)
	const key = "kubectl.kubernetes.io/last-applied-configuration"
	base := with(guardrail(globalNS, "g", "Enforce"), func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{key: `{"base":true}`})
	})
	overlay := with(guardrail("team", "g", "Enforce", "c=x"), func(u *unstructured.Unstructured) {
		u.SetAnnotations(map[string]string{key: `{"overlay":true}`})
	})
	merged, conflicts := o.Overlay(layer(base, true), []merge.Item{layer(overlay, false)})
	if len(conflicts) != 0 {
		t.Errorf("conflicts = %q, want none", conflicts)
	}
	if got := merged.(*unstructured.Unstructured).GetAnnotations()[key]; got != `{"base":true}` {
		t.Errorf("%s = %q, want the base's", key, got)
	}
}

func TestOverlayInvalidBase(t *testing.T) {
	t.Parallel()
	o := guardrailOverlayer(t)
	tests := []struct {
		name string
		base any
		want string
	}{
		{name: "action is a number", base: with(guardrail(globalNS, "g", ""), func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(1), "spec", "action")
		}), want: "does not match the schema"},
		{name: "duplicate rule keys", base: guardrail(globalNS, "g", "Enforce", "a=x", "a=y"), want: "does not match the schema"},
		{name: "metadata is a string", base: &unstructured.Unstructured{Object: map[string]interface{}{"metadata": "x"}}, want: "does not match the schema"},
		{name: "a string", base: "not an object", want: "unsupported object of type string"},
		{name: "nil", base: nil, want: "no object"},
		{name: "nil unstructured", base: (*unstructured.Unstructured)(nil), want: "no object"},
		{name: "nil typed pointer", base: (*guardrailObject)(nil), want: "unsupported object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := merge.Item{Namespace: globalNS, Name: "g", Object: tt.base}
			merged, conflicts := o.Overlay(base, []merge.Item{layer(guardrail("team", "g", "Audit"), false)})
			if merged != tt.base {
				t.Errorf("merged = %#v, want the base object unchanged", merged)
			}
			checkConflicts(t, conflicts, [][]string{{"overlays onto " + globalNS + "/g not applied", tt.want}})
		})
	}
}

// guardrailObject is a typed Guardrail, as a client with generated types has.
type guardrailObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              guardrailSpec `json:"spec"`
}

type guardrailSpec struct {
	Action string          `json:"action,omitempty"`
	Rules  []guardrailRule `json:"rules,omitempty"`
}

type guardrailRule struct {
	Name  string `json:"name"`
	Match string `json:"match,omitempty"`
}

func (g *guardrailObject) DeepCopyObject() runtime.Object {
	c := *g
	g.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.Spec.Rules = append([]guardrailRule(nil), g.Spec.Rules...)
	return &c
}

func TestOverlayTypedAndUnstructured(t *testing.T) {
	t.Parallel()
	o := guardrailOverlayer(t)
	// Typed objects from informers have an empty TypeMeta.
	typedBase := func() *guardrailObject {
		return &guardrailObject{
			ObjectMeta: metav1.ObjectMeta{Namespace: globalNS, Name: "g", UID: "uid-g", ResourceVersion: "5"},
			Spec:       guardrailSpec{Action: "Enforce", Rules: []guardrailRule{{Name: "a", Match: "x"}}},
		}
	}
	typedOverlay := &guardrailObject{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "g", UID: "uid-team"},
		Spec:       guardrailSpec{Action: "Audit", Rules: []guardrailRule{{Name: "c", Match: "z"}}},
	}
	wantTyped := typedBase()
	wantTyped.Spec = guardrailSpec{Action: "Audit", Rules: []guardrailRule{{Name: "a", Match: "x"}, {Name: "c", Match: "z"}}}
	wantLocked := typedBase()
	wantLocked.Spec.Rules = append(wantLocked.Spec.Rules, guardrailRule{Name: "c", Match: "z"})

	tests := []struct {
		name      string
		base      merge.Item
		overlay   any
		want      any
		conflicts int
	}{
		{
			name:    "typed onto typed",
			base:    merge.Item{Namespace: globalNS, Name: "g", Object: typedBase()},
			overlay: typedOverlay,
			want:    wantTyped,
		},
		{
			name:    "unstructured onto typed: typed",
			base:    merge.Item{Namespace: globalNS, Name: "g", Object: typedBase()},
			overlay: guardrail("team", "g", "Audit", "c=z"),
			want:    wantTyped,
		},
		{
			name:      "typed onto locked typed",
			base:      merge.Item{Namespace: globalNS, Name: "g", Object: typedBase(), Locked: true},
			overlay:   typedOverlay,
			want:      wantLocked,
			conflicts: 1,
		},
		{
			name:    "typed onto unstructured: unstructured",
			base:    layer(guardrail(globalNS, "g", "Enforce", "a=x"), false),
			overlay: typedOverlay,
			want: with(guardrail(globalNS, "g", "Audit", "a=x", "c=z"), func(u *unstructured.Unstructured) {
				u.Object["metadata"].(map[string]interface{})["uid"] = "uid-" + globalNS + "-g"
			}),
		},
		{
			name:    "map onto map: map",
			base:    merge.Item{Namespace: globalNS, Name: "g", Object: guardrail(globalNS, "g", "Enforce", "a=x").Object},
			overlay: guardrail("team", "g", "Audit").Object,
			want:    guardrail(globalNS, "g", "Audit", "a=x").Object,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			merged, conflicts := o.Overlay(tt.base, []merge.Item{{Namespace: "team", Name: "g", Object: tt.overlay}})
			if len(conflicts) != tt.conflicts {
				t.Errorf("conflicts = %q, want %d", conflicts, tt.conflicts)
			}
			if reflect.TypeOf(merged) != reflect.TypeOf(tt.base.Object) {
				t.Fatalf("merged is %T, want base's %T", merged, tt.base.Object)
			}
			if !reflect.DeepEqual(merged, tt.want) {
				t.Errorf("merged =\n%#v\nwant\n%#v", merged, tt.want)
			}
		})
	}
}

func TestNewOverlayerErrors(t *testing.T) {
	t.Parallel()
	broken := guardrailModels(t)
	broken["com.example.policy.v1.Broken"] = &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"nonsense"}}}
	tests := []struct {
		name   string
		models map[string]*spec.Schema
		model  string
		want   string
	}{
		{name: "missing model", models: guardrailModels(t), model: "com.example.policy.v1.Missing", want: `no OpenAPI schema for model "com.example.policy.v1.Missing"`},
		{name: "no models", model: guardrailModel, want: "no OpenAPI schema"},
		{name: "schema that does not convert", models: broken, model: guardrailModel, want: "converting the OpenAPI schemas"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := merge.NewOverlayer(tt.models, tt.model)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewOverlayer() = %v, %v; want an error containing %q", o, err, tt.want)
			}
		})
	}
	name := "Missing"
	if _, err := merge.NewOverlayerForType(typed.ParseableType{Schema: guardrailType(t).Schema, TypeRef: schema.TypeRef{NamedType: &name}}); err == nil {
		t.Errorf("NewOverlayerForType(missing type) succeeded")
	}
}

func TestOverlayCache(t *testing.T) {
	t.Parallel()
	o := guardrailOverlayer(t)
	base := layer(guardrail(globalNS, "g", "Enforce", "a=x"), false)
	overlays := []merge.Item{layer(guardrail("team", "g", "Audit"), false)}

	first, _ := o.Overlay(base, overlays)
	again, _ := o.Overlay(base, overlays)
	if first != again {
		t.Errorf("an unchanged merge was computed again")
	}

	// An informer replaces an object on every change: a new object is a new merge.
	changed := []merge.Item{layer(guardrail("team", "g", "Warn"), false)}
	if got, _ := o.Overlay(base, changed); specOf(t, got) != "Warn; a=x" {
		t.Errorf("after a change, merged = %q", specOf(t, got))
	}
	// A lock flag is part of the key.
	lockedBase := base
	lockedBase.Locked = true
	got, conflicts := o.Overlay(lockedBase, overlays)
	if specOf(t, got) != "Enforce; a=x" || len(conflicts) != 1 {
		t.Errorf("locked: merged = %q, conflicts %q", specOf(t, got), conflicts)
	}
	if got, _ := o.Overlay(base, overlays); got != first {
		t.Errorf("the first merge is no longer cached")
	}
}

func TestOverlayConcurrent(t *testing.T) {
	t.Parallel()
	o := guardrailOverlayer(t)
	bases := []merge.Item{
		layer(guardrail(globalNS, "g", "Enforce", "a=x"), false),
		layer(guardrail(globalNS, "g", "Enforce", "a=x"), true),
	}
	overlays := []merge.Item{layer(guardrail("org", "g", "", "b=y"), true), layer(guardrail("team", "g", "Audit", "b=z"), false)}
	want := []string{"Audit; a=x b=y", "Enforce; a=x b=y"}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				k := (i + j) % 2
				merged, _ := o.Overlay(bases[k], overlays)
				u := merged.(*unstructured.Unstructured)
				action, _, _ := unstructured.NestedString(u.Object, "spec", "action")
				if !strings.HasPrefix(want[k], action+";") {
					t.Errorf("base %d: action %q, want %q", k, action, want[k])
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkOverlay merges a local and a parent overlay onto a global
// Guardrail of 20 rules. locked: the global and parent objects are locked
// and two fields are blocked; unlocked: nothing is. uncached passes the
// objects as maps, which the cache does not key; cached passes the same
// *unstructured.Unstructured objects on every read, as views do between
// source changes.
func BenchmarkOverlay(b *testing.B) {
	var rules []string
	for i := range 20 {
		rules = append(rules, fmt.Sprintf("rule-%02d=match-%d", i, i))
	}
	layers := func(locks bool) (merge.Item, []merge.Item) {
		return layer(guardrail(globalNS, "g", "Enforce", rules...), locks), []merge.Item{
			layer(guardrail("org", "g", "", "rule-03=tighter", "org-rule=x"), locks),
			layer(guardrail("team", "g", "Audit", "team-rule=y"), false),
		}
	}
	asMaps := func(it merge.Item) merge.Item {
		it.Object = it.Object.(*unstructured.Unstructured).Object
		return it
	}
	for _, locks := range []bool{true, false} {
		base, overlays := layers(locks)
		mapBase, mapOverlays := asMaps(base), []merge.Item{asMaps(overlays[0]), asMaps(overlays[1])}
		wantConflicts := 0
		if locks {
			wantConflicts = 2
		}
		for _, bc := range []struct {
			name     string
			base     merge.Item
			overlays []merge.Item
		}{
			{"uncached", mapBase, mapOverlays},
			{"cached", base, overlays},
		} {
			name := "unlocked/" + bc.name
			if locks {
				name = "locked/" + bc.name
			}
			b.Run(name, func(b *testing.B) {
				o := guardrailOverlayer(b)
				b.ReportAllocs()
				for b.Loop() {
					if _, conflicts := o.Overlay(bc.base, bc.overlays); len(conflicts) != wantConflicts {
						b.Fatalf("conflicts = %q, want %d", conflicts, wantConflicts)
					}
				}
			})
		}
	}
}

// TestMergeWithGuardrailOverlayer is the scenario through MergeWith:
// a global Guardrail with rules a and b and action Enforce; the dev
// namespace adds rule c and relaxes to Audit; then the global one is locked.
func TestMergeWithGuardrailOverlayer(t *testing.T) {
	t.Parallel()
	opts := merge.Options{Strategy: merge.Overlay, Overlayer: guardrailOverlayer(t)}
	dev := layer(guardrail("dev", "g", "Audit", "c=z"), false)
	tests := []struct {
		name         string
		global       merge.Item
		want         string
		wantConflict string
	}{
		{name: "unlocked: the dev namespace relaxes to Audit", global: layer(guardrail(globalNS, "g", "Enforce", "a=x", "b=y"), false), want: "Audit; a=x b=y c=z"},
		{name: "locked: Enforce stays, rule c is added", global: layer(guardrail(globalNS, "g", "Enforce", "a=x", "b=y"), true), want: "Enforce; a=x b=y c=z", wantConflict: "spec.action"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := merge.MergeWith("guardrails", []merge.Level{
				{Scope: merge.ScopeGlobal, Namespace: globalNS, Items: []merge.Item{tt.global}},
				{Scope: merge.ScopeLocal, Namespace: "dev", Items: []merge.Item{dev}},
			}, opts)
			if len(got) != 1 {
				t.Fatalf("MergeWith() = %+v, want one result", got)
			}
			r := got[0]
			if r.Scope != merge.ScopeGlobal || r.OverlaySources() != "dev/g" {
				t.Errorf("scope %s, overlays %q; want global, dev/g", r.Scope, r.OverlaySources())
			}
			if s := specOf(t, r.Object); s != tt.want {
				t.Errorf("merged spec = %q, want %q", s, tt.want)
			}
			if c := r.Conflict(); (tt.wantConflict == "") != (c == "") || !strings.Contains(c, tt.wantConflict) {
				t.Errorf("Conflict() = %q, want it to contain %q", c, tt.wantConflict)
			}
		})
	}
}
