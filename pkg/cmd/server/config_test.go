package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/implicit-dev/implicit-apiserver/pkg/cmd/server"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

const header = "apiVersion: config.implicit.dev/v1alpha1\nkind: ImplicitConfiguration\n"

const defaultResources = `resources:
- group: rbac.authorization.k8s.io
  version: v1
  resource: rolebindings
- group: rbac.authorization.k8s.io
  version: v1
  resource: roles
  strategy: Replace
- group: networking.k8s.io
  version: v1
  resource: networkpolicies
`

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadConfiguration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content string
		// want are the resources of the kinds served, in order.
		want []string
		// wantErrs are substrings of the error, one per expected problem.
		wantErrs []string
		// wantCount is the number of aggregated errors, when the error is an aggregate.
		wantCount int
	}{
		{
			name:    "the three default kinds",
			content: header + defaultResources,
			want:    []string{"rolebindings", "roles", "networkpolicies"},
		},
		{
			name:    "one kind",
			content: header + "resources:\n- {group: networking.k8s.io, version: v1, resource: networkpolicies}\n",
			want:    []string{"networkpolicies"},
		},
		{
			name:     "unknown top-level field",
			content:  header + "extra: true\n" + defaultResources,
			wantErrs: []string{`unknown field "extra"`},
		},
		{
			// encoding/json's strict decoding names the field but not the entry.
			name:     "unknown resource field",
			content:  header + "resources:\n- {group: rbac.authorization.k8s.io, version: v1, resource: roles, kind: Role}\n",
			wantErrs: []string{`unknown field "kind"`},
		},
		{
			name:     "a key given twice",
			content:  header + "kind: ImplicitConfiguration\n" + defaultResources,
			wantErrs: []string{`"kind" already set`},
		},
		{
			name:      "wrong apiVersion",
			content:   "apiVersion: config.implicit.dev/v1\nkind: ImplicitConfiguration\n" + defaultResources,
			wantErrs:  []string{`apiVersion/kind is "config.implicit.dev/v1"/"ImplicitConfiguration"`},
			wantCount: 1,
		},
		{
			name:      "wrong kind",
			content:   "apiVersion: config.implicit.dev/v1alpha1\nkind: Configuration\n" + defaultResources,
			wantErrs:  []string{`"config.implicit.dev/v1alpha1"/"Configuration"`},
			wantCount: 1,
		},
		{
			name:      "empty resources",
			content:   header + "resources: []\n",
			wantErrs:  []string{"resources: at least one is required"},
			wantCount: 1,
		},
		{
			name:      "no resources",
			content:   header,
			wantErrs:  []string{"resources: at least one is required"},
			wantCount: 1,
		},
		{
			name: "duplicate resource",
			content: header + defaultResources +
				"- {group: rbac.authorization.k8s.io, version: v1, resource: roles}\n",
			wantErrs:  []string{"resources[3]: roles is listed twice"},
			wantCount: 1,
		},
		{
			name:      "unknown kind",
			content:   header + "resources:\n- {group: policy.example.com, version: v1, resource: guardrails}\n",
			wantErrs:  []string{"resources[0]: policy.example.com/v1, Resource=guardrails is not supported by this release"},
			wantCount: 1,
		},
		{
			name:      "known resource in an unknown version",
			content:   header + "resources:\n- {group: rbac.authorization.k8s.io, version: v1beta1, resource: roles}\n",
			wantErrs:  []string{"resources[0]: rbac.authorization.k8s.io/v1beta1, Resource=roles is not supported by this release"},
			wantCount: 1,
		},
		{
			name:      "core group",
			content:   header + "resources:\n- {version: v1, resource: configmaps}\n",
			wantErrs:  []string{"resources[0]: /v1, Resource=configmaps is not supported by this release"},
			wantCount: 1,
		},
		{
			name:      "missing version and resource",
			content:   header + "resources:\n- {group: rbac.authorization.k8s.io}\n",
			wantErrs:  []string{"resources[0]: version and resource are required"},
			wantCount: 1,
		},
		{
			name:      "strategy Overlay",
			content:   header + "resources:\n- {group: rbac.authorization.k8s.io, version: v1, resource: roles, strategy: Overlay}\n",
			wantErrs:  []string{"resources[0]: strategy Overlay is not supported by this release"},
			wantCount: 1,
		},
		{
			name:      "bad strategy",
			content:   header + "resources:\n- {group: rbac.authorization.k8s.io, version: v1, resource: roles, strategy: replace}\n",
			wantErrs:  []string{`resources[0]: strategy "replace": want Replace or Overlay`},
			wantCount: 1,
		},
		{
			name: "several problems at once",
			content: "apiVersion: v1\nkind: ImplicitConfiguration\nresources:\n" +
				"- {group: rbac.authorization.k8s.io, version: v1, resource: roles}\n" +
				"- {group: policy.example.com, version: v1, resource: guardrails}\n" +
				"- {group: rbac.authorization.k8s.io, version: v1, resource: roles}\n" +
				"- {group: networking.k8s.io, version: v1, resource: networkpolicies, strategy: Overlay}\n" +
				"- {group: rbac.authorization.k8s.io, version: v1, resource: rolebindings, strategy: Merge}\n",
			wantErrs: []string{
				`apiVersion/kind is "v1"/"ImplicitConfiguration"`,
				"resources[1]: policy.example.com/v1, Resource=guardrails is not supported by this release",
				"resources[2]: roles is listed twice",
				"resources[3]: strategy Overlay is not supported by this release",
				`resources[4]: strategy "Merge": want Replace or Overlay`,
			},
			wantCount: 5,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, tc.content)
			kinds, err := server.LoadConfiguration(path)
			if len(tc.wantErrs) == 0 {
				if err != nil {
					t.Fatalf("LoadConfiguration: %v", err)
				}
				var got []string
				for _, k := range kinds {
					got = append(got, k.Resource())
				}
				if !slices.Equal(got, tc.want) {
					t.Errorf("kinds = %v, want %v", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("LoadConfiguration succeeded with %d kinds, want an error", len(kinds))
			}
			if kinds != nil {
				t.Errorf("kinds = %v alongside an error, want none", kinds)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file %s", err, path)
			}
			for _, want := range tc.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if tc.wantCount > 0 {
				var agg utilerrors.Aggregate
				if !errors.As(err, &agg) {
					t.Fatalf("error %q is not an aggregate", err)
				}
				if len(agg.Errors()) != tc.wantCount {
					t.Errorf("%d errors, want %d: %v", len(agg.Errors()), tc.wantCount, agg.Errors())
				}
			}
		})
	}
}

func TestLoadConfigurationKinds(t *testing.T) {
	t.Parallel()
	kinds, err := server.LoadConfiguration(writeConfig(t, header+defaultResources))
	if err != nil {
		t.Fatal(err)
	}
	want := registry.DefaultKinds()
	if len(kinds) != len(want) {
		t.Fatalf("%d kinds, want %d", len(kinds), len(want))
	}
	for i := range want {
		if kinds[i].Source != want[i].Source || kinds[i].Kind != want[i].Kind || kinds[i].Singular != want[i].Singular {
			t.Errorf("kinds[%d] = %v %s, want %v %s", i, kinds[i].Source, kinds[i].Kind, want[i].Source, want[i].Kind)
		}
	}
}

func TestLoadConfigurationMissingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "absent.yaml")
	_, err := server.LoadConfiguration(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "--config") {
		t.Errorf("err = %v, want a --config error wrapping os.ErrNotExist", err)
	}
}
