package offline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/offline"
)

// exceptionFiles: a global RoleBinding shared whose source requires
// approved exceptions when approval is set; team declares the exception tmp
// of it (requested by olivia, ending at end) with approvals, an
// implicit.dev/exception-approvals value or "".
func exceptionFiles(approval bool, end time.Time, approvals string) map[string]string {
	required := ""
	if approval {
		required = "\n    implicit.dev/exception-approval: required"
	}
	ns := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: team
  annotations:
    implicit.dev/exceptions: '%s'
`, exceptionsValue(end))
	if approvals != "" {
		ns += "    implicit.dev/exception-approvals: '" + approvals + "'\n"
	}
	return map[string]string{
		"ns.yaml": ns,
		"rb.yaml": `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: shared
  namespace: implicit-global
  annotations:
    note: none` + required + `
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: everyone}]
`,
		"rbac.yaml": `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: approver}
rules: [{apiGroups: [rbac.authorization.k8s.io], resources: [rolebindings], verbs: [approve]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: approvers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: approver}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: olivia}, {apiGroup: rbac.authorization.k8s.io, kind: User, name: org-admin}]
`,
	}
}

func exceptionSpec(end time.Time) v1alpha1.ExceptionSpec {
	s := v1alpha1.ExceptionSpec{Name: "tmp", Exclude: []string{"rolebindings/shared"}, Reason: "INC-1", RequestedBy: "olivia"}
	at := metav1.NewTime(end)
	s.ExpiresAt = &at
	return s
}

func exceptionsValue(end time.Time) string {
	return fmt.Sprintf(`[{"name":"tmp","exclude":["rolebindings/shared"],"reason":"INC-1","requestedBy":"olivia","expiresAt":%q}]`, end.UTC().Format(time.RFC3339))
}

func buildAt(t *testing.T, files map[string]string, now time.Time) *offline.World {
	t.Helper()
	fs, err := offline.ReadDir(writeFiles(t, files))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := offline.Decode(fs)
	if err != nil {
		t.Fatal(err)
	}
	w, err := offline.Build(objs, offline.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func viewNames(t *testing.T, w *offline.World, namespace string) string {
	t.Helper()
	items, err := w.View(namespace, "rolebindings")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range items {
		names = append(names, it.Name)
	}
	return strings.Join(names, ",")
}

// TestExceptionEnds: an exception is in effect until the reference time
// passes its end; from then on the server's mark is written and the item
// is back in the view. The default reference time is the current time.
func TestExceptionEnds(t *testing.T) {
	t.Parallel()
	end := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	files := exceptionFiles(false, end, "")
	for _, tt := range []struct {
		name string
		now  time.Time
		want string
	}{
		{name: "before the end: excepted", now: end.Add(-time.Second), want: ""},
		{name: "at the end: marked, back", now: end, want: "shared"},
		{name: "after the end: marked, back", now: end.Add(24 * time.Hour), want: "shared"},
		{name: "default, the current time (after the end)", want: "shared"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := buildAt(t, files, tt.now)
			if got := viewNames(t, w, "team"); got != tt.want {
				t.Errorf("team's rolebindings %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("an edit of the namespace keeps the server's mark", func(t *testing.T) {
		w := buildAt(t, files, end.Add(time.Hour))
		ns, _ := w.File(offline.Key{Kind: "Namespace", Name: "team"})
		edit := ns.DeepCopy()
		edit.SetLabels(map[string]string{"tier": "gold"})
		v, err := w.Judge(context.Background(), offline.Edit{Object: edit, Requester: offline.Requester{User: "olivia"}})
		if err != nil {
			t.Fatal(err)
		}
		if !v.Allowed {
			t.Errorf("an update of team by olivia (labels only) refused: %s", v.Reason)
		}
		a := edit.GetAnnotations()
		a[v1alpha1.AnnotationExceptionsExpired] = "{}"
		edit.SetAnnotations(a)
		v, err = w.Judge(context.Background(), offline.Edit{Object: edit, Requester: offline.Requester{User: "olivia"}})
		if err != nil {
			t.Fatal(err)
		}
		if v.Allowed || !strings.Contains(v.Reason, "implicit-apiserver") {
			t.Errorf("olivia's removal of the mark: %+v, want refused as the server's to write", v)
		}
	})
}

// TestExceptionApproval: an ImplicitTest edit that approves an exception is
// judged by the guards with the files' RBAC: the requester's own approval
// is refused, another approver's (allowed approve on the source) admitted
// and then in effect.
func TestExceptionApproval(t *testing.T) {
	t.Parallel()
	end := time.Now().Add(30 * 24 * time.Hour).UTC().Truncate(time.Second)
	digest := merge.ExceptionDigest(exceptionSpec(end))
	approvals := func(by string) string {
		return fmt.Sprintf(`{"tmp":{"by":%q,"at":"2026-01-01T00:00:00Z","digest":%q,"sources":["implicit-global"]}}`, by, digest)
	}
	files := exceptionFiles(true, end, "")
	nsEdit := func(by string) string {
		return fmt.Sprintf(`  object:
    apiVersion: v1
    kind: Namespace
    metadata:
      name: team
      annotations:
        implicit.dev/exceptions: '%s'
        implicit.dev/exception-approvals: '%s'
`, exceptionsValue(end), approvals(by))
	}
	files["test.yaml"] = `apiVersion: test.implicit.dev/v1alpha1
kind: ImplicitTest
metadata: {name: approvals}
views:
- {namespace: team, resource: rolebindings, contains: [{name: shared}]}
edits:
- name: the requester approves their own exception
  requester: {user: olivia}
` + nsEdit("olivia") + `  refused: true
  reason: can't approve their own request
- name: an approver allowed approve on the source
  requester: {user: org-admin}
` + nsEdit("org-admin") + `  refused: false
- name: an approver without approve
  requester: {user: mallory}
` + nsEdit("mallory") + `  refused: true
  reason: approve
`
	w := buildAt(t, files, time.Time{})
	results, err := w.RunTests(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 4 {
		t.Fatalf("%d results, want 4: %+v", len(results), results)
	}
	for _, r := range results {
		if !r.Pass {
			t.Errorf("%s: %s failed: %s", r.Test, r.Check, r.Detail)
		}
	}

	t.Log("approved in the files: the exception is in effect until its end")
	files = exceptionFiles(true, end, approvals("org-admin"))
	if got := viewNames(t, buildAt(t, files, time.Time{}), "team"); got != "" {
		t.Errorf("team's rolebindings %q with the approved exception, want none", got)
	}
	if got := viewNames(t, buildAt(t, files, end), "team"); got != "shared" {
		t.Errorf("team's rolebindings %q at the approved exception's end, want shared", got)
	}
}
