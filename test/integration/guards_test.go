package integration

import (
	"context"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

// The guards are checked the way people meet them: kubectl, as admin (in
// system:masters, which holds every verb, unlock included) or as an
// ordinary certificate user, against kube-apiserver with the
// ValidatingWebhookConfiguration main_test.go registers.

const (
	// gdKubectlTimeout bounds every kubectl run of these tests.
	gdKubectlTimeout = 30 * time.Second
	// gdQuick is how long a write the guards must not see may take while
	// implicit-apiserver is down.
	gdQuick = 5 * time.Second
	// gdReapplied bounds how long the synced match conditions may stay
	// reset after the configuration is re-applied: ConditionSync watches the
	// configuration, so about a second (at most one write per second).
	gdReapplied = 10 * time.Second
)

// gdWarning is the fan-out warning of DESIGN.md, as kubectl prints it.
var gdWarning = regexp.MustCompile(`implicit\.dev: this change reaches (\d+) namespaces`)

// gdKubectl runs kubectl as one user.
type gdKubectl struct {
	t    *testing.T
	who  string
	args []string // before the command's: --kubeconfig=<user's>
}

// gdRun is one kubectl run.
type gdRun struct {
	stdout, stderr string
	err            error
	took           time.Duration
}

func gdAdmin(t *testing.T) gdKubectl { return gdKubectl{t: t, who: "admin"} }

// gdUser returns kubectl as user, with a client certificate of its own.
func gdUser(t *testing.T, user string, groups ...string) gdKubectl {
	t.Helper()
	path, err := cp.WriteUserKubeconfig(user, groups...)
	if err != nil {
		t.Fatalf("kubeconfig of %s: %v", user, err)
	}
	return gdKubectl{t: t, who: user, args: []string{"--kubeconfig=" + path}}
}

func (k gdKubectl) runWithInput(stdin string, args ...string) gdRun {
	ctx, cancel := context.WithTimeout(k.t.Context(), gdKubectlTimeout)
	defer cancel()
	var in io.Reader
	if stdin != "" {
		in = strings.NewReader(stdin)
	}
	start := time.Now()
	out, errOut, err := cp.KubectlWithInput(ctx, in, append(append([]string(nil), k.args...), args...)...)
	return gdRun{stdout: out, stderr: errOut, err: err, took: time.Since(start)}
}

func (k gdKubectl) run(args ...string) gdRun { return k.runWithInput("", args...) }

// ok runs kubectl and fails the test unless it succeeds.
func (k gdKubectl) ok(args ...string) gdRun {
	k.t.Helper()
	r := k.run(args...)
	if r.err != nil {
		k.t.Fatalf("as %s: %v", k.who, r.err)
	}
	return r
}

// refused runs kubectl and fails the test unless it fails with stderr
// holding every one of want.
func (k gdKubectl) refused(want []string, args ...string) gdRun {
	k.t.Helper()
	return k.refusedWithInput("", want, args...)
}

func (k gdKubectl) refusedWithInput(stdin string, want []string, args ...string) gdRun {
	k.t.Helper()
	r := k.runWithInput(stdin, args...)
	if r.err == nil {
		k.t.Fatalf("as %s: kubectl %s succeeded, want it refused\nstdout: %s\nstderr: %s", k.who, strings.Join(args, " "), r.stdout, r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			k.t.Errorf("as %s: kubectl %s: stderr does not mention %q:\n%s", k.who, strings.Join(args, " "), w, r.stderr)
		}
	}
	k.t.Logf("as %s, refused: %s", k.who, gdErrorLine(r.stderr))
	return r
}

// canI runs kubectl auth can-i and returns its yes or no.
func (k gdKubectl) canI(args ...string) bool {
	k.t.Helper()
	r := k.run(append([]string{"auth", "can-i"}, args...)...)
	answer := strings.TrimSpace(r.stdout)
	switch {
	case strings.HasPrefix(answer, "yes") && r.err == nil:
		return true
	case strings.HasPrefix(answer, "no"):
		return false
	}
	k.t.Fatalf("as %s: kubectl auth can-i %s: %q, %v", k.who, strings.Join(args, " "), answer, r.err)
	return false
}

// gdErrorLine is the line of kubectl's stderr with the server's answer.
func gdErrorLine(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "Error from server") || strings.HasPrefix(l, "error:") {
			return l
		}
	}
	return strings.TrimSpace(stderr)
}

