package merge_test

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

var (
	fuzzActions    = []string{"", "Enforce", "Audit", "Warn", "<empty>"} // "" unset, "<empty>" the empty string
	fuzzRuleNames  = []string{"a", "b", "c", "d"}
	fuzzMatches    = []string{"", "x", "y", "z"} // "" unset
	fuzzLabels     = [][2]string{{}, {"tier", "prod"}, {"tier", "dev"}, {v1alpha1.LabelScope, "local"}}
	fuzzNamespaces = []string{globalNS, "org", "dept", "team"}
)

// fuzzLayer is one generated Guardrail layer and the leaf fields it sets, as
// rendered paths: ".spec.action", `.spec.rules[name="a"].match`,
// ".metadata.labels.tier". Rule names are in rules: a rule always merges.
type fuzzLayer struct {
	item    merge.Item
	invalid bool
	fields  map[string]string
	rules   []string
}

// fuzzLayers builds a base and up to three overlays from data. Per layer:
// a flags byte (locked<<0 | kind<<1, kind 1: action is a number, 2: a
// duplicate rule key, else valid), an action byte, a rule count byte
// (4: an empty list), rule bytes (match<<2 | name), a label byte.
func fuzzLayers(data []byte) []fuzzLayer {
	r := &byteReader{b: data}
	n := 1 + int(r.next())%4
	layers := make([]fuzzLayer, n)
	for i := range layers {
		flags := r.next()
		l := fuzzLayer{fields: map[string]string{}}
		u := guardrail(fuzzNamespaces[i], "g", "")
		spec := u.Object["spec"].(map[string]interface{})
		if a := fuzzActions[int(r.next())%len(fuzzActions)]; a != "" {
			if a == "<empty>" {
				a = ""
			}
			spec["action"] = a
			l.fields[".spec.action"] = a
		}
		switch count := int(r.next()) % 5; count {
		case 4:
			spec["rules"] = []interface{}{}
		default:
			var rules []interface{}
			seen := map[string]bool{}
			for range count {
				b := r.next()
				name, match := fuzzRuleNames[int(b&3)], fuzzMatches[int(b>>2)%len(fuzzMatches)]
				if seen[name] {
					continue
				}
				seen[name] = true
				rule := map[string]interface{}{"name": name}
				if match != "" {
					rule["match"] = match
					l.fields[fmt.Sprintf(".spec.rules[name=%q].match", name)] = match
				}
				rules = append(rules, rule)
				l.rules = append(l.rules, name)
			}
			if rules != nil {
				spec["rules"] = rules
			}
		}
		if lb := fuzzLabels[int(r.next())%len(fuzzLabels)]; lb[0] != "" {
			u.SetLabels(map[string]string{lb[0]: lb[1]})
			if i == 0 || !strings.HasPrefix(lb[0], v1alpha1.Prefix) {
				l.fields[".metadata.labels."+lb[0]] = lb[1]
			}
		}
		switch (flags >> 1) % 8 {
		case 1:
			spec["action"] = int64(7)
			l.invalid = true
		case 2:
			spec["rules"] = []interface{}{map[string]interface{}{"name": "a"}, map[string]interface{}{"name": "a", "match": "x"}}
			l.invalid = true
		}
		l.item = merge.Item{Namespace: fuzzNamespaces[i], Name: "g", Locked: flags&1 == 1, Object: u}
		layers[i] = l
	}
	return layers
}

