package controlplane

import (
	"os/exec"
	"reflect"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// TestIdentityObjects: of artifacts/base, the server's identity is its
// Namespace, ServiceAccount and RBAC objects, applied as they are, and one
// ClusterRole more that grants exactly the shipped verbs on its webhook
// configuration under the local name (GuardsConfiguration), bound to the
// same ServiceAccount: nothing broader than the shipped RBAC.
func TestIdentityObjects(t *testing.T) {
	t.Parallel()
	rendered, err := exec.CommandContext(t.Context(), "kubectl", "kustomize", "../../artifacts/base").Output()
	if err != nil {
		t.Fatalf("kubectl kustomize artifacts/base: %v", err)
	}
	docs, err := identityObjects(string(rendered))
	if err != nil {
		t.Fatal(err)
	}
	type object struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	var names []string
	var shipped, local rbacv1.ClusterRole
	for _, doc := range docs {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		if !identityKinds[o.Kind] {
			t.Errorf("%s %s is not part of an identity", o.Kind, o.Metadata.Name)
		}
		names = append(names, o.Kind+" "+o.Metadata.Namespace+"/"+o.Metadata.Name)
		switch {
		case o.Kind == "ClusterRole" && o.Metadata.Name == IdentityServiceAccount:
			if err := yaml.Unmarshal([]byte(doc), &shipped); err != nil {
				t.Fatal(err)
			}
		case o.Kind == "ClusterRole" && o.Metadata.Name == "implicit-apiserver-local-webhook-configuration":
			if err := yaml.Unmarshal([]byte(doc), &local); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("applied: %q", names)
	for _, want := range []string{
		"Namespace /" + IdentityNamespace,
		"ServiceAccount " + IdentityNamespace + "/" + IdentityServiceAccount,
		"ClusterRoleBinding /implicit-apiserver",
		"ClusterRoleBinding /implicit-apiserver-sources",
		"ClusterRoleBinding /implicit-apiserver:system:auth-delegator",
		"RoleBinding kube-system/implicit-apiserver-auth-reader",
		"ClusterRoleBinding /implicit-apiserver-local-webhook-configuration",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s among the applied objects", want)
		}
	}
	var want []rbacv1.PolicyRule
	for _, r := range shipped.Rules {
		if slices.Contains(r.ResourceNames, IdentityServiceAccount) {
			r.ResourceNames = []string{GuardsConfiguration}
			want = append(want, r)
		}
	}
	if len(want) == 0 || !reflect.DeepEqual(local.Rules, want) {
		t.Errorf("the local webhook configuration's rules are %+v, want the shipped ones renamed: %+v", local.Rules, want)
	}
}
