package merge_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

func TestParseExclusions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		value string
		want  []merge.Exclusion
		// wantErrs holds, per expected error in order, a substring it must contain.
		wantErrs []string
	}{
		{name: "empty", value: ""},
		{name: "only blanks and commas", value: " , ,,\t, "},
		{
			name:  "one entry",
			value: "rolebindings/ci-bot",
			want:  []merge.Exclusion{{Resource: "rolebindings", Name: "ci-bot"}},
		},
		{
			name:  "list with a wildcard, as in DESIGN.md",
			value: "rolebindings/ci-bot,networkpolicies/*",
			want:  []merge.Exclusion{{Resource: "rolebindings", Name: "ci-bot"}, {Resource: "networkpolicies", Name: "*"}},
		},
		{
			name:  "blanks around entries and empty entries ignored",
			value: "  rolebindings/a ,\t, networkpolicies/*\n,,roles/b,",
			want: []merge.Exclusion{
				{Resource: "rolebindings", Name: "a"},
				{Resource: "networkpolicies", Name: "*"},
				{Resource: "roles", Name: "b"},
			},
		},
		{
			name:  "resource lower-cased, name kept",
			value: "RoleBindings/ci-bot,NetworkPolicies/*,Guardrails/Keep-Case",
			want: []merge.Exclusion{
				{Resource: "rolebindings", Name: "ci-bot"},
				{Resource: "networkpolicies", Name: "*"},
				{Resource: "guardrails", Name: "Keep-Case"},
			},
		},
		{
			name:  "blanks around the slash are ignored",
			value: "rolebindings / ci-bot, roles/ *",
			want: []merge.Exclusion{
				{Resource: "rolebindings", Name: "ci-bot"},
				{Resource: "roles", Name: "*"},
			},
		},
		{
			name:     "group-qualified, wildcard and blank-containing entries are errors",
			value:    "rolebindings.rbac.authorization.k8s.io/ci-bot,*/ci-bot,rolebindings/ci bot,roles/x",
			want:     []merge.Exclusion{{Resource: "roles", Name: "x"}},
			wantErrs: []string{"rolebindings.rbac.authorization.k8s.io/ci-bot", "*/ci-bot", "rolebindings/ci bot"},
		},
		{
			name:  "order and duplicates kept",
			value: "roles/b,rolebindings/a,roles/b",
			want: []merge.Exclusion{
				{Resource: "roles", Name: "b"},
				{Resource: "rolebindings", Name: "a"},
				{Resource: "roles", Name: "b"},
			},
		},
		{
			name:     "no slash",
			value:    "rolebindings",
			wantErrs: []string{`"rolebindings"`},
		},
		{
			name:     "empty resource",
			value:    "/ci-bot",
			wantErrs: []string{`"/ci-bot"`},
		},
		{
			name:     "empty name",
			value:    "rolebindings/",
			wantErrs: []string{`"rolebindings/"`},
		},
		{
			name:     "too many slashes",
			value:    "rbac.authorization.k8s.io/rolebindings/ci-bot",
			wantErrs: []string{"too many slashes"},
		},
		{
			name:     "name that is not a path segment",
			value:    "rolebindings/..,rolebindings/.,rolebindings/a%b",
			wantErrs: []string{`"rolebindings/.."`, `"rolebindings/."`, `"rolebindings/a%b"`},
		},
		{
			name:  "malformed entries reported, good ones survive",
			value: "rolebindings/ci-bot, typo ,roles/,networkpolicies/*,a/b/c,/x,roles/viewer",
			want: []merge.Exclusion{
				{Resource: "rolebindings", Name: "ci-bot"},
				{Resource: "networkpolicies", Name: "*"},
				{Resource: "roles", Name: "viewer"},
			},
			wantErrs: []string{`"typo"`, `"roles/"`, `"a/b/c"`, `"/x"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := merge.ParseExclusions(tt.value)
			if len(got) != len(tt.want) || (len(got) > 0 && !reflect.DeepEqual(got, tt.want)) {
				t.Errorf("ParseExclusions(%q) = %v, want %v", tt.value, got, tt.want)
			}
			if len(errs) != len(tt.wantErrs) {
				t.Fatalf("ParseExclusions(%q) errors = %v, want %d errors containing %q", tt.value, errs, len(tt.wantErrs), tt.wantErrs)
			}
			for i, err := range errs {
				if !strings.Contains(err.Error(), tt.wantErrs[i]) {
					t.Errorf("error %d = %q, want it to contain %q", i, err, tt.wantErrs[i])
				}
			}
		})
	}
}

func TestExclusionsOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ns   *merge.Namespace
		want []merge.Exclusion
	}{
		{name: "nil namespace"},
		{name: "no annotations", ns: &merge.Namespace{Name: "team"}},
		{name: "other annotations", ns: &merge.Namespace{Name: "team", Annotations: map[string]string{"example.com/exclude": "roles/a"}}},
		{name: "empty annotation", ns: &merge.Namespace{Name: "team", Annotations: map[string]string{v1alpha1.AnnotationExclude: ""}}},
		{
			name: "well-formed entries",
			ns:   &merge.Namespace{Name: "team", Annotations: map[string]string{v1alpha1.AnnotationExclude: "rolebindings/ci-bot,networkpolicies/*"}},
			want: []merge.Exclusion{{Resource: "rolebindings", Name: "ci-bot"}, {Resource: "networkpolicies", Name: "*"}},
		},
		{
			name: "malformed entries dropped",
			ns:   &merge.Namespace{Name: "team", Annotations: map[string]string{v1alpha1.AnnotationExclude: "bogus, Roles/viewer ,a/b/c"}},
			want: []merge.Exclusion{{Resource: "roles", Name: "viewer"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := merge.ExclusionsOf(tt.ns)
			if len(got) != len(tt.want) || (len(got) > 0 && !reflect.DeepEqual(got, tt.want)) {
				t.Errorf("ExclusionsOf() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestExclusionMatches(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		exclusion merge.Exclusion
		resource  string
		item      string
		want      bool
	}{
		{name: "same resource and name", exclusion: merge.Exclusion{Resource: "rolebindings", Name: "ci-bot"}, resource: "rolebindings", item: "ci-bot", want: true},
		{name: "other name", exclusion: merge.Exclusion{Resource: "rolebindings", Name: "ci-bot"}, resource: "rolebindings", item: "ci-bot-2", want: false},
		{name: "other resource", exclusion: merge.Exclusion{Resource: "rolebindings", Name: "ci-bot"}, resource: "roles", item: "ci-bot", want: false},
		{name: "wildcard matches any name", exclusion: merge.Exclusion{Resource: "rolebindings", Name: "*"}, resource: "rolebindings", item: "anything", want: true},
		{name: "wildcard stays in its resource", exclusion: merge.Exclusion{Resource: "rolebindings", Name: "*"}, resource: "roles", item: "anything", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.exclusion.Matches(tt.resource, tt.item); got != tt.want {
				t.Errorf("%v.Matches(%q, %q) = %v, want %v", tt.exclusion, tt.resource, tt.item, got, tt.want)
			}
		})
	}
}

func TestExclusionString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		exclusion merge.Exclusion
		want      string
	}{
		{name: "named", exclusion: merge.Exclusion{Resource: "rolebindings", Name: "ci-bot"}, want: "rolebindings/ci-bot"},
		{name: "wildcard", exclusion: merge.Exclusion{Resource: "networkpolicies", Name: "*"}, want: "networkpolicies/*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.exclusion.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			// What String renders parses back to the same exclusion.
			back, errs := merge.ParseExclusions(tt.exclusion.String())
			if len(errs) != 0 || len(back) != 1 || !reflect.DeepEqual(back[0], tt.exclusion) {
				t.Errorf("ParseExclusions(%q) = %v, %v; want [%v]", tt.exclusion.String(), back, errs, tt.exclusion)
			}
		})
	}
}