// fuzzModel states the overlay rules on leaf fields, top down: a field set
// by a locked layer can't be changed by a later one (setting the same value
// is no change); otherwise the latest layer's value wins. It returns the
// expected fields, rules and conflicts, and which fields of which layer a
// lock blocked.
func fuzzModel(layers []fuzzLayer) (fields map[string]string, rules map[string]bool, conflicts []string, blocked map[int]map[string]bool) {
	fields, rules, blocked = map[string]string{}, map[string]bool{}, map[int]map[string]bool{}
	owner := map[string]int{}
	ref := func(i int) string { return layers[i].item.Namespace + "/g" }
	for i, l := range layers {
		if l.invalid {
			conflicts = append(conflicts, "overlay by "+ref(i)+" ignored: does not match the schema")
			continue
		}
		byOwner := map[int][]string{}
		for p, v := range l.fields {
			if o, owned := owner[p]; owned && fields[p] != v {
				byOwner[o] = append(byOwner[o], p)
				if blocked[i] == nil {
					blocked[i] = map[string]bool{}
				}
				blocked[i][p] = true
				continue
			}
			fields[p] = v
			if _, owned := owner[p]; !owned && l.item.Locked {
				owner[p] = i
			}
		}
		for _, name := range l.rules {
			rules[name] = true
		}
		owners := make([]int, 0, len(byOwner))
		for o := range byOwner {
			owners = append(owners, o)
		}
		sort.Ints(owners)
		for _, o := range owners {
			paths := byOwner[o]
			sort.Strings(paths)
			conflicts = append(conflicts, fmt.Sprintf("overlay by %s blocked at %s: set by locked %s", ref(i), strings.Join(paths, ", "), ref(o)))
		}
	}
	return fields, rules, conflicts, blocked
}

// fieldsOf reads the leaf fields of a merged Guardrail as fuzzLayer does.
func fieldsOf(u *unstructured.Unstructured) (map[string]string, map[string]bool) {
	fields, rules := map[string]string{}, map[string]bool{}
	if a, ok, _ := unstructured.NestedString(u.Object, "spec", "action"); ok {
		fields[".spec.action"] = a
	}
	list, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	for _, r := range list {
		m, _ := r.(map[string]interface{})
		name, _ := m["name"].(string)
		rules[name] = true
		if match, ok := m["match"].(string); ok {
			fields[fmt.Sprintf(".spec.rules[name=%q].match", name)] = match
		}
	}
	for k, v := range u.GetLabels() {
		fields[".metadata.labels."+k] = v
	}
	return fields, rules
}

var (
	fuzzOverlayersOnce sync.Once
	fuzzOverlayers     [2]merge.Overlayer
)

