package admission_test

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// TestUnlockAfterALockLanded: the org locks implicit-global/rb, then
// unlocks it; a tenant's own rb is refused while the lock may be in force
// and admitted once the mirror shows the unlock. The lock guard remembers a
// lock it admitted (for 30 s) because the mirror may not show it yet; before,
// that memory outlived the mirror showing the lock and the unlock after it,
// and refused the tenant's rb for the rest of the 30 s. Found by
// TestOfflineMatchesServer (seed 1795960918788756034): kubectl implicit
// test judged the tenant's create by the files, the server refused it.
func TestUnlockAfterALockLanded(t *testing.T) {
	t.Parallel()
	create, update := admissionv1.Create, admissionv1.Update
	shadow := request(create, rolebindings, "tn", "rb", nil, roleBinding("tn", "rb"))
	replica := func(m *watchmux.Mux, l admission.Ledger) *admission.Guards {
		cfg := admission.Config{
			Mirror:     admission.MirrorOf(whatif.New(m)),
			Authorizer: &fakeAuthorizer{answers: allowAll(unlock(rolebindings, global, "rb"))},
			Served:     served, GlobalNamespaces: []string{global},
		}
		if l != nil {
			cfg.Ledger = l
		}
		return admission.NewGuards(cfg)
	}
	type step struct {
		what string
		// mirror is the source as the mirror shows it next (nil: unchanged).
		mirror *rbacv1.RoleBinding
		// write is an org's write of the source, which the lock guard admits.
		write *admissionv1.AdmissionRequest
		// shadowed: the tenant's rb is refused after the step.
		shadowed bool
	}
	at := func(rv string) objOpt { return func(m *metav1.ObjectMeta) { m.ResourceVersion = rv } }
	for _, tc := range []struct {
		name string
		// replicas: the org's writes are decided on one replica, the
		// tenant's on the other, which learns of them from the record.
		replicas bool
		// before is the source before the steps (nil: none).
		before *rbacv1.RoleBinding
		steps  []step
	}{
		{name: "created locked, then unlocked", steps: []step{
			{what: "the locked creation admitted", write: request(create, rolebindings, global, "rb", nil, roleBinding(global, "rb", isLocked)), shadowed: true},
			{what: "the mirror shows it", mirror: roleBinding(global, "rb", isLocked, at("10")), shadowed: true},
			{what: "the unlock admitted", write: request(update, rolebindings, global, "rb", roleBinding(global, "rb", isLocked, at("10")), roleBinding(global, "rb", at("10"))), shadowed: true},
			{what: "the mirror shows the unlock", mirror: roleBinding(global, "rb", at("11"))},
		}},
		{name: "locked by an update, the mirror lagging", before: roleBinding(global, "rb", at("20")), steps: []step{
			{what: "the lock admitted over version 20", write: request(update, rolebindings, global, "rb", roleBinding(global, "rb", at("20")), roleBinding(global, "rb", isLocked, at("20"))), shadowed: true},
			{what: "the mirror shows version 20 again (a relist)", mirror: roleBinding(global, "rb", at("20")), shadowed: true},
			{what: "the mirror shows the lock", mirror: roleBinding(global, "rb", isLocked, at("21")), shadowed: true},
			{what: "the unlock admitted", write: request(update, rolebindings, global, "rb", roleBinding(global, "rb", isLocked, at("21")), roleBinding(global, "rb", at("21"))), shadowed: true},
			{what: "the mirror shows the unlock", mirror: roleBinding(global, "rb", at("22"))},
		}},
		{name: "another object of that name in the mirror", steps: []step{
			{what: "the locked creation admitted", write: request(create, rolebindings, global, "rb", nil, roleBinding(global, "rb", isLocked)), shadowed: true},
			{what: "the mirror shows an unlocked rb of another uid", mirror: roleBinding(global, "rb", at("30"), func(m *metav1.ObjectMeta) { m.UID = "an-earlier-rb" }), shadowed: true},
		}},
		{name: "created locked on the other replica, then unlocked", replicas: true, steps: []step{
			{what: "the locked creation admitted", write: request(create, rolebindings, global, "rb", nil, roleBinding(global, "rb", isLocked)), shadowed: true},
			{what: "the mirror shows it", mirror: roleBinding(global, "rb", isLocked, at("40")), shadowed: true},
			{what: "the unlock admitted", write: request(update, rolebindings, global, "rb", roleBinding(global, "rb", isLocked, at("40")), roleBinding(global, "rb", at("40"))), shadowed: true},
			{what: "the mirror shows the unlock", mirror: roleBinding(global, "rb", at("41"))},
			{what: "the tenant's rb decided again", shadowed: false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			namespaces := []*corev1.Namespace{ns(global, ""), ns("tn", "")}
			orgMux, tenantMux := hierarchyMux(t, namespaces), hierarchyMux(t, namespaces)
			var org, tenant *admission.Guards
			if tc.replicas {
				shared := &memLedger{}
				org, tenant = replica(orgMux, shared), replica(tenantMux, shared)
			} else {
				tenantMux = orgMux
				org = replica(orgMux, nil)
				tenant = org
			}
			if tc.before != nil {
				for _, m := range []*watchmux.Mux{orgMux, tenantMux} {
					m.OnSource("rolebindings", tc.before.DeepCopy(), false)
				}
			}
			for _, s := range tc.steps {
				if s.mirror != nil {
					for _, m := range []*watchmux.Mux{orgMux, tenantMux} {
						m.OnSource("rolebindings", s.mirror.DeepCopy(), false)
					}
				}
				if s.write != nil {
					if resp, _ := review(t, org, webhookconfig.PathLocks, s.write); resp == nil || !resp.Allowed {
						t.Fatalf("%s: the lock guard refused the org's write: %+v", s.what, resp)
					}
				}
				resp, _ := review(t, tenant, webhookconfig.PathShadows, shadow)
				if resp == nil {
					t.Fatalf("%s: no answer", s.what)
				}
				if s.shadowed == resp.Allowed {
					t.Errorf("%s: the tenant's rb allowed %v, want %v (%+v)", s.what, resp.Allowed, !s.shadowed, resp.Result)
				}
			}
		})
	}
}
