package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// pluginRun is one run of `kubectl implicit ...`.
type pluginRun struct {
	stdout, stderr string
	code           int
}

// pluginUser runs kubectl, with kubectl-implicit on PATH, as one user.
type pluginUser struct {
	t          *testing.T
	name       string
	path       string // PATH with the plugin first
	kubeconfig string
	home       string
}

// buildPlugin builds cmd/kubectl-implicit into a temporary directory,
// beside its completion script kubectl_complete-implicit (as the release
// archive ships it and the krew manifest's caveats link it), and returns a
// PATH that finds them first, as krew would install them.
func buildPlugin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", filepath.Join(dir, "kubectl-implicit"), "../../cmd/kubectl-implicit")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building kubectl-implicit: %v\n%s", err, out)
	}
	script, err := os.ReadFile(filepath.Join(repoRoot, "hack/krew/kubectl_complete-implicit"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubectl_complete-implicit"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// run runs `kubectl implicit args...`; the kubeconfig comes from KUBECONFIG,
// as kubectl passes no flags given before a plugin's name.
func (u pluginUser) run(ctx context.Context, args ...string) pluginRun {
	return u.kubectl(ctx, append([]string{"implicit"}, args...)...)
}

// kubectl runs `kubectl args...` as run does.
func (u pluginUser) kubectl(ctx context.Context, args ...string) pluginRun {
	return u.kubectlStdin(ctx, nil, args...)
}

// kubectlStdin is kubectl reading stdin.
func (u pluginUser) kubectlStdin(ctx context.Context, stdin io.Reader, args ...string) pluginRun {
	cmd := exec.CommandContext(ctx, "kubectl", args...)
	cmd.Stdin = stdin
	cmd.Env = append(os.Environ(), "PATH="+u.path, "KUBECONFIG="+u.kubeconfig, "HOME="+u.home)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	r := pluginRun{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		r.code, r.stderr = -1, err.Error()
	}
	return r
}

// expect runs until the exit code is code and check passes, and returns the run.
func (u pluginUser) expect(code int, check func(pluginRun) error, args ...string) pluginRun {
	u.t.Helper()
	return u.expectKubectl(code, check, append([]string{"implicit"}, args...)...)
}

// expectKubectl is expect for `kubectl args...`.
func (u pluginUser) expectKubectl(code int, check func(pluginRun) error, args ...string) pluginRun {
	u.t.Helper()
	var last pluginRun
	eventually(u.t, u.name+": kubectl "+strings.Join(args, " "), func(ctx context.Context) error {
		last = u.kubectl(ctx, args...)
		if last.code != code {
			return fmt.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", last.code, code, last.stdout, last.stderr)
		}
		if check != nil {
			if err := check(last); err != nil {
				return fmt.Errorf("%v\nstdout:\n%s", err, last.stdout)
			}
		}
		return nil
	})
	u.t.Logf("%s$ kubectl %s  (exit %d)\n%s", u.name, strings.Join(args, " "), last.code, last.stdout)
	return last
}

// decode reads a run's -o json output into out.
func decode(r pluginRun, out any) error { return json.Unmarshal([]byte(r.stdout), out) }

// TestPlugin runs `kubectl implicit` as kubectl runs a plugin (found on
// PATH), against the control plane, as an admin and as a tenant who is admin
// of pl-team only:
//
//	implicit-global  pl-locked (locked), pl-excluded, pl-overlaid
//	pl-org           pl-org-admins
//	├── pl-team      excludes rolebindings/pl-excluded; pl-locked (a shadow the lock blocks), pl-overlaid (an overlay)
//	│   └── pl-sub
//	└── pl-other     pl-other-secret
//	pl-c1 <-> pl-c2  a parent cycle
func TestPlugin(t *testing.T) {
	kube, dyn := admin(t)
	ctx := t.Context()
	ensureNamespace(t, kube, globalNS)
	path := buildPlugin(t)

	t.Log("the hierarchy, the cycle made while the parent guard is not registered")
	createNamespace(t, kube, "pl-org", nil, nil)
	createNamespace(t, kube, "pl-team", map[string]string{"implicit.dev/parent": "pl-org"}, map[string]string{"implicit.dev/exclude": "rolebindings/pl-excluded"})
	createNamespace(t, kube, "pl-sub", map[string]string{"implicit.dev/parent": "pl-team"}, nil)
	createNamespace(t, kube, "pl-other", map[string]string{"implicit.dev/parent": "pl-org"}, nil)
	withoutGuards(t, func() {
		// Each parent exists when it is named, so the parent-uid webhook
		// records it: a cycle, whatever second each was created in (pl-c1
		// naming a pl-c2 created later, in another second, would be a
		// ParentUIDMismatch instead).
		createNamespace(t, kube, "pl-c1", nil, nil)
		createNamespace(t, kube, "pl-c2", map[string]string{"implicit.dev/parent": "pl-c1"}, nil)
		labelNamespace(t, kube, "pl-c1", "implicit.dev/parent", "pl-c2")
	})

	t.Log("sources: pl-team's shadow of pl-locked exists before the global one is locked (the guard refuses new shadows of locked items)")
	createRoleBinding(t, kube, "pl-team", "pl-locked", "edit", "team:devs")
	createRoleBinding(t, kube, globalNS, "pl-locked", "view", "org:auditors", locked)
	createRoleBinding(t, kube, globalNS, "pl-excluded", "view", "org:excluded")
	createRoleBinding(t, kube, globalNS, "pl-overlaid", "view", "org:overlaid")
	createRoleBinding(t, kube, "pl-team", "pl-overlaid", "view", "team:overlaid", func(rb *rbacv1.RoleBinding) {
		rb.Annotations = map[string]string{"implicit.dev/merge": "overlay"}
	})
	createRoleBinding(t, kube, "pl-org", "pl-org-admins", "admin", "org:admins")
	createRoleBinding(t, kube, "pl-other", "pl-other-secret", "admin", "other:admins")

	t.Log("the tenant: admin of pl-team only (inherited by pl-sub through the authorization webhook)")
	createRoleBinding(t, kube, "pl-team", "pl-tenant-admin", "admin", "pl-tenants")
	tenantConfig, err := cp.WriteUserKubeconfig("pl-tenant", "pl-tenants")
	if err != nil {
		t.Fatal(err)
	}
	adm := pluginUser{t: t, name: "admin", path: path, kubeconfig: cp.KubeconfigPath(), home: t.TempDir()}
	tenant := pluginUser{t: t, name: "tenant", path: path, kubeconfig: tenantConfig, home: t.TempDir()}
	// outsideTenant are namespaces outside pl-team's lineage and subtree.
	outsideTenant := regexp.MustCompile(`pl-other|pl-c1|pl-c2`)
	private := func(r pluginRun) error {
		if m := outsideTenant.FindString(r.stdout + r.stderr); m != "" {
			return fmt.Errorf("the tenant learns of %s", m)
		}
		return nil
	}

	t.Run("discovery", func(t *testing.T) {
		t.Log("the questions are in discovery and OpenAPI, beside the views, and not in the category implicit")
		out, _, err := cp.Kubectl(t.Context(), "api-resources", "--api-group=implicit.dev", "-o", "wide")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("\n%s", out)
		for _, want := range []string{
			`(?m)^hierarchies\s+implicit.dev/v1alpha1\s+true\s+Hierarchy\s+get,list\s*$`,
			`(?m)^explanations\s+implicit.dev/v1alpha1\s+true\s+Explanation\s+create\s*$`,
			`(?m)^previews\s+implicit.dev/v1alpha1\s+true\s+Preview\s+create\s*$`,
		} {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("api-resources: no line matching %q", want)
			}
		}
		explainEventually(t, []string{"previews.implicit.dev.status.unchanged"}, "Locked, Shadowed or Excluded")
		out, _, err = cp.Kubectl(t.Context(), "get", "implicit", "-n", "pl-team")
		if err != nil || strings.Contains(out, "hierarch") {
			t.Errorf("kubectl get implicit lists a Hierarchy (%v):\n%s", err, out)
		}
	})

	t.Run("tree", func(t *testing.T) {
		adm.t, tenant.t = t, t
		t.Log("admin: every namespace's tree; the cycle and the subtree marked")
		adm.expect(0, func(r pluginRun) error {
			for _, want := range []string{
				`(?m)^pl-org$`, `(?m)^├── pl-other$`, `(?m)^└── pl-team$`, `(?m)^    └── pl-sub$`,
				`(?m)^pl-c1  \[Cycle: namespaces pl-c\d -> pl-c\d form a parent cycle`, `(?m)^pl-c2  \[Cycle: `,
				`(?m)^implicit-global  \[global: every tenant inherits its sources\]$`, `(?m)^kube-system  \[not a tenant: excluded by the server\]$`,
			} {
				if !regexp.MustCompile(want).MatchString(r.stdout) {
					return fmt.Errorf("no line matching %q", want)
				}
			}
			return nil
		}, "tree")
		var list v1alpha1.HierarchyList
		r := adm.expect(0, nil, "tree", "-o", "json")
		if err := decode(r, &list); err != nil {
			t.Fatal(err)
		}
		byName := map[string]v1alpha1.HierarchyStatus{}
		for _, h := range list.Items {
			byName[h.Name] = h.Status
		}
		if h := byName["pl-team"]; !slices.Equal(h.Ancestors, []string{"pl-org"}) || !slices.Equal(h.Children, []string{"pl-sub"}) {
			t.Errorf("pl-team: %+v", h)
		}
		if h := byName["pl-c1"]; len(h.Problems) != 1 || h.Problems[0].Reason != "Cycle" || len(h.Ancestors) != 0 {
			t.Errorf("pl-c1: %+v, want a Cycle and no ancestors", h)
		}

		t.Log("tenant: its lineage and subtree only, however it asks")
		want := "pl-org\n└── pl-team\n    └── pl-sub\n"
		same := func(r pluginRun) error {
			if err := private(r); err != nil {
				return err
			}
			if r.stdout != want {
				return fmt.Errorf("tree:\n%s\nwant:\n%s", r.stdout, want)
			}
			return nil
		}
		tenant.expect(0, same, "tree", "pl-team")
		tenant.expect(0, same, "tree", "-n", "pl-team")
		t.Log("tenant: without a namespace, listing every Hierarchy is forbidden: the plugin falls back to the kubeconfig's namespace (default), which it may not read")
		tenant.expect(1, private, "tree")
		t.Log("tenant: another namespace's Hierarchy is forbidden")
		for _, ns := range []string{"pl-org", "pl-other", "pl-c1"} {
			tenant.expect(1, func(r pluginRun) error {
				if !strings.Contains(r.stderr, "forbidden") {
					return fmt.Errorf("stderr %q, want forbidden", r.stderr)
				}
				return nil
			}, "tree", ns)
		}
		t.Log("tenant: pl-sub's tree (it reads pl-sub through the inherited binding) still names only its lineage")
		tenant.expect(0, func(r pluginRun) error {
			if err := private(r); err != nil {
				return err
			}
			if w := "pl-org\n└── pl-team\n    └── pl-sub\n"; r.stdout != w {
				return fmt.Errorf("want\n%s", w)
			}
			return nil
		}, "tree", "pl-sub")
	})

	type scope struct{ Namespace, Outcome, By string }
	scopesOf := func(e v1alpha1.Explanation) []scope {
		var out []scope
		for _, s := range e.Status.Scopes {
			out = append(out, scope{s.Namespace, s.Outcome, s.By})
		}
		return out
	}
	why := func(u pluginUser, ns, name string, want []scope, inView bool) {
		u.t.Helper()
		u.expect(0, func(r pluginRun) error {
			var e v1alpha1.Explanation
			if err := decode(r, &e); err != nil {
				return err
			}
			if got := scopesOf(e); !slices.Equal(got, want) || e.Status.InView != inView {
				return fmt.Errorf("scopes %v, in view %v; want %v, %v", got, e.Status.InView, want, inView)
			}
			return private(r)
		}, "why", "rolebinding", name, "-n", ns, "-o", "json")
	}
	t.Run("why", func(t *testing.T) {
		adm.t, tenant.t = t, t
		for _, u := range []pluginUser{adm, tenant} {
			t.Logf("%s: a lock blocks pl-team's shadow", u.name)
			why(u, "pl-team", "pl-locked", []scope{{globalNS, "Won", ""}, {"pl-org", "NoItem", ""}, {"pl-team", "BlockedByLock", globalNS}}, true)
			t.Logf("%s: pl-team's exclusion removes the global item from pl-sub too", u.name)
			why(u, "pl-sub", "pl-excluded", []scope{{globalNS, "Excluded", "pl-team"}, {"pl-org", "NoItem", ""}, {"pl-team", "NoItem", ""}, {"pl-sub", "NoItem", ""}}, false)
			t.Logf("%s: pl-team's overlay is merged onto the global item", u.name)
			why(u, "pl-team", "pl-overlaid", []scope{{globalNS, "Won", ""}, {"pl-org", "NoItem", ""}, {"pl-team", "Overlaid", globalNS}}, true)
		}
		t.Log("the table reads like kubectl's")
		adm.expect(0, func(r pluginRun) error {
			for _, want := range []string{
				`rolebindings/pl-locked is in the view of pl-team from the global source implicit-global/pl-locked`,
				`(?m)^SCOPE\s+NAMESPACE\s+ITEM\s+LOCKED\s+OUTCOME\s+BY\s+EXCLUSIONS$`,
				`(?m)^local\s+pl-team\s+pl-locked\s+false\s+BlockedByLock\s+implicit-global\s+-$`,
			} {
				if !regexp.MustCompile(want).MatchString(r.stdout) {
					return fmt.Errorf("no match for %q", want)
				}
			}
			return nil
		}, "why", "rolebindings.implicit.dev", "pl-locked", "-n", "pl-team")
		t.Log("tenant: explaining a view of another namespace is forbidden")
		tenant.expect(1, func(r pluginRun) error {
			if !strings.Contains(r.stderr, "forbidden") {
				return fmt.Errorf("stderr %q, want forbidden", r.stderr)
			}
			return nil
		}, "why", "rolebinding", "pl-other-secret", "-n", "pl-other")
	})

	t.Run("reach", func(t *testing.T) {
		adm.t = t
		t.Log("admin: pl-org's pl-org-admins reaches pl-org's subtree (its own namespace is no reach)")
		adm.expect(0, func(r pluginRun) error {
			var got struct {
				Count      int
				Namespaces []struct{ Namespace, As string }
			}
			if err := decode(r, &got); err != nil {
				return err
			}
			var names []string
			for _, n := range got.Namespaces {
				names = append(names, n.Namespace)
			}
			if want := []string{"pl-other", "pl-sub", "pl-team"}; got.Count != 3 || !slices.Equal(names, want) {
				return fmt.Errorf("count %d %v, want %v", got.Count, names, want)
			}
			return nil
		}, "reach", "rolebinding", "pl-org-admins", "-n", "pl-org", "-o", "json")
		t.Log("admin: the overlay in pl-team reaches pl-sub, as an overlay")
		adm.expect(0, func(r pluginRun) error {
			if !regexp.MustCompile(`reaches 1 namespace\(s\)`).MatchString(r.stdout) ||
				!regexp.MustCompile(`(?m)^pl-sub\s+overlay\s+global$`).MatchString(r.stdout) {
				return errors.New("want pl-sub as an overlay")
			}
			return nil
		}, "reach", "rolebinding", "pl-overlaid", "-n", "pl-team")
	})

	t.Run("diff", func(t *testing.T) {
		adm.t, tenant.t = t, t
		file := filepath.Join(t.TempDir(), "pl-excluded.yaml")
		proposed := &rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: "pl-excluded", Namespace: "pl-org"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "org:editors"}},
		}
		raw, err := yaml.Marshal(proposed)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		pl := func(ns string) bool { return strings.HasPrefix(ns, "pl-") }

		t.Log("admin: pl-org's own pl-excluded would shadow the global one in pl-org and pl-other; pl-team's exclusion keeps pl-team and pl-sub as they are")
		var preview v1alpha1.Preview
		adm.expect(1, func(r pluginRun) error {
			if err := decode(r, &preview); err != nil {
				return err
			}
			var changed, kept []string
			for _, c := range preview.Status.Changed {
				if pl(c.Namespace) {
					changed = append(changed, c.Namespace+"="+c.Type)
				}
			}
			for _, u := range preview.Status.Unchanged {
				if pl(u.Namespace) {
					kept = append(kept, u.Namespace+"="+u.Reason+"/"+u.By)
				}
			}
			if w := []string{"pl-org=Modified", "pl-other=Modified"}; !slices.Equal(changed, w) {
				return fmt.Errorf("changed %v, want %v", changed, w)
			}
			if w := []string{"pl-sub=Excluded/pl-team", "pl-team=Excluded/pl-team"}; !slices.Equal(kept, w) {
				return fmt.Errorf("unchanged %v, want %v", kept, w)
			}
			return nil
		}, "diff", "-f", file, "-o", "json")
		adm.expect(1, func(r pluginRun) error {
			if !regexp.MustCompile(`(?m)^pl-other\s+Modified\s+implicit-global/pl-excluded \(global\)\s+pl-org/pl-excluded \(parent\)\s+-$`).MatchString(r.stdout) ||
				!regexp.MustCompile(`(?m)^pl-team\s+Unchanged\s+-\s+-\s+Excluded by pl-team$`).MatchString(r.stdout) {
				return errors.New("table rows missing")
			}
			return nil
		}, "diff", "-f", file)

		t.Log("the tenant may not create RoleBindings in pl-org: its preview is forbidden")
		tenant.expect(2, private, "diff", "-f", file)

		t.Log("apply the edit; each namespace's view now is what the preview said")
		before := map[string]viewItem{}
		for _, ns := range []string{"pl-org", "pl-team", "pl-sub", "pl-other"} {
			items, err := listView(ctx, dyn, viewRoleBindings, ns, "pl-excluded", metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			before[ns] = summarize(items)["pl-excluded"]
		}
		if _, err := kube.RbacV1().RoleBindings("pl-org").Create(ctx, proposed, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = kube.RbacV1().RoleBindings("pl-org").Delete(context.Background(), "pl-excluded", metav1.DeleteOptions{})
		})
		for _, c := range preview.Status.Changed {
			if !pl(c.Namespace) {
				continue
			}
			want := map[string]viewItem{}
			if c.After != nil {
				want["pl-excluded"] = viewItem{Scope: c.After.Source.Scope, Source: c.After.Source.Namespace}
			}
			waitForView(t, dyn, viewRoleBindings, c.Namespace, "pl-excluded", want)
			if c.Before == nil || before[c.Namespace] != (viewItem{Scope: c.Before.Source.Scope, Source: c.Before.Source.Namespace}) {
				t.Errorf("%s: preview's before %+v, the view was %v", c.Namespace, c.Before, before[c.Namespace])
			}
		}
		for _, u := range preview.Status.Unchanged {
			if pl(u.Namespace) {
				want := map[string]viewItem{}
				if before[u.Namespace] != (viewItem{}) {
					want["pl-excluded"] = before[u.Namespace]
				}
				waitForView(t, dyn, viewRoleBindings, u.Namespace, "pl-excluded", want)
			}
		}

		t.Log("applied: the same file again changes nothing (exit 0); deleting it would restore the global item")
		adm.expect(0, func(r pluginRun) error {
			if !strings.Contains(r.stdout, "(Update): reaches") || !strings.Contains(r.stdout, "changes 0") {
				return errors.New("want an update that changes nothing")
			}
			return nil
		}, "diff", "-f", file)
		adm.expect(1, func(r pluginRun) error {
			if !regexp.MustCompile(`(?m)^pl-org\s+Modified\s+pl-org/pl-excluded \(local\)\s+implicit-global/pl-excluded \(global\)`).MatchString(r.stdout) {
				return errors.New("want pl-org back to the global item")
			}
			return nil
		}, "diff", "-f", file, "--delete")

		t.Log("tenant: a new RoleBinding in pl-team reaches pl-team and pl-sub")
		own := strings.ReplaceAll(strings.ReplaceAll(string(raw), "pl-org", "pl-team"), "pl-excluded", "pl-tenant-new")
		ownFile := filepath.Join(t.TempDir(), "own.yaml")
		if err := os.WriteFile(ownFile, []byte(own), 0o600); err != nil {
			t.Fatal(err)
		}
		tenant.expect(1, func(r pluginRun) error {
			if err := private(r); err != nil {
				return err
			}
			if !regexp.MustCompile(`(?m)^pl-sub\s+Added\s+-\s+pl-team/pl-tenant-new \(parent\)`).MatchString(r.stdout) ||
				!regexp.MustCompile(`(?m)^pl-team\s+Added\s+-\s+pl-team/pl-tenant-new \(local\)`).MatchString(r.stdout) {
				return errors.New("want pl-team and pl-sub Added")
			}
			return nil
		}, "diff", "-f", ownFile)
	})
}

