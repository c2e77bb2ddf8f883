package chart_test

import (
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// TestAdmissionPolicyExample: the example policy and its binding audit and
// warn only, fail open, and never match the release namespace, the global
// namespaces or the excluded ones; off by default.
func TestAdmissionPolicyExample(t *testing.T) {
	t.Parallel()
	if d := mustTemplate(t); d.get("ValidatingAdmissionPolicy", "replica-limit") != nil {
		t.Error("the example policy is rendered by default")
	}
	objs := mustTemplate(t, "admissionPolicyExample.enabled=true",
		"kinds[0].group=", "kinds[0].version=v1", "kinds[0].resource=configmaps", "kinds[0].globalNamespace=org-config",
		"excludeNamespaces={kube-system,legacy}")
	var policy admissionregistrationv1.ValidatingAdmissionPolicy
	convert(t, objs.get("ValidatingAdmissionPolicy", "replica-limit"), &policy)
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	convert(t, objs.get("ValidatingAdmissionPolicyBinding", "replica-limit-audit"), &binding)
	if p := policy.Spec.FailurePolicy; p == nil || *p != admissionregistrationv1.Ignore {
		t.Errorf("failurePolicy %v, want Ignore", p)
	}
	if pk := policy.Spec.ParamKind; pk == nil || pk.APIVersion != "implicit.dev/v1alpha1" || pk.Kind != "ConfigMap" {
		t.Errorf("paramKind %+v, want the ConfigMap view", pk)
	}
	if got := binding.Spec.ValidationActions; !slices.Equal(got, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit, admissionregistrationv1.Warn}) {
		t.Errorf("validationActions %v, want [Audit Warn]", got)
	}
	if r := binding.Spec.ParamRef; r == nil || r.Namespace != "" || r.Name != "replica-limit" {
		t.Errorf("paramRef %+v, want replica-limit in the request's namespace", r)
	}
	want := []string{"implicit-system", "implicit-global", "kube-system", "legacy", "org-config"}
	for what, sel := range map[string]*admissionregistrationv1.MatchResources{"policy": policy.Spec.MatchConstraints, "binding": binding.Spec.MatchResources} {
		if sel == nil || sel.NamespaceSelector == nil || len(sel.NamespaceSelector.MatchExpressions) != 1 {
			t.Errorf("%s: no namespace selector: %+v", what, sel)
			continue
		}
		e := sel.NamespaceSelector.MatchExpressions[0]
		got := slices.Clone(e.Values)
		slices.Sort(got)
		w := slices.Clone(want)
		slices.Sort(w)
		if e.Key != "kubernetes.io/metadata.name" || e.Operator != "NotIn" || !slices.Equal(got, w) {
			t.Errorf("%s: namespaceSelector %+v, want kubernetes.io/metadata.name NotIn %v", what, e, want)
		}
	}
}
