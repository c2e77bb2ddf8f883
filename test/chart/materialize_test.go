package chart_test

import (
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// TestMaterializeRBAC: the chart's leader-election Role is
// artifacts/base's, and a configured kind with delivery: Materialize gets
// write access for its copies while a View kind gets read access only.
func TestMaterializeRBAC(t *testing.T) {
	t.Parallel()
	objs := mustTemplate(t,
		"kinds[0].group=policy.example.com", "kinds[0].version=v1", "kinds[0].resource=guardrails", "kinds[0].delivery=Materialize",
		"kinds[1].group=example.com", "kinds[1].version=v1", "kinds[1].resource=things")
	var role, base rbacv1.Role
	convert(t, objs.get("Role", "implicit-apiserver-leader-election"), &role)
	readYAML(t, "artifacts/base/role-leader-election.yaml", &base)
	if !reflect.DeepEqual(role.Rules, base.Rules) {
		t.Errorf("chart leader-election Role rules differ from artifacts/base:\nchart: %+v\nbase:  %+v", role.Rules, base.Rules)
	}
	var binding rbacv1.RoleBinding
	convert(t, objs.get("RoleBinding", "implicit-apiserver-leader-election"), &binding)
	if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 || binding.Subjects[0].Name != "implicit-apiserver" {
		t.Errorf("leader-election RoleBinding %+v -> %s", binding.Subjects, binding.RoleRef.Name)
	}
	var kinds rbacv1.ClusterRole
	convert(t, objs.get("ClusterRole", "implicit-apiserver-configured-kinds"), &kinds)
	for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete"} {
		if !allows(kinds.Rules, "policy.example.com", "guardrails", "", verb) {
			t.Errorf("materialized guardrails: no %s", verb)
		}
	}
	for _, verb := range []string{"create", "update", "patch", "delete"} {
		if allows(kinds.Rules, "example.com", "things", "", verb) {
			t.Errorf("things (delivery View) may %s", verb)
		}
	}
}
