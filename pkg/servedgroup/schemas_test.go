package servedgroup

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"

	"k8s.io/kube-openapi/pkg/validation/spec"
)

func described(d string) *spec.Schema {
	s := &spec.Schema{}
	s.Description = d
	return s
}

func TestSchemaStore(t *testing.T) {
	t.Parallel()
	type set struct {
		resource    string
		models      HostSchemas
		model, kind string
	}
	static := HostSchemas{"io.k8s.api.rbac.v1.RoleBinding": described("static RoleBinding"), "shared.Meta": described("static meta")}
	tests := []struct {
		name string
		sets []set
		// want are the snapshot's schema descriptions by name.
		want      map[string]string
		wantKinds map[string]string
	}{
		{
			name:      "static schemas only",
			want:      map[string]string{"io.k8s.api.rbac.v1.RoleBinding": "static RoleBinding", "shared.Meta": "static meta"},
			wantKinds: map[string]string{},
		},
		{
			name: "a dynamic kind adds its models and names its model and list",
			sets: []set{{resource: "guardrails", models: HostSchemas{"g.Guardrail": described("v1"), "g.Rule": described("rule")}, model: "g.Guardrail", kind: "Guardrail"}},
			want: map[string]string{
				"io.k8s.api.rbac.v1.RoleBinding": "static RoleBinding", "shared.Meta": "static meta",
				"g.Guardrail": "v1", "g.Rule": "rule",
			},
			wantKinds: map[string]string{"g.Guardrail": "Guardrail", "g.GuardrailList": "GuardrailList"},
		},
		{
			name: "the static schemas win over a dynamic kind's of the same name",
			sets: []set{{resource: "guardrails", models: HostSchemas{"g.Guardrail": described("v1"), "shared.Meta": described("dynamic meta")}, model: "g.Guardrail", kind: "Guardrail"}},
			want: map[string]string{
				"io.k8s.api.rbac.v1.RoleBinding": "static RoleBinding", "shared.Meta": "static meta", "g.Guardrail": "v1",
			},
			wantKinds: map[string]string{"g.Guardrail": "Guardrail", "g.GuardrailList": "GuardrailList"},
		},
		{
			name: "two kinds",
			sets: []set{
				{resource: "guardrails", models: HostSchemas{"g.Guardrail": described("v1")}, model: "g.Guardrail", kind: "Guardrail"},
				{resource: "quotas", models: HostSchemas{"q.Quota": described("quota")}, model: "q.Quota", kind: "Quota"},
			},
			want: map[string]string{
				"io.k8s.api.rbac.v1.RoleBinding": "static RoleBinding", "shared.Meta": "static meta",
				"g.Guardrail": "v1", "q.Quota": "quota",
			},
			wantKinds: map[string]string{"g.Guardrail": "Guardrail", "g.GuardrailList": "GuardrailList", "q.Quota": "Quota", "q.QuotaList": "QuotaList"},
		},
		{
			name: "a new schema of a kind replaces the old one",
			sets: []set{
				{resource: "guardrails", models: HostSchemas{"g.Guardrail": described("v1"), "g.Rule": described("rule")}, model: "g.Guardrail", kind: "Guardrail"},
				{resource: "guardrails", models: HostSchemas{"g.Guardrail": described("v2")}, model: "g.Guardrail", kind: "Guardrail"},
			},
			want: map[string]string{
				"io.k8s.api.rbac.v1.RoleBinding": "static RoleBinding", "shared.Meta": "static meta", "g.Guardrail": "v2",
			},
			wantKinds: map[string]string{"g.Guardrail": "Guardrail", "g.GuardrailList": "GuardrailList"},
		},
		{
			name: "a kind's renamed model drops the old model's names",
			sets: []set{
				{resource: "guardrails", models: HostSchemas{"old.Guardrail": described("old")}, model: "old.Guardrail", kind: "Guardrail"},
				{resource: "guardrails", models: HostSchemas{"new.Guardrail": described("new")}, model: "new.Guardrail", kind: "Guardrail"},
			},
			want: map[string]string{
				"io.k8s.api.rbac.v1.RoleBinding": "static RoleBinding", "shared.Meta": "static meta", "new.Guardrail": "new",
			},
			wantKinds: map[string]string{"new.Guardrail": "Guardrail", "new.GuardrailList": "GuardrailList"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSchemaStore(static)
			for _, st := range tc.sets {
				s.set(st.resource, st.models, st.model, st.kind)
			}
			all, kinds := s.snapshot()
			got := map[string]string{}
			for n, sc := range all {
				got[n] = sc.Description
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("schemas = %v, want %v", got, tc.want)
			}
			if !reflect.DeepEqual(kinds, tc.wantKinds) {
				t.Errorf("kinds = %v, want %v", kinds, tc.wantKinds)
			}
		})
	}
}

