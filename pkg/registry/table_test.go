package registry_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

func TestTableColumns(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		"rolebindings":    {"Name", "Role", "Subjects", "Scope", "Source", "Age", "Locked", "Overlays", "Conflict"},
		"roles":           {"Name", "Rules", "Scope", "Source", "Age", "Locked", "Overlays", "Conflict"},
		"networkpolicies": {"Name", "Pod-Selector", "Policy-Types", "Scope", "Source", "Age", "Locked", "Overlays", "Conflict"},
	}
	if len(kinds.BuiltIns()) != len(want) {
		t.Fatalf("BuiltIns() has %d kinds, the test knows %d", len(kinds.BuiltIns()), len(want))
	}
	for _, kind := range kinds.BuiltIns() {
		t.Run(kind.Resource(), func(t *testing.T) {
			t.Parallel()
			s := registry.NewStorage(group, kind, newFakeViewer(kind.Resource()))
			table, err := s.ConvertToTable(context.Background(), kind.NewList(), &metav1.TableOptions{})
			if err != nil {
				t.Fatalf("ConvertToTable: %v", err)
			}
			var names []string
			for _, c := range table.ColumnDefinitions {
				names = append(names, c.Name)
				if c.Type == "" || c.Description == "" {
					t.Errorf("column %s: type %q, description %q; want both set", c.Name, c.Type, c.Description)
				}
			}
			if !reflect.DeepEqual(names, want[kind.Resource()]) {
				t.Errorf("columns = %q, want %q", names, want[kind.Resource()])
			}
			if table.ColumnDefinitions[0].Format != "name" {
				t.Errorf("Name column format = %q, want name", table.ColumnDefinitions[0].Format)
			}
			if len(table.Rows) != 0 {
				t.Errorf("rows of an empty list = %v, want none", table.Rows)
			}
		})
	}
}

func subject(kind, namespace, name string) rbacv1.Subject {
	s := rbacv1.Subject{Kind: kind, Namespace: namespace, Name: name}
	if kind != rbacv1.ServiceAccountKind {
		s.APIGroup = rbacv1.GroupName
	}
	return s
}