// gdReach parses the fan-out warning from kubectl's stderr.
func gdReach(stderr string) (int, bool) {
	m := gdWarning.FindStringSubmatch(stderr)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// gdBindUser binds a Role or ClusterRole to user in namespace, deleting the
// binding when the test ends.
func gdBindUser(t *testing.T, kube kubernetes.Interface, namespace, name, kind, role, user string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if _, err := kube.RbacV1().RoleBindings(namespace).Create(t.Context(), rb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating rolebinding %s/%s: %v", namespace, name, err)
	}
	t.Cleanup(func() {
		err := kube.RbacV1().RoleBindings(namespace).Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting rolebinding %s/%s: %v", namespace, name, err)
		}
	})
}

// gdNamespace is createNamespace, after waiting out the deletion of a
// namespace of the same name (of an earlier run, with -count).
func gdNamespace(t *testing.T, kube kubernetes.Interface, name string, labels, annotations map[string]string) {
	t.Helper()
	eventually(t, "namespace "+name+" of an earlier run is gone", func(ctx context.Context) error {
		ns, err := kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errorf("namespace %s is %s", name, ns.Status.Phase)
	})
	createNamespace(t, kube, name, labels, annotations)
}

// gdWaitFanoutCondition waits until the fanout webhook's synced match
// condition names namespace: ConditionSync follows the sources about once
// a second.
func gdWaitFanoutCondition(t *testing.T, kube kubernetes.Interface, namespace string) {
	t.Helper()
	eventually(t, "the fanout webhook's match condition names "+namespace, func(ctx context.Context) error {
		cfg, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, controlplane.GuardsConfiguration, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var exprs []string
		for _, w := range cfg.Webhooks {
			if w.Name != "fanout.implicit.dev" {
				continue
			}
			for _, c := range w.MatchConditions {
				if strings.Contains(c.Expression, strconv.Quote(namespace)) {
					return nil
				}
				exprs = append(exprs, c.Name+": "+c.Expression)
			}
		}
		return errorf("fanout match conditions: %v", exprs)
	})
}

// gdViewers lists the namespaces whose view of rolebinding name shows the
// source of namespace source: those whose view changes when it does.
func gdViewers(t *testing.T, name, source string) []string {
	t.Helper()
	r := gdAdmin(t).ok("get", "rolebindings.implicit.dev", "-A", "--field-selector", "metadata.name="+name,
		"-l", "implicit.dev/source-namespace="+source, "-o", "custom-columns=NS:.metadata.namespace", "--no-headers")
	out := strings.Fields(r.stdout)
	sort.Strings(out)
	return out
}