// TestQuestionRoles checks the shipped implicit-questions role (artifacts/base,
// aggregated into view, edit and admin) and the server's own checks behind
// it: whoever has one of those roles in a namespace reads its Hierarchy and
// may create reviews there, but an Explanation needs get on the view it
// explains, so view and edit explain NetworkPolicies and not RoleBindings,
// as they read the one view and not the other; without a role, nothing.
func TestQuestionRoles(t *testing.T) {
	kube, _ := admin(t)
	ctx := t.Context()
	createNamespace(t, kube, "qr-team", nil, nil)
	for _, role := range []string{"view", "edit", "admin"} {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "qr-" + role, Namespace: "qr-team"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "qr-" + role + "-user"}},
		}
		if _, err := kube.RbacV1().RoleBindings("qr-team").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	explain := func(dyn dynamic.Interface, resource string) error {
		_, err := dyn.Resource(viewRoleBindings.GroupVersion().WithResource("explanations")).Namespace("qr-team").Create(t.Context(),
			&unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "implicit.dev/v1alpha1", "kind": "Explanation",
				"spec": map[string]any{"resource": resource, "name": "anything"},
			}}, metav1.CreateOptions{})
		return err
	}
	for _, tc := range []struct {
		user      string
		hierarchy bool
		explains  map[string]bool
	}{
		{"qr-view-user", true, map[string]bool{"networkpolicies": true, "rolebindings": false}},
		{"qr-edit-user", true, map[string]bool{"networkpolicies": true, "rolebindings": false}},
		{"qr-admin-user", true, map[string]bool{"networkpolicies": true, "rolebindings": true}},
		{"qr-nobody", false, map[string]bool{"networkpolicies": false, "rolebindings": false}},
	} {
		cfg, err := cp.UserConfig(tc.user)
		if err != nil {
			t.Fatal(err)
		}
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// The controller manager aggregates the roles a moment after the suite applies them.
		eventually(t, tc.user+" gets qr-team's Hierarchy", func(ctx context.Context) error {
			_, err := dyn.Resource(viewRoleBindings.GroupVersion().WithResource("hierarchies")).Namespace("qr-team").Get(ctx, "qr-team", metav1.GetOptions{})
			switch {
			case tc.hierarchy && err != nil:
				return fmt.Errorf("%v, want allowed", err)
			case !tc.hierarchy && !apierrors.IsForbidden(err):
				return fmt.Errorf("%v, want Forbidden", err)
			}
			return nil
		})
		for resource, want := range tc.explains {
			eventually(t, tc.user+" explains "+resource, func(context.Context) error {
				err := explain(dyn, resource)
				switch {
				case want && err != nil:
					return fmt.Errorf("%v, want allowed", err)
				case !want && !apierrors.IsForbidden(err):
					return fmt.Errorf("%v, want Forbidden", err)
				}
				return nil
			})
		}
		t.Logf("%s: Hierarchy %v, explains %v", tc.user, tc.hierarchy, tc.explains)
	}
}