func TestTableRows(t *testing.T) {
	t.Parallel()
	fiveDaysAgo := metav1.NewTime(time.Now().Add(-5*24*time.Hour - time.Minute))
	withMeta := func(m metav1.ObjectMeta) metav1.ObjectMeta {
		m.CreationTimestamp = fiveDaysAgo
		return m
	}
	rb := func(roleKind, roleName string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{
			ObjectMeta: withMeta(viewMeta("team-a", "rb", merge.ScopeGlobal, "implicit-global")),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: roleKind, Name: roleName},
			Subjects:   subjects,
		}
	}
	np := func(sel metav1.LabelSelector, types ...networkingv1.PolicyType) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{
			ObjectMeta: withMeta(viewMeta("team-a", "np", merge.ScopeParent, "dept")),
			Spec:       networkingv1.NetworkPolicySpec{PodSelector: sel, PolicyTypes: types},
		}
	}
	role := func(rules int) *rbacv1.Role {
		r := &rbacv1.Role{ObjectMeta: withMeta(viewMeta("team-a", "role", merge.ScopeLocal, "team-a"))}
		for range rules {
			r.Rules = append(r.Rules, rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}})
		}
		return r
	}
	merged := rb("ClusterRole", "view", subject(rbacv1.UserKind, "", "alice"))
	merged.Annotations = map[string]string{
		v1alpha1.AnnotationLocked:   "true",
		v1alpha1.AnnotationOverlays: "org-platform, team-a",
		v1alpha1.AnnotationConflict: "team-a: roleRef is set by the locked implicit-global/rb and was kept; subjects[name=bob] is set by the locked source and was kept",
	}
	tests := []struct {
		name string
		kind kinds.Kind
		obj  runtime.Object
		want []any
		// wide are the -o wide cells (LOCKED, OVERLAYS, CONFLICT); nil:
		// an item merging left alone.
		wide []any
	}{
		{
			name: "locked, overlaid and in conflict: the wide columns say so, the conflict cut to 80",
			kind: kinds.RoleBindings(),
			obj:  merged,
			want: []any{"rb", "ClusterRole/view", "User/alice", "global", "implicit-global", "5d"},
			wide: []any{"true", "org-platform, team-a", "team-a: roleRef is set by the locked implicit-global/rb and was kept; subjects[…"},
		},
		{
			name: "rolebinding to a ClusterRole, one user",
			kind: kinds.RoleBindings(),
			obj:  rb("ClusterRole", "view", subject(rbacv1.UserKind, "", "alice")),
			want: []any{"rb", "ClusterRole/view", "User/alice", "global", "implicit-global", "5d"},
		},
		{
			name: "rolebinding to a Role, no subjects",
			kind: kinds.RoleBindings(),
			obj:  rb("Role", "reader"),
			want: []any{"rb", "Role/reader", "", "global", "implicit-global", "5d"},
		},
		{
			name: "service account with and without namespace, group: three shown in full",
			kind: kinds.RoleBindings(),
			obj: rb("ClusterRole", "edit",
				subject(rbacv1.ServiceAccountKind, "ci", "builder"),
				subject(rbacv1.ServiceAccountKind, "", "default"),
				subject(rbacv1.GroupKind, "", "devs")),
			want: []any{"rb", "ClusterRole/edit", "ServiceAccount/ci/builder, ServiceAccount/default, Group/devs", "global", "implicit-global", "5d"},
		},
		{
			name: "four subjects: three and one more",
			kind: kinds.RoleBindings(),
			obj: rb("ClusterRole", "view",
				subject(rbacv1.UserKind, "", "a"), subject(rbacv1.UserKind, "", "b"),
				subject(rbacv1.UserKind, "", "c"), subject(rbacv1.UserKind, "", "d")),
			want: []any{"rb", "ClusterRole/view", "User/a, User/b, User/c, + 1 more...", "global", "implicit-global", "5d"},
		},
		{
			name: "six subjects: three and three more",
			kind: kinds.RoleBindings(),
			obj: rb("ClusterRole", "view",
				subject(rbacv1.UserKind, "", "a"), subject(rbacv1.ServiceAccountKind, "ns", "b"),
				subject(rbacv1.UserKind, "", "c"), subject(rbacv1.UserKind, "", "d"),
				subject(rbacv1.UserKind, "", "e"), subject(rbacv1.UserKind, "", "f")),
			want: []any{"rb", "ClusterRole/view", "User/a, ServiceAccount/ns/b, User/c, + 3 more...", "global", "implicit-global", "5d"},
		},
		{
			name: "role with two rules",
			kind: kinds.Roles(),
			obj:  role(2),
			want: []any{"role", int64(2), "local", "team-a", "5d"},
		},
		{
			name: "role without rules",
			kind: kinds.Roles(),
			obj:  role(0),
			want: []any{"role", int64(0), "local", "team-a", "5d"},
		},
		{
			name: "network policy selecting all pods, no policy types",
			kind: kinds.NetworkPolicies(),
			obj:  np(metav1.LabelSelector{}),
			want: []any{"np", "<all pods>", "", "parent", "dept", "5d"},
		},
		{
			name: "network policy with labels and both policy types",
			kind: kinds.NetworkPolicies(),
			obj: np(metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress),
			want: []any{"np", "app=web", "Ingress,Egress", "parent", "dept", "5d"},
		},
		{
			name: "network policy with an expression",
			kind: kinds.NetworkPolicies(),
			obj: np(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"db", "cache"}}}},
				networkingv1.PolicyTypeEgress),
			want: []any{"np", "tier in (cache,db)", "Egress", "parent", "dept", "5d"},
		},
		{
			name: "network policy with an invalid selector",
			kind: kinds.NetworkPolicies(),
			obj: np(metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: "Sometimes"}}}),
			want: []any{"np", "<invalid>", "", "parent", "dept", "5d"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := registry.NewStorage(group, tt.kind, newFakeViewer(tt.kind.Resource()))
			table, err := s.ConvertToTable(context.Background(), tt.obj, &metav1.TableOptions{})
			if err != nil {
				t.Fatalf("ConvertToTable: %v", err)
			}
			if len(table.Rows) != 1 {
				t.Fatalf("rows = %d, want 1", len(table.Rows))
			}
			row := table.Rows[0]
			wide := tt.wide
			if wide == nil {
				wide = []any{"false", "<none>", "<none>"}
			}
			if want := append(slices.Clone(tt.want), wide...); !reflect.DeepEqual(row.Cells, want) {
				t.Errorf("cells = %#v\nwant    %#v", row.Cells, want)
			}
			if len(row.Cells) != len(table.ColumnDefinitions) {
				t.Errorf("%d cells for %d columns", len(row.Cells), len(table.ColumnDefinitions))
			}
			if row.Object.Object != tt.obj {
				t.Errorf("row object = %v, want the converted item", row.Object.Object)
			}
		})
	}
}