func FuzzOverlay(f *testing.F) {
	// Layout: layer count - 1; per layer: flags (locked | kind<<1), action
	// (0 unset, 1 Enforce, 2 Audit, 3 Warn, 4 ""), rule count (4: []),
	// rules (match<<2 | name: a=0 b=1 c=2 d=3; match 0 unset, x=4, y=8, z=12),
	// label (0 none, 1 tier=prod, 2 tier=dev, 3 implicit.dev/scope).
	for _, seed := range []struct {
		name string
		data []byte
	}{
		{"base only", []byte{0, 0, 1, 2, 4 | 0, 8 | 1, 1}},
		{"add a rule, change the action", []byte{1, 0, 1, 2, 4, 9, 0, 0, 2, 1, 14, 0}},
		{"change both under a lock", []byte{1, 1, 1, 2, 4, 9, 0, 0, 2, 1, 14, 0}},
		{"change a rule's match under a lock", []byte{1, 1, 1, 1, 4, 0, 0, 0, 2, 8, 14, 0}},
		{"unlocked overlays never block", []byte{2, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0}},
		{"locked middle of three", []byte{2, 0, 1, 1, 4, 0, 1, 2, 1, 9, 1, 0, 3, 3, 12, 9, 2, 2}},
		{"locked labels, a directive label", []byte{1, 1, 0, 0, 1, 0, 0, 0, 2}},
		{"invalid: action a number", []byte{1, 0, 1, 0, 0, 2, 2, 1, 2, 0}},
		{"invalid: duplicate keys", []byte{1, 1, 1, 0, 0, 4, 2, 0, 0}},
		{"invalid base", []byte{1, 2, 1, 0, 0, 0, 2, 0, 0}},
		{"empty rule lists under a lock", []byte{2, 1, 0, 4, 0, 0, 0, 1, 8, 0, 0, 0, 4, 0}},
		{"four layers, all locked", []byte{3, 1, 1, 1, 4, 0, 1, 2, 1, 9, 1, 1, 3, 2, 8, 13, 2, 1, 4, 3, 12, 1, 14, 3}},
	} {
		f.Add(seed.data)
	}
	fuzzOverlayersOnce.Do(func() {
		fuzzOverlayers[0] = guardrailOverlayer(f)
		fuzzOverlayers[1] = guardrailOverlayer(f)
	})
	validate := guardrailType(f)

	f.Fuzz(func(t *testing.T, data []byte) {
		layers := fuzzLayers(data)
		base, overlays := layers[0].item, make([]merge.Item, 0, len(layers)-1)
		for _, l := range layers[1:] {
			overlays = append(overlays, l.item)
		}
		o := fuzzOverlayers[0]
		merged, conflicts := o.Overlay(base, overlays)

		// Deterministic: another overlayer, on copies (no cache), and the cache.
		copies := make([]merge.Item, len(overlays))
		for i, it := range overlays {
			copies[i] = it
			copies[i].Object = it.Object.(*unstructured.Unstructured).DeepCopy()
		}
		baseCopy := base
		baseCopy.Object = base.Object.(*unstructured.Unstructured).DeepCopy()
		merged2, conflicts2 := fuzzOverlayers[1].Overlay(baseCopy, copies)
		if layers[0].invalid {
			merged2 = base.Object // the unchanged base is its own object
		}
		if !reflect.DeepEqual(merged, merged2) || !reflect.DeepEqual(conflicts, conflicts2) {
			t.Fatalf("not deterministic:\n%v %q\n%v %q", merged, conflicts, merged2, conflicts2)
		}
		if merged3, conflicts3 := o.Overlay(base, overlays); merged3 != merged || !reflect.DeepEqual(conflicts3, conflicts) {
			t.Fatalf("cached result differs")
		}

		if layers[0].invalid {
			if merged != base.Object || len(conflicts) != 1 || !strings.Contains(conflicts[0], "does not match the schema") {
				t.Fatalf("invalid base: merged %v, conflicts %q", merged, conflicts)
			}
			return
		}
		u, ok := merged.(*unstructured.Unstructured)
		if !ok {
			t.Fatalf("merged is %T", merged)
		}
		if _, err := validate.FromUnstructured(contentOf(u.Object)); err != nil {
			t.Fatalf("merged does not validate: %v\n%v", err, u.Object)
		}
		b := base.Object.(*unstructured.Unstructured)
		if u.GetNamespace() != b.GetNamespace() || u.GetUID() != b.GetUID() || u.GetAPIVersion() != b.GetAPIVersion() {
			t.Fatalf("merged identity is not base's: %v", u.Object["metadata"])
		}

		wantFields, wantRules, wantConflicts, blocked := fuzzModel(layers)
		gotFields, gotRules := fieldsOf(u)
		if !reflect.DeepEqual(gotFields, wantFields) || !reflect.DeepEqual(gotRules, wantRules) {
			t.Fatalf("merged fields = %v rules %v, want %v rules %v\nmerged %v\nconflicts %q", gotFields, gotRules, wantFields, wantRules, u.Object, conflicts)
		}
		if len(conflicts) != len(wantConflicts) {
			t.Fatalf("conflicts = %q, want %q", conflicts, wantConflicts)
		}
		for i := range conflicts {
			if !strings.HasPrefix(conflicts[i], wantConflicts[i]) {
				t.Fatalf("conflict %d = %q, want %q", i, conflicts[i], wantConflicts[i])
			}
		}
		// Every field value a locked layer set and no earlier lock blocked survives.
		for i, l := range layers {
			if !l.item.Locked || l.invalid {
				continue
			}
			for p, v := range l.fields {
				if !blocked[i][p] && gotFields[p] != v {
					t.Fatalf("locked layer %d set %s=%q, merged has %q", i, p, v, gotFields[p])
				}
			}
		}

		// An overlay identical to the base changes nothing and conflicts with nothing.
		same := base.Object.(*unstructured.Unstructured).DeepCopy()
		same.SetNamespace("team")
		for _, lockedBase := range []bool{false, true} {
			b := base
			b.Locked = lockedBase
			got, cs := o.Overlay(b, []merge.Item{{Namespace: "team", Name: "g", Object: same}})
			if len(cs) != 0 || !reflect.DeepEqual(got.(*unstructured.Unstructured).Object, base.Object.(*unstructured.Unstructured).Object) {
				t.Fatalf("overlay identical to the base (locked %v): %v, conflicts %q; base %v", lockedBase, got, cs, base.Object)
			}
		}
	})
}