// TestLocks checks the lock guard: a locked source can't be changed,
// unlocked or deleted without the unlock verb on it, and ordinary RBAC
// grants that verb.
func TestLocks(t *testing.T) {
	kube, _ := admin(t)
	ensureNamespace(t, kube, globalNS)
	adm := gdAdmin(t)

	t.Log("gd-writer is admin in the global namespace, through a RoleBinding, without unlock")
	gdBindUser(t, kube, globalNS, "gd-writer-admin", "ClusterRole", "admin", "gd-writer")
	writer := gdUser(t, "gd-writer")
	eventually(t, "gd-writer may update rolebindings in the global namespace", func(ctx context.Context) error {
		if !writer.canI("update", "rolebindings", "-n", globalNS) {
			return errorf("not yet")
		}
		return nil
	})

	t.Log("admin creates the locked gd-locked and the unlocked gd-unlocked in the global namespace")
	createRoleBinding(t, kube, globalNS, "gd-locked", "view", "gd:viewers", locked)
	createRoleBinding(t, kube, globalNS, "gd-unlocked", "view", "gd:viewers")

	if adm.canI("unlock", "rolebindings/gd-locked", "-n", globalNS, "--as", "gd-writer") {
		t.Errorf("kubectl auth can-i unlock rolebindings/gd-locked --as gd-writer: yes before any grant")
	}

	t.Log("as gd-writer, without unlock: update, lock removal, delete and a new locked binding are refused")
	unlockMsg := []string{`admission webhook "locks.implicit.dev" denied the request`, `"unlock" permission`, "gd-locked"}
	writer.refused(append(unlockMsg, "is locked"), "label", "rolebinding", "gd-locked", "-n", globalNS, "gd-touched=yes")
	writer.refused(append(unlockMsg, "removing the lock"), "annotate", "rolebinding", "gd-locked", "-n", globalNS, "implicit.dev/locked-")
	writer.refused(append(unlockMsg, "deleting it"), "delete", "rolebinding", "gd-locked", "-n", globalNS, "--wait=false")
	newLocked := `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: gd-locked-new
  namespace: ` + globalNS + `
  annotations: {implicit.dev/locked: "true"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: "gd:viewers"}]
`
	writer.refusedWithInput(newLocked, []string{`admission webhook "locks.implicit.dev" denied the request`, "creating it locked", `"unlock" permission`, "gd-locked-new"}, "create", "-f", "-")
	t.Cleanup(func() {
		// In case a create slipped through.
		err := kube.RbacV1().RoleBindings(globalNS).Delete(context.Background(), "gd-locked-new", metav1.DeleteOptions{})
		if err == nil {
			t.Errorf("gd-locked-new existed")
		} else if !apierrors.IsNotFound(err) {
			t.Errorf("deleting rolebinding gd-locked-new: %v", err)
		}
	})

	rb, err := kube.RbacV1().RoleBindings(globalNS).Get(t.Context(), "gd-locked", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("gd-locked after the refused writes: %v", err)
	}
	if rb.Annotations["implicit.dev/locked"] != "true" || rb.Labels["gd-touched"] != "" {
		t.Errorf("gd-locked changed by refused writes: labels %v annotations %v", rb.Labels, rb.Annotations)
	}

	t.Log("as gd-writer: the unlocked gd-unlocked is updated, with the fan-out warning")
	gdWaitFanoutCondition(t, kube, globalNS)
	r := writer.ok("label", "rolebinding", "gd-unlocked", "-n", globalNS, "gd-touched=yes")
	if n, ok := gdReach(r.stderr); !ok {
		t.Errorf("label gd-unlocked as gd-writer: no fan-out warning on stderr:\n%s", r.stderr)
	} else {
		t.Logf("gd-unlocked: %q (%d namespaces)", strings.TrimSpace(r.stderr), n)
	}

	t.Log("admin grants gd-writer unlock on gd-locked: a Role in the global namespace with the custom verb")
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "gd-unlock-gd-locked", Namespace: globalNS},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"},
			Verbs: []string{"unlock"}, ResourceNames: []string{"gd-locked"},
		}},
	}
	if _, err := kube.RbacV1().Roles(globalNS).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kube.RbacV1().Roles(globalNS).Delete(context.Background(), role.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting role %s: %v", role.Name, err)
		}
	})
	gdBindUser(t, kube, globalNS, "gd-writer-unlock", "Role", role.Name, "gd-writer")
	eventually(t, "kubectl auth can-i unlock rolebindings/gd-locked --as gd-writer says yes", func(ctx context.Context) error {
		if !adm.canI("unlock", "rolebindings/gd-locked", "-n", globalNS, "--as", "gd-writer") {
			return errorf("still no")
		}
		return nil
	})
	if adm.canI("unlock", "rolebindings/gd-locked-new", "-n", globalNS, "--as", "gd-writer") {
		t.Errorf("kubectl auth can-i unlock rolebindings/gd-locked-new --as gd-writer: yes, but the grant names gd-locked only")
	}

	t.Log("as gd-writer, with unlock: the update and the lock removal of gd-locked succeed")
	r = writer.ok("label", "rolebinding", "gd-locked", "-n", globalNS, "gd-touched=yes")
	if _, ok := gdReach(r.stderr); !ok {
		t.Errorf("label gd-locked as gd-writer: no fan-out warning on stderr:\n%s", r.stderr)
	}
	writer.ok("annotate", "rolebinding", "gd-locked", "-n", globalNS, "implicit.dev/locked-")
	rb, err = kube.RbacV1().RoleBindings(globalNS).Get(t.Context(), "gd-locked", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rb.Annotations["implicit.dev/locked"]; ok || rb.Labels["gd-touched"] != "yes" {
		t.Errorf("gd-locked after the allowed writes: labels %v annotations %v, want gd-touched=yes and no lock", rb.Labels, rb.Annotations)
	}

	t.Log("the grant names gd-locked only: another new locked binding is still refused")
	writer.refusedWithInput(newLocked, []string{`admission webhook "locks.implicit.dev" denied the request`, "gd-locked-new"}, "create", "-f", "-")
}

