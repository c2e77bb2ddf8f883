package registry_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

func TestRejectWrite(t *testing.T) {
	t.Parallel()
	items := []runtime.Object{
		viewRoleBinding("team-a", "org-viewers", merge.ScopeGlobal, "implicit-global"),
		viewRoleBinding("team-a", "local-rb", merge.ScopeLocal, "team-a"),
		&rbacv1.Role{ObjectMeta: viewMeta("team-a", "reader", merge.ScopeParent, "dept")},
		&networkingv1.NetworkPolicy{ObjectMeta: viewMeta("team-a", "default-deny", merge.ScopeGlobal, "implicit-global")},
	}
	tests := []struct {
		name      string
		kind      kinds.Kind
		verb      string
		namespace string
		item      string
		// want are substrings of the message; wantNot must not appear.
		want     []string
		wantNot  []string
		wantGets []string
	}{
		{
			name: "update of a global item names its source namespace",
			kind: kinds.RoleBindings(), verb: "update", namespace: "team-a", item: "org-viewers",
			want:     []string{"rolebindings.implicit.dev", "read-only", "update", "rolebindings.rbac.authorization.k8s.io", `"org-viewers"`, `namespace "implicit-global"`},
			wantGets: []string{"team-a/org-viewers"},
		},
		{
			name: "delete of a local item names the namespace itself",
			kind: kinds.RoleBindings(), verb: "delete", namespace: "team-a", item: "local-rb",
			want:     []string{"delete", "rolebindings.rbac.authorization.k8s.io", `"local-rb"`, `namespace "team-a"`},
			wantGets: []string{"team-a/local-rb"},
		},
		{
			name: "patch of a parent role",
			kind: kinds.Roles(), verb: "patch", namespace: "team-a", item: "reader",
			want:     []string{"roles.implicit.dev", "patch", "roles.rbac.authorization.k8s.io", `"reader"`, `namespace "dept"`},
			wantNot:  []string{"rolebindings"},
			wantGets: []string{"team-a/reader"},
		},
		{
			name: "update of a network policy",
			kind: kinds.NetworkPolicies(), verb: "update", namespace: "team-a", item: "default-deny",
			want:     []string{"networkpolicies.implicit.dev", "networkpolicies.networking.k8s.io", `namespace "implicit-global"`},
			wantGets: []string{"team-a/default-deny"},
		},
		{
			name: "update of an item not in the view says where to create it",
			kind: kinds.RoleBindings(), verb: "update", namespace: "team-b", item: "org-viewers",
			want:     []string{"rolebindings.rbac.authorization.k8s.io", `"org-viewers"`, `namespace "team-b"`, "global namespace"},
			wantNot:  []string{"implicit-global"},
			wantGets: []string{"team-b/org-viewers"},
		},
		{
			name: "create on the collection names the source resource",
			kind: kinds.RoleBindings(), verb: "create", namespace: "team-a",
			want: []string{"rolebindings.implicit.dev", "create", "rolebindings.rbac.authorization.k8s.io"},
		},
		{
			name: "deletecollection across namespaces",
			kind: kinds.RoleBindings(), verb: "deletecollection",
			want: []string{"deletecollection", "rolebindings.rbac.authorization.k8s.io"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			viewer := newFakeViewer(tt.kind.Resource(), items...)
			s := registry.NewStorage(group, tt.kind, viewer)
			err := s.RejectWrite(context.Background(), tt.verb, tt.namespace, tt.item)
			if err == nil {
				t.Fatal("RejectWrite returned nil")
			}
			st := err.Status()
			if st.Code != http.StatusMethodNotAllowed || st.Reason != metav1.StatusReasonMethodNotAllowed || st.Status != metav1.StatusFailure {
				t.Errorf("status = %d %s %s, want 405 MethodNotAllowed Failure", st.Code, st.Reason, st.Status)
			}
			if !apierrors.IsMethodNotSupported(err) {
				t.Errorf("IsMethodNotSupported(%v) = false", err)
			}
			if st.Details == nil || st.Details.Group != group || st.Details.Kind != tt.kind.Resource() || st.Details.Name != tt.item {
				t.Errorf("details = %+v, want group %s, kind %s, name %q", st.Details, group, tt.kind.Resource(), tt.item)
			}
			for _, w := range tt.want {
				if !strings.Contains(st.Message, w) {
					t.Errorf("message %q does not contain %q", st.Message, w)
				}
			}
			for _, w := range tt.wantNot {
				if strings.Contains(st.Message, w) {
					t.Errorf("message %q contains %q", st.Message, w)
				}
			}
			if gets, _ := viewer.calls(); !reflect.DeepEqual(gets, tt.wantGets) {
				t.Errorf("viewer Get calls = %q, want %q", gets, tt.wantGets)
			}
		})
	}
}
