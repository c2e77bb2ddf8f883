package webhookconfig

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// TestGitOpsIgnoredFieldsAreWhatTheServerWrites keeps the Argo CD
// ignoreDifferences that artifacts/gitops ships equal to the fields
// ConditionSync writes in the shipped ValidatingWebhookConfiguration: a field
// the server writes that the list misses shows as drift forever (and a sync
// undoes the server's work); a field the list names that the server never
// writes hides real drift.
func TestGitOpsIgnoredFieldsAreWhatTheServerWrites(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "artifacts", "gitops", "argocd-ignore-differences.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	exprRE := regexp.MustCompile(`select\(\.name == "([^"]+)"\) \| \.(rules|matchConditions)(?:\[\] \| select\(\.name == "([^"]+)"\))?'`)
	ignored := sets.New[string]()
	for _, m := range exprRE.FindAllStringSubmatch(string(b), -1) {
		ignored.Insert(m[1] + " " + m[2] + " " + m[3])
	}
	if ignored.Len() == 0 {
		t.Fatal("no jqPathExpressions found in artifacts/gitops/argocd-ignore-differences.yaml")
	}

	// What the server writes, at its widest: conditions naming locked
	// items and inherited namespaces, and rules for a configured kind
	// beside the defaults.
	before := InClusterConfiguration()
	after := before.DeepCopy()
	setConditions(after, SyncedConditions(MatchInputs{LockedNames: map[string][]string{"rolebindings": {"admins"}}, Inherited: []string{"org"},
		NeverInherited: []string{"kube-system"}, Materialized: []string{"networkpolicies"}}, "implicit-global"))
	setRules(after, []schema.GroupResource{
		{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"},
		{Group: "rbac.authorization.k8s.io", Resource: "roles"},
		{Group: "networking.k8s.io", Resource: "networkpolicies"},
		{Group: "policy.example.com", Resource: "guardrails"},
	})

	written := sets.New[string]()
	for i := range after.Webhooks {
		was, now := before.Webhooks[i].DeepCopy(), after.Webhooks[i].DeepCopy()
		if !equality.Semantic.DeepEqual(was.Rules, now.Rules) {
			written.Insert(now.Name + " rules ")
		}
		for _, c := range now.MatchConditions {
			i := slices.IndexFunc(was.MatchConditions, func(o admissionregistrationv1.MatchCondition) bool { return o.Name == c.Name })
			if i < 0 || was.MatchConditions[i] != c {
				written.Insert(now.Name + " matchConditions " + c.Name)
			}
		}
		// Nothing else of the webhook may change.
		was.Rules, now.Rules = nil, nil
		keep := func(cs []admissionregistrationv1.MatchCondition) []admissionregistrationv1.MatchCondition {
			return slices.DeleteFunc(cs, func(c admissionregistrationv1.MatchCondition) bool {
				return written.Has(now.Name + " matchConditions " + c.Name)
			})
		}
		was.MatchConditions, now.MatchConditions = keep(was.MatchConditions), keep(now.MatchConditions)
		if !equality.Semantic.DeepEqual(was, now) {
			t.Errorf("the server changed more of webhook %s than its rules and synced match condition", now.Name)
		}
	}
	if missing := written.Difference(ignored); missing.Len() > 0 {
		t.Errorf("the server writes %v, which the Argo CD ignoreDifferences miss", sets.List(missing))
	}
	if extra := ignored.Difference(written); extra.Len() > 0 {
		t.Errorf("the Argo CD ignoreDifferences name %v, which the server never writes", sets.List(extra))
	}
}