// TestShadowOfLockedItem checks the shadow guard: a tenant can't create an
// object that would shadow a locked inherited item.
func TestShadowOfLockedItem(t *testing.T) {
	kube, _ := admin(t)
	ensureNamespace(t, kube, globalNS)
	adm := gdAdmin(t)
	gdNamespace(t, kube, "gd-team", nil, nil)
	gdNamespace(t, kube, "gd-solo", map[string]string{"implicit.dev/inherit": "false"}, nil)

	t.Log("the global gd-sec is locked")
	createRoleBinding(t, kube, globalNS, "gd-sec", "view", "gd:security", locked)

	create := func(namespace, name string, extra ...string) []string {
		return append([]string{"create", "rolebinding", name, "-n", namespace, "--clusterrole=edit", "--group=gd:team"}, extra...)
	}
	t.Log("waiting (server-side dry runs) until the shadow guard's match condition names gd-sec")
	start := time.Now()
	eventually(t, "a dry-run create of gd-sec in gd-team is refused", func(ctx context.Context) error {
		r := adm.run(create("gd-team", "gd-sec", "--dry-run=server")...)
		if r.err == nil {
			return errorf("dry-run create of gd-team/gd-sec accepted")
		}
		if !strings.Contains(r.stderr, "implicit-global/gd-sec") {
			return errorf("dry-run create refused for another reason: %s", r.stderr)
		}
		return nil
	})
	t.Logf("the shadow guard refuses after %s", time.Since(start).Round(time.Millisecond))

	t.Log("creating gd-sec in the tenant gd-team is refused, naming the lock")
	adm.refused([]string{`admission webhook "shadows.implicit.dev" denied the request`, "implicit-global/gd-sec", "locked"}, create("gd-team", "gd-sec")...)
	if _, err := kube.RbacV1().RoleBindings("gd-team").Get(t.Context(), "gd-sec", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("gd-team/gd-sec after the refused create: %v, want NotFound", err)
	}

	t.Log("gd-other, locked nowhere, is created in gd-team")
	adm.ok(create("gd-team", "gd-other")...)

	t.Log("gd-sec is created in gd-solo, which inherits nothing")
	adm.ok(create("gd-solo", "gd-sec")...)
}

