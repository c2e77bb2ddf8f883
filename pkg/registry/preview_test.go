package registry_test

import (
	"fmt"
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

func TestPreviewStorage(t *testing.T) {
	t.Parallel()
	served := func() []kinds.Kind { return kinds.BuiltIns() }
	rb := func(ns string) *runtime.RawExtension {
		return &runtime.RawExtension{Raw: []byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"ci-bot","namespace":"` + ns + `"},` +
			`"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"}}`)}
	}
	for _, tc := range []struct {
		name    string
		exists  bool
		spec    v1alpha1.PreviewSpec
		allow   string
		wantErr func(error) bool
	}{
		{name: "create needs create", spec: v1alpha1.PreviewSpec{Resource: "rolebindings", Object: rb("team")},
			allow: "alice create rbac.authorization.k8s.io/rolebindings team/"},
		{name: "update needs update of that object", exists: true, spec: v1alpha1.PreviewSpec{Resource: "rolebindings", Object: rb("")},
			allow: "alice update rbac.authorization.k8s.io/rolebindings team/ci-bot"},
		{name: "update without it is forbidden", exists: true, spec: v1alpha1.PreviewSpec{Resource: "rolebindings", Object: rb("")},
			allow: "alice create rbac.authorization.k8s.io/rolebindings team/", wantErr: apierrors.IsForbidden},
		{name: "delete needs delete", exists: true, spec: v1alpha1.PreviewSpec{Resource: "rolebindings", Delete: "ci-bot"},
			allow: "alice delete rbac.authorization.k8s.io/rolebindings team/ci-bot"},
		{name: "deleting what does not exist", spec: v1alpha1.PreviewSpec{Resource: "rolebindings", Delete: "ci-bot"},
			allow: "alice delete rbac.authorization.k8s.io/rolebindings team/ci-bot", wantErr: apierrors.IsNotFound},
		{name: "an object of another namespace", spec: v1alpha1.PreviewSpec{Resource: "rolebindings", Object: rb("org")},
			allow: "alice create rbac.authorization.k8s.io/rolebindings team/", wantErr: apierrors.IsBadRequest},
		{name: "an object of another kind", spec: v1alpha1.PreviewSpec{Resource: "roles", Object: rb("team")},
			allow: "alice create rbac.authorization.k8s.io/roles team/", wantErr: apierrors.IsBadRequest},
		{name: "both an object and a deletion", spec: v1alpha1.PreviewSpec{Resource: "rolebindings", Object: rb("team"), Delete: "ci-bot"},
			wantErr: apierrors.IsBadRequest},
		{name: "a view not served", spec: v1alpha1.PreviewSpec{Resource: "guardrails", Delete: "ci-bot"}, wantErr: apierrors.IsBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := &fakeQuestions{sources: map[string]bool{"rolebindings/team/ci-bot": tc.exists}}
			s := registry.NewPreviewStorage(src, &fakeAuthorizer{allow: map[string]bool{tc.allow: true}}, served)
			obj, err := s.Create(asUser("alice", "team"), &v1alpha1.Preview{Spec: tc.spec}, nil, &metav1.CreateOptions{})
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("err %v", err)
				}
				if src.previewed != nil {
					t.Fatal("previewed despite the error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := obj.(*v1alpha1.Preview)
			if p.Namespace != "team" || p.Status.Name != "ci-bot" || src.previewed == nil {
				t.Fatalf("got %+v, previewed %+v", p, src.previewed)
			}
			if tc.spec.Object != nil {
				typed, ok := src.previewed.obj.(*rbacv1.RoleBinding)
				if !ok || typed.Namespace != "team" || typed.RoleRef.Name != "view" {
					t.Fatalf("previewed %T %+v, want the typed RoleBinding in team", src.previewed.obj, src.previewed.obj)
				}
			} else if src.previewed.obj != nil {
				t.Fatalf("a deletion previewed %+v", src.previewed.obj)
			}
		})
	}
}

// TestPreviewRefusalHidesExistence: one who may neither create nor update a
// source gets the same refusal whether it exists or not, as kube-apiserver
// authorizes an edit before it reads the object.
func TestPreviewRefusalHidesExistence(t *testing.T) {
	t.Parallel()
	served := func() []kinds.Kind { return kinds.BuiltIns() }
	spec := v1alpha1.PreviewSpec{Resource: "rolebindings", Object: &runtime.RawExtension{Raw: []byte(
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"ci-bot"},` +
			`"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"}}`)}}
	var msgs []string
	for _, exists := range []bool{false, true} {
		src := &fakeQuestions{sources: map[string]bool{"rolebindings/team/ci-bot": exists}}
		s := registry.NewPreviewStorage(src, &fakeAuthorizer{allow: map[string]bool{}}, served)
		_, err := s.Create(asUser("mallory", "team"), &v1alpha1.Preview{Spec: spec}, nil, &metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("exists=%v: err %v, want Forbidden", exists, err)
		}
		msgs = append(msgs, err.Error())
	}
	if msgs[0] != msgs[1] {
		t.Fatalf("the refusal tells whether the source exists:\n  absent: %s\n  present: %s", msgs[0], msgs[1])
	}
}