func TestSchemaStoreSnapshotIsACopy(t *testing.T) {
	t.Parallel()
	static := HostSchemas{"io.k8s.api.rbac.v1.RoleBinding": described("static")}
	s := newSchemaStore(static)
	s.set("guardrails", HostSchemas{"g.Guardrail": described("v1")}, "g.Guardrail", "Guardrail")
	all, kinds := s.snapshot()
	all["x"] = described("x")
	delete(all, "g.Guardrail")
	kinds["x"] = "X"
	delete(kinds, "g.Guardrail")

	all, kinds = s.snapshot()
	if got := slices.Sorted(maps.Keys(all)); !slices.Equal(got, []string{"g.Guardrail", "io.k8s.api.rbac.v1.RoleBinding"}) {
		t.Errorf("schemas = %v after changing an earlier snapshot", got)
	}
	if got := slices.Sorted(maps.Keys(kinds)); !slices.Equal(got, []string{"g.Guardrail", "g.GuardrailList"}) {
		t.Errorf("kinds = %v after changing an earlier snapshot", got)
	}
	if len(static) != 1 {
		t.Errorf("the static schemas were changed: %v", slices.Sorted(maps.Keys(static)))
	}
}

// TestSchemaStoreConcurrent is for -race: the kind controller sets while
// OpenAPI builds read.
func TestSchemaStoreConcurrent(t *testing.T) {
	t.Parallel()
	s := newSchemaStore(HostSchemas{"static": described("static")})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 50 {
				model := fmt.Sprintf("m%d.Kind%d", i, j%3)
				s.set(fmt.Sprintf("r%d", i), HostSchemas{model: described(model)}, model, fmt.Sprintf("Kind%d", j%3))
			}
		})
		wg.Go(func() {
			for range 50 {
				all, kinds := s.snapshot()
				if _, ok := all["static"]; !ok {
					t.Error("a snapshot without the static schemas")
					return
				}
				if len(kinds)%2 != 0 {
					t.Errorf("kinds %v: a model without its list", kinds)
					return
				}
			}
		})
	}
	wg.Wait()
	_, kinds := s.snapshot()
	if len(kinds) != 8 {
		t.Errorf("kinds = %v, want a model and its list for each of 4 resources", kinds)
	}
}

func TestViewNamer(t *testing.T) {
	t.Parallel()
	base := func(name string) (string, spec.Extensions) {
		return "base:" + name, spec.Extensions{"x-base": name}
	}
	namer := viewNamer(base, map[string]string{"g.Guardrail": "Guardrail", "g.GuardrailList": "GuardrailList"})
	tests := []struct {
		name     string
		model    string
		wantName string
		wantExt  spec.Extensions
	}{
		{
			name:     "a dynamic model has its view's kind",
			model:    "g.Guardrail",
			wantName: "g.Guardrail",
			wantExt: spec.Extensions{"x-kubernetes-group-version-kind": []any{
				map[string]any{"group": "implicit.dev", "version": "v1alpha1", "kind": "Guardrail"},
			}},
		},
		{
			name:     "its list has the view's list kind",
			model:    "g.GuardrailList",
			wantName: "g.GuardrailList",
			wantExt: spec.Extensions{"x-kubernetes-group-version-kind": []any{
				map[string]any{"group": "implicit.dev", "version": "v1alpha1", "kind": "GuardrailList"},
			}},
		},
		{
			name:     "anything else is the base namer's",
			model:    "io.k8s.api.rbac.v1.RoleBinding",
			wantName: "base:io.k8s.api.rbac.v1.RoleBinding",
			wantExt:  spec.Extensions{"x-base": "io.k8s.api.rbac.v1.RoleBinding"},
		},
		{
			name:     "a model of the dynamic kind's document that is not the kind",
			model:    "g.Rule",
			wantName: "base:g.Rule",
			wantExt:  spec.Extensions{"x-base": "g.Rule"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gotName, gotExt := namer(tc.model)
			if gotName != tc.wantName {
				t.Errorf("name = %q, want %q", gotName, tc.wantName)
			}
			if !reflect.DeepEqual(gotExt, tc.wantExt) {
				t.Errorf("extensions = %v, want %v", gotExt, tc.wantExt)
			}
		})
	}
}