// TestReparenting checks the parent guard: adopting a parent needs update
// on it, never closes a cycle, and only tenants can be parents.
func TestReparenting(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	adm := gdAdmin(t)
	for _, ns := range []string{"gd-child", "gd-mine", "gd-foreign"} {
		gdNamespace(t, kube, ns, nil, nil)
	}

	t.Log("gd-tenant may get, update and patch namespace gd-child only")
	cr := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "gd-tenant-namespaces"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"namespaces"},
			Verbs: []string{"get", "update", "patch"}, ResourceNames: []string{"gd-child"},
		}},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(t.Context(), cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kube.RbacV1().ClusterRoles().Delete(context.Background(), cr.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting clusterrole %s: %v", cr.Name, err)
		}
	})
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "gd-tenant-namespaces"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "gd-tenant"}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(t.Context(), crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting clusterrolebinding %s: %v", crb.Name, err)
		}
	})
	tenant := gdUser(t, "gd-tenant")
	eventually(t, "gd-tenant may update namespace gd-child", func(ctx context.Context) error {
		if !tenant.canI("update", "namespaces/gd-child") {
			return errorf("not yet")
		}
		return nil
	})
	if tenant.canI("update", "namespaces/gd-foreign") {
		t.Fatalf("gd-tenant may update gd-foreign")
	}

	t.Log("as gd-tenant: an unrelated label on gd-child is no business of the guards")
	tenant.ok("label", "namespace", "gd-child", "gd-purpose=test")

	t.Log("as gd-tenant: gd-child can't adopt gd-foreign, which gd-tenant can't update")
	tenant.refused([]string{`admission webhook "parents.implicit.dev" denied the request`, `update namespace "gd-foreign"`},
		"label", "namespace", "gd-child", "implicit.dev/parent=gd-foreign")

	t.Log("gd-tenant is granted update on gd-mine too; gd-child adopts gd-mine")
	cur, err := kube.RbacV1().ClusterRoles().Get(t.Context(), cr.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Rules[0].ResourceNames = []string{"gd-child", "gd-mine"}
	if _, err := kube.RbacV1().ClusterRoles().Update(t.Context(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "gd-tenant may update namespace gd-mine", func(ctx context.Context) error {
		if !tenant.canI("update", "namespaces/gd-mine") {
			return errorf("not yet")
		}
		return nil
	})
	tenant.ok("label", "namespace", "gd-child", "implicit.dev/parent=gd-mine")
	ns, err := kube.CoreV1().Namespaces().Get(t.Context(), "gd-child", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := ns.Labels["implicit.dev/parent"]; p != "gd-mine" {
		t.Fatalf("gd-child's parent is %q, want gd-mine", p)
	}

	t.Log("waiting until gd-child's view inherits from gd-mine (the guards read the same mirror)")
	createRoleBinding(t, kube, "gd-mine", "gd-mine-ops", "view", "gd:ops")
	waitForView(t, dyn, viewRoleBindings, "gd-child", "gd-mine-", map[string]viewItem{
		"gd-mine-ops": {Scope: "parent", Source: "gd-mine"},
	})

	t.Log("as admin: gd-mine's parent set to gd-child would close a cycle")
	adm.refused([]string{`admission webhook "parents.implicit.dev" denied the request`, "cycle", "gd-mine -> gd-child -> gd-mine"},
		"label", "namespace", "gd-mine", "implicit.dev/parent=gd-child")

	t.Log("as admin: kube-system, excluded, can't be a parent")
	adm.refused([]string{`admission webhook "parents.implicit.dev" denied the request`, `"kube-system" can't be a parent`},
		"label", "namespace", "gd-child", "implicit.dev/parent=kube-system", "--overwrite")
	t.Log("as gd-tenant: kube-system, which gd-tenant can't update, is refused too")
	tenant.refused([]string{`admission webhook "parents.implicit.dev" denied the request`, `"kube-system"`},
		"label", "namespace", "gd-child", "implicit.dev/parent=kube-system", "--overwrite")

	ns, err = kube.CoreV1().Namespaces().Get(t.Context(), "gd-mine", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := ns.Labels["implicit.dev/parent"]; ok {
		t.Errorf("gd-mine has parent %q after the refused cycle", p)
	}
}

// TestFanoutWarning checks the fan-out warning: every update of an
// inherited source says how many namespaces' views it changes, counted
// here independently from the views.
func TestFanoutWarning(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	adm := gdAdmin(t)

	t.Log("gd-forg with children gd-f1, gd-f2, gd-fx (excludes rolebindings/gd-fan) and gd-fs (shadows gd-fan and gd-forg-ops locally)")
	child := map[string]string{"implicit.dev/parent": "gd-forg"}
	gdNamespace(t, kube, "gd-forg", nil, nil)
	gdNamespace(t, kube, "gd-f1", child, nil)
	gdNamespace(t, kube, "gd-f2", child, nil)
	gdNamespace(t, kube, "gd-fx", child, map[string]string{"implicit.dev/exclude": "rolebindings/gd-fan"})
	gdNamespace(t, kube, "gd-fs", child, nil)
	createRoleBinding(t, kube, globalNS, "gd-fan", "view", "gd:fans")
	createRoleBinding(t, kube, "gd-forg", "gd-forg-ops", "view", "gd:ops")
	createRoleBinding(t, kube, "gd-fs", "gd-fan", "edit", "gd:fs")
	createRoleBinding(t, kube, "gd-fs", "gd-forg-ops", "edit", "gd:fs")
	createRoleBinding(t, kube, "gd-f1", "gd-fleaf", "edit", "gd:f1")

	g := viewItem{Scope: "global", Source: globalNS}
	org := viewItem{Scope: "parent", Source: "gd-forg"}
	fs := viewItem{Scope: "local", Source: "gd-fs"}
	waitForView(t, dyn, viewRoleBindings, "gd-forg", "gd-f", map[string]viewItem{"gd-fan": g, "gd-forg-ops": {Scope: "local", Source: "gd-forg"}})
	waitForView(t, dyn, viewRoleBindings, "gd-f1", "gd-f", map[string]viewItem{"gd-fan": g, "gd-forg-ops": org, "gd-fleaf": {Scope: "local", Source: "gd-f1"}})
	waitForView(t, dyn, viewRoleBindings, "gd-f2", "gd-f", map[string]viewItem{"gd-fan": g, "gd-forg-ops": org})
	waitForView(t, dyn, viewRoleBindings, "gd-fx", "gd-f", map[string]viewItem{"gd-forg-ops": org})
	waitForView(t, dyn, viewRoleBindings, "gd-fs", "gd-f", map[string]viewItem{"gd-fan": fs, "gd-forg-ops": fs})
	gdWaitFanoutCondition(t, kube, globalNS)

	// update labels source namespace/name and returns the warning's N and
	// the namespaces whose view shows that source, listed before and after.
	attempt := 0
	update := func(namespace, name string) (n int, warned bool, before, after []string) {
		t.Helper()
		attempt++
		before = gdViewers(t, name, namespace)
		r := adm.ok("label", "rolebinding", name, "-n", namespace, "gd-attempt="+strconv.Itoa(attempt), "--overwrite")
		n, warned = gdReach(r.stderr)
		after = gdViewers(t, name, namespace)
		return n, warned, before, after
	}
	// checkReach updates namespace/name until the views it reaches hold
	// still around the update (namespaces of earlier tests may still be
	// terminating), then wants N to equal their number.
	checkReach := func(namespace, name string) []string {
		t.Helper()
		for i := 0; i < 5; i++ {
			n, warned, before, after := update(namespace, name)
			if !warned {
				t.Fatalf("update of %s/%s: no fan-out warning", namespace, name)
			}
			if strings.Join(before, ",") != strings.Join(after, ",") {
				t.Logf("the views of %s/%s changed during the update (%v, then %v); again", namespace, name, before, after)
				continue
			}
			// A reach is who inherits: the source's own namespace is not counted.
			inheriting := len(before)
			if contains(before, namespace) {
				inheriting--
			}
			t.Logf("update of %s/%s: the warning says %d namespaces; %d views show it: %v", namespace, name, n, len(before), before)
			if n != inheriting {
				t.Errorf("update of %s/%s: the warning says %d namespaces, but %d views besides its own show it: %v", namespace, name, n, inheriting, before)
			}
			return before
		}
		t.Fatalf("the views of %s/%s never held still", namespace, name)
		return nil
	}

	t.Log("a global source: N is every namespace that shows it, but the global namespace itself (a reach is who inherits)")
	viewers := checkReach(globalNS, "gd-fan")
	for _, want := range []string{globalNS, "gd-forg", "gd-f1", "gd-f2", "default"} {
		if !contains(viewers, want) {
			t.Errorf("the views of the global gd-fan miss %s: %v", want, viewers)
		}
	}
	for _, not := range []string{"gd-fx", "gd-fs", "kube-system"} {
		if contains(viewers, not) {
			t.Errorf("the views of the global gd-fan include %s: %v", not, viewers)
		}
	}

	t.Log("a parent source: the warning appears once the fanout condition names gd-forg")
	start := time.Now()
	eventually(t, "the update of gd-forg/gd-forg-ops warns", func(ctx context.Context) error {
		if _, warned, _, _ := update("gd-forg", "gd-forg-ops"); !warned {
			return errorf("no warning yet")
		}
		return nil
	})
	t.Logf("warned after %s", time.Since(start).Round(time.Millisecond))
	viewers = checkReach("gd-forg", "gd-forg-ops")
	if want := []string{"gd-f1", "gd-f2", "gd-forg", "gd-fx"}; strings.Join(viewers, ",") != strings.Join(want, ",") {
		t.Errorf("views of gd-forg/gd-forg-ops: %v, want %v (gd-fs shadows it)", viewers, want)
	}

	t.Log("a write that changes nothing warns of nothing: kube-apiserver writes nothing, and no view changes")
	if r := adm.ok("annotate", "rolebinding", "gd-fan", "-n", globalNS, "gd-noop=1", "--overwrite"); !strings.Contains(r.stderr, "implicit.dev: this change reaches") {
		t.Errorf("the first annotate of gd-fan (a change) did not warn: %s", r.stderr)
	}
	for _, args := range [][]string{
		{"annotate", "rolebinding", "gd-fan", "-n", globalNS, "gd-noop=1", "--overwrite"},
		{"patch", "rolebinding", "gd-fan", "-n", globalNS, "--type=merge", "-p", "{}"},
		{"patch", "rolebinding", "gd-fan", "-n", globalNS, "--type=merge", "-p", "{}", "--dry-run=server"},
	} {
		if r := adm.ok(args...); strings.Contains(r.stderr, "implicit.dev: this change reaches") {
			t.Errorf("kubectl %s changes nothing, yet warned: %s", strings.Join(args, " "), r.stderr)
		}
	}

	t.Log("a leaf tenant's source: no warning")
	r := adm.ok("label", "rolebinding", "gd-fleaf", "-n", "gd-f1", "gd-attempt=leaf")
	if strings.Contains(r.stderr, "implicit.dev:") {
		t.Errorf("update in the leaf gd-f1 warned: %s", r.stderr)
	}

	t.Log("deleting a global source warns too")
	createRoleBinding(t, kube, globalNS, "gd-fan-gone", "view", "gd:fans")
	eventually(t, "gd-fan-gone shows in gd-f2", func(ctx context.Context) error {
		if got := gdViewers(t, "gd-fan-gone", globalNS); !contains(got, "gd-f2") {
			return errorf("viewers %v", got)
		}
		return nil
	})
	before := gdViewers(t, "gd-fan-gone", globalNS)
	r = adm.ok("delete", "rolebinding", "gd-fan-gone", "-n", globalNS)
	if n, ok := gdReach(r.stderr); !ok {
		t.Errorf("delete of the global gd-fan-gone: no fan-out warning:\n%s", r.stderr)
	} else if n != len(before)-1 {
		t.Logf("delete of gd-fan-gone: the warning says %d namespaces, %d views showed it, its own included (the views of terminating namespaces may have moved)", n, len(before))
	} else {
		t.Logf("delete of gd-fan-gone: %d namespaces", n)
	}
}

// TestGuardsOutage stops implicit-apiserver: writes the guards don't match
// go on; those they guard fail closed until it is back.
func TestGuardsOutage(t *testing.T) {
	kube, _ := admin(t)
	ensureNamespace(t, kube, globalNS)
	adm := gdAdmin(t)
	gdNamespace(t, kube, "gd-o-team", nil, nil)
	gdNamespace(t, kube, "gd-o-org", nil, nil)
	createRoleBinding(t, kube, globalNS, "gd-o-locked", "view", "gd:o", locked)
	createRoleBinding(t, kube, "gd-o-team", "gd-o-free", "view", "gd:o")
	createRoleBinding(t, kube, globalNS, "gd-o-global", "view", "gd:o")

	t.Log("waiting until the shadow guard's match condition names gd-o-locked")
	eventually(t, "a dry-run create of gd-o-locked in gd-o-team is refused", func(ctx context.Context) error {
		if adm.run("create", "rolebinding", "gd-o-locked", "-n", "gd-o-team", "--clusterrole=view", "--group=gd:o", "--dry-run=server").err == nil {
			return errorf("accepted")
		}
		return nil
	})

	t.Log("with implicit-apiserver up, admin updates the locked gd-o-locked")
	adm.ok("label", "rolebinding", "gd-o-locked", "-n", globalNS, "gd-phase=before")

	t.Log("stopping implicit-apiserver")
	if err := implicit.Stop(); err != nil {
		t.Fatalf("stopping implicit-apiserver: %v", err)
	}
	restart := func() {
		t.Helper()
		if err := implicit.Restart(context.Background()); err != nil {
			t.Fatalf("restarting implicit-apiserver: %v\n%s", err, implicit.LogTail(40))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := cp.WaitAPIServiceAvailable(ctx); err != nil {
			t.Fatalf("after the restart: %v", err)
		}
	}
	t.Cleanup(func() {
		if implicit.Process() == nil {
			restart()
		}
	})

	t.Log("while it is down, writes the guards don't match succeed at once")
	quick := func(args ...string) gdRun {
		t.Helper()
		r := adm.ok(args...)
		t.Logf("kubectl %s: %s", strings.Join(args, " "), r.took.Round(time.Millisecond))
		if r.took > gdQuick {
			t.Errorf("kubectl %s took %s while implicit-apiserver is down, want under %s", strings.Join(args, " "), r.took, gdQuick)
		}
		return r
	}
	quick("create", "configmap", "gd-o-cm", "-n", "gd-o-team", "--from-literal=a=b")
	quick("create", "rolebinding", "gd-o-new", "-n", "gd-o-team", "--clusterrole=view", "--group=gd:o")
	quick("label", "rolebinding", "gd-o-free", "-n", "gd-o-team", "gd-phase=down")
	quick("label", "namespace", "gd-o-team", "gd-unrelated=yes")
	t.Log("the fanout webhook is called for the global namespace, but ignores failures: the update goes through, without a warning")
	if r := quick("label", "rolebinding", "gd-o-global", "-n", globalNS, "gd-phase=down"); strings.Contains(r.stderr, "implicit.dev:") {
		t.Errorf("a warning from a stopped server: %s", r.stderr)
	}

	t.Log("while it is down, guarded writes fail closed, naming the webhook")
	r := adm.refused([]string{`failed calling webhook "shadows.implicit.dev"`}, "create", "rolebinding", "gd-o-locked", "-n", "gd-o-team", "--clusterrole=view", "--group=gd:o")
	t.Logf("took %s", r.took.Round(time.Millisecond))
	r = adm.refused([]string{`failed calling webhook "locks.implicit.dev"`}, "label", "rolebinding", "gd-o-locked", "-n", globalNS, "gd-phase=down", "--overwrite")
	t.Logf("took %s", r.took.Round(time.Millisecond))
	// The mutating parent-uid webhook is called before the validating guards.
	r = adm.refused([]string{`failed calling webhook "parent-uid.implicit.dev"`}, "label", "namespace", "gd-o-team", "implicit.dev/parent=gd-o-org")
	t.Logf("took %s", r.took.Round(time.Millisecond))

	t.Log("restarting implicit-apiserver")
	restart()

	t.Log("after the restart, admin updates the locked gd-o-locked and sets the parent label")
	eventually(t, "updating the locked gd-o-locked", func(ctx context.Context) error {
		return adm.run("label", "rolebinding", "gd-o-locked", "-n", globalNS, "gd-phase=after", "--overwrite").err
	})
	eventually(t, "setting gd-o-team's parent", func(ctx context.Context) error {
		return adm.run("label", "namespace", "gd-o-team", "implicit.dev/parent=gd-o-org").err
	})
	rb, err := kube.RbacV1().RoleBindings(globalNS).Get(t.Context(), "gd-o-locked", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rb.Labels["gd-phase"] != "after" || rb.Annotations["implicit.dev/locked"] != "true" {
		t.Errorf("gd-o-locked: labels %v annotations %v", rb.Labels, rb.Annotations)
	}
}

// TestGuardsReapplied re-applies the guards' ValidatingWebhookConfiguration
// as a deployment tool would (kubectl apply of the artifacts, GitOps), which
// resets the synced match conditions to "false": implicit-apiserver must
// bring them back, though no source changed.
func TestGuardsReapplied(t *testing.T) {
	kube, _ := admin(t)
	ensureNamespace(t, kube, globalNS)
	adm := gdAdmin(t)
	gdNamespace(t, kube, "gd-r-team", nil, nil)
	createRoleBinding(t, kube, globalNS, "gd-r-sec", "view", "gd:security", locked)
	shadowRefused := func(ctx context.Context) error {
		r := adm.run("create", "rolebinding", "gd-r-sec", "-n", "gd-r-team", "--clusterrole=edit", "--group=gd:r", "--dry-run=server")
		if r.err == nil {
			return errorf("a dry-run create of gd-r-team/gd-r-sec, shadowing the locked global gd-r-sec, is accepted")
		}
		if !strings.Contains(r.stderr, "implicit-global/gd-r-sec") {
			return errorf("refused for another reason: %s", r.stderr)
		}
		return nil
	}
	eventually(t, "the shadow guard refuses gd-r-team/gd-r-sec", shadowRefused)
	gdWaitFanoutCondition(t, kube, globalNS)

	t.Log("waiting until no namespace is terminating, so that no source changes by chance after the re-apply")
	eventually(t, "no namespace is terminating", func(ctx context.Context) error {
		list, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var terminating []string
		for _, ns := range list.Items {
			if ns.DeletionTimestamp != nil {
				terminating = append(terminating, ns.Name)
			}
		}
		if len(terminating) > 0 {
			return errorf("terminating: %v", terminating)
		}
		return nil
	})
	// ConditionSync writes at most once a second: wait until it has left
	// the configuration alone for two of its intervals, so that no write it
	// had pending brings the conditions back after the re-apply.
	var writtenRV string
	var writtenAt time.Time
	eventually(t, "ConditionSync to leave the configuration alone for 2s", func(ctx context.Context) error {
		cfg, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, controlplane.GuardsConfiguration, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cfg.ResourceVersion != writtenRV {
			writtenRV, writtenAt = cfg.ResourceVersion, time.Now()
		}
		if d := time.Since(writtenAt); d < 2*time.Second {
			return errorf("the configuration was written %s ago", d.Round(time.Millisecond))
		}
		return nil
	})

	t.Log("re-applying the webhook configuration, as written by webhookconfig.Configuration (synced conditions \"false\")")
	if err := cp.RegisterGuards(t.Context(), implicit, servedSources()); err != nil {
		t.Fatal(err)
	}
	t.Logf("no source changes; the shadow and fanout guards must come back within %s (ConditionSync re-checks every 30s)", gdReapplied)
	start := time.Now()
	eventuallyWithin(t, 500*time.Millisecond, gdReapplied, "the shadow guard to refuse again", shadowRefused)
	t.Logf("the shadow guard is back after %s", time.Since(start).Round(time.Millisecond))
	gdWaitFanoutCondition(t, kube, globalNS)
}