// TestPreviewNamesOnlyReadableNamespaces: a preview names a namespace the
// edit reaches only when the requester may get that view item there; the
// others are counted in status.hidden (issue 24, item 9). A parent admin
// whose binding a child shadowed or excluded learns how many namespaces
// are hidden, never their names nor what they hold.
func TestPreviewNamesOnlyReadableNamespaces(t *testing.T) {
	t.Parallel()
	served := func() []kinds.Kind { return kinds.BuiltIns() }
	spec := v1alpha1.PreviewSpec{Resource: "rolebindings", Delete: "ci-bot"}
	changed := func(namespaces ...string) []v1alpha1.NamespaceChange {
		var out []v1alpha1.NamespaceChange
		for _, ns := range namespaces {
			out = append(out, v1alpha1.NamespaceChange{Namespace: ns, Type: v1alpha1.ChangeDeleted})
		}
		return out
	}
	unchanged := func(namespaces ...string) []v1alpha1.NamespaceUnchanged {
		var out []v1alpha1.NamespaceUnchanged
		for _, ns := range namespaces {
			out = append(out, v1alpha1.NamespaceUnchanged{Namespace: ns, Reason: v1alpha1.UnchangedShadowed, By: ns})
		}
		return out
	}
	many := make([]string, registry.MaxPreviewReviews+10)
	for i := range many {
		many[i] = fmt.Sprintf("team-%03d", i)
	}
	const edit = "alice delete rbac.authorization.k8s.io/rolebindings team/ci-bot"
	getIn := func(ns string) string { return "alice get implicit.dev/rolebindings " + ns + "/ci-bot" }
	for _, tc := range []struct {
		name          string
		status        v1alpha1.PreviewStatus
		allow         []string
		wantChanged   []v1alpha1.NamespaceChange
		wantUnchanged []v1alpha1.NamespaceUnchanged
		wantHidden    int
		// maxAsked bounds the access reviews (0: not checked).
		maxAsked int
	}{
		{
			name:   "the children the requester may not read are hidden",
			status: v1alpha1.PreviewStatus{Reached: 4, Changed: changed("team", "team-dev", "team-secret"), Unchanged: unchanged("team-private")},
			allow:  []string{edit, getIn("team"), getIn("team-dev")},
			// The count, not the names.
			wantChanged: changed("team", "team-dev"), wantHidden: 2,
		},
		{
			name:   "one who may get the view item everywhere is asked once",
			status: v1alpha1.PreviewStatus{Reached: 4, Changed: changed("team", "team-dev", "team-secret"), Unchanged: unchanged("team-private")},
			allow:  []string{edit, getIn("")},
			// The edit's review and the cluster-wide one.
			wantChanged: changed("team", "team-dev", "team-secret"), wantUnchanged: unchanged("team-private"), maxAsked: 2,
		},
		{
			name:   "nothing readable: only the count",
			status: v1alpha1.PreviewStatus{Reached: 2, Changed: changed("team"), Unchanged: unchanged("team-private")},
			allow:  []string{edit}, wantHidden: 2,
		},
		{
			name:   "the access reviews are capped: namespaces past them are hidden",
			status: v1alpha1.PreviewStatus{Reached: len(many), Changed: changed(many...)},
			allow: append([]string{edit}, func() []string {
				var out []string
				for _, ns := range many {
					out = append(out, getIn(ns))
				}
				return out
			}()...),
			wantChanged: changed(many[:registry.MaxPreviewReviews]...), wantHidden: 10, maxAsked: registry.MaxPreviewReviews + 2,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := &fakeQuestions{sources: map[string]bool{"rolebindings/team/ci-bot": true}, preview: &tc.status}
			allow := map[string]bool{}
			for _, a := range tc.allow {
				allow[a] = true
			}
			authz := &fakeAuthorizer{allow: allow}
			s := registry.NewPreviewStorage(src, authz, served)
			obj, err := s.Create(asUser("alice", "team"), &v1alpha1.Preview{Spec: spec}, nil, &metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			st := obj.(*v1alpha1.Preview).Status
			if !reflect.DeepEqual(st.Changed, tc.wantChanged) {
				t.Errorf("changed in %d namespaces (first %v), want %d (first %v)", len(st.Changed), firstNS(st.Changed), len(tc.wantChanged), firstNS(tc.wantChanged))
			}
			if !reflect.DeepEqual(st.Unchanged, tc.wantUnchanged) {
				t.Errorf("unchanged %+v, want %+v", st.Unchanged, tc.wantUnchanged)
			}
			if st.Hidden != tc.wantHidden {
				t.Errorf("hidden %d, want %d", st.Hidden, tc.wantHidden)
			}
			if st.Reached != tc.status.Reached {
				t.Errorf("reached %d, want %d: the count the fan-out warning tells anyway", st.Reached, tc.status.Reached)
			}
			if tc.maxAsked > 0 && len(authz.asked) > tc.maxAsked {
				t.Errorf("%d access reviews, want at most %d", len(authz.asked), tc.maxAsked)
			}
		})
	}
}

// firstNS names the first namespaces of changes, for a short message.
func firstNS(changes []v1alpha1.NamespaceChange) []string {
	var out []string
	for i, c := range changes {
		if i == 5 {
			return append(out, "...")
		}
		out = append(out, c.Namespace)
	}
	return out
}