func TestTableShape(t *testing.T) {
	t.Parallel()
	item := func(name string) rbacv1.RoleBinding {
		return *viewRoleBinding("team-a", name, merge.ScopeLocal, "team-a")
	}
	one := item("one")
	one.ResourceVersion = "11"
	remaining := int64(5)
	list := &rbacv1.RoleBindingList{
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next-page", RemainingItemCount: &remaining},
		Items:    []rbacv1.RoleBinding{item("b"), item("a")},
	}
	tests := []struct {
		name         string
		obj          runtime.Object
		opts         runtime.Object
		wantHeaders  bool
		wantNames    []any
		wantRV       string
		wantContinue string
		wantRemain   *int64
	}{
		{name: "list, in its order", obj: list, opts: &metav1.TableOptions{}, wantHeaders: true, wantNames: []any{"b", "a"}, wantRV: "42", wantContinue: "next-page", wantRemain: &remaining},
		{name: "list without headers", obj: list, opts: &metav1.TableOptions{NoHeaders: true}, wantNames: []any{"b", "a"}, wantRV: "42", wantContinue: "next-page", wantRemain: &remaining},
		{name: "single object", obj: &one, opts: &metav1.TableOptions{}, wantHeaders: true, wantNames: []any{"one"}, wantRV: "11"},
		{name: "single object without headers", obj: &one, opts: &metav1.TableOptions{NoHeaders: true}, wantNames: []any{"one"}, wantRV: "11"},
		{name: "no options: headers", obj: &one, opts: nil, wantHeaders: true, wantNames: []any{"one"}, wantRV: "11"},
		{name: "empty list", obj: &rbacv1.RoleBindingList{}, opts: &metav1.TableOptions{}, wantHeaders: true, wantNames: []any{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := registry.NewStorage(group, kinds.RoleBindings(), newFakeViewer("rolebindings"))
			table, err := s.ConvertToTable(context.Background(), tt.obj, tt.opts)
			if err != nil {
				t.Fatalf("ConvertToTable: %v", err)
			}
			if got := len(table.ColumnDefinitions) > 0; got != tt.wantHeaders {
				t.Errorf("headers present = %v, want %v", got, tt.wantHeaders)
			}
			names := []any{}
			for _, r := range table.Rows {
				names = append(names, r.Cells[0])
				if len(r.Cells) != 9 {
					t.Errorf("row %v has %d cells, want 9 (6, and 3 for -o wide) with or without headers", r.Cells[0], len(r.Cells))
				}
			}
			if !reflect.DeepEqual(names, tt.wantNames) {
				t.Errorf("row names = %v, want %v", names, tt.wantNames)
			}
			if table.ResourceVersion != tt.wantRV || table.Continue != tt.wantContinue || !reflect.DeepEqual(table.RemainingItemCount, tt.wantRemain) {
				t.Errorf("list meta = %q, %q, %v; want %q, %q, %v", table.ResourceVersion, table.Continue, table.RemainingItemCount, tt.wantRV, tt.wantContinue, tt.wantRemain)
			}
		})
	}
}

func TestTableAge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		created metav1.Time
		want    string
	}{
		{name: "unknown creation time", want: "<unknown>"},
		{name: "five days", created: metav1.NewTime(time.Now().Add(-5*24*time.Hour - time.Minute)), want: "5d"},
		{name: "two years", created: metav1.NewTime(time.Now().Add(-2*365*24*time.Hour - time.Hour)), want: "2y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rb := viewRoleBinding("team-a", "rb", merge.ScopeLocal, "team-a")
			rb.CreationTimestamp = tt.created
			s := registry.NewStorage(group, kinds.RoleBindings(), newFakeViewer("rolebindings"))
			table, err := s.ConvertToTable(context.Background(), rb, &metav1.TableOptions{})
			if err != nil {
				t.Fatalf("ConvertToTable: %v", err)
			}
			cells := table.Rows[0].Cells
			age := slices.IndexFunc(table.ColumnDefinitions, func(c metav1.TableColumnDefinition) bool { return c.Name == "Age" })
			if got := cells[age]; got != tt.want {
				t.Errorf("age = %v, want %q", got, tt.want)
			}
		})
	}
}
