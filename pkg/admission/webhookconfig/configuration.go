package webhookconfig

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// Configuration returns the ValidatingWebhookConfiguration of the guards for
// the served source resources. client gives each guard's client config
// from its path. The shadows and fanout webhooks start matching nothing;
// ConditionSync fills in their conditions from the sources.
//
// Failure policies: locks, shadows, parents, materialized, candidates and
// stages Fail (a guard that can't be asked must not be bypassed; only
// requests that touch a lock, shadow a locked name, scale a guarded kind,
// change a namespace's parent, parent-uid, tenancy or stage, or touch a
// candidate are sent, so an outage blocks only those); fanout Ignore (a
// warning is never worth failing a write for).
func Configuration(name string, served []schema.GroupResource, client func(path string) admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1.ValidatingWebhookConfiguration {
	sourceRule := func(webhook string) []admissionregistrationv1.RuleWithOperations {
		return webhookRules(webhook, served)
	}
	webhook := func(name, path string, fail admissionregistrationv1.FailurePolicyType, timeout int32, rules []admissionregistrationv1.RuleWithOperations, condName, cond string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name:                    name,
			ClientConfig:            client(path),
			Rules:                   rules,
			FailurePolicy:           ptr.To(fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To(timeout),
			AdmissionReviewVersions: []string{"v1"},
			MatchConditions:         []admissionregistrationv1.MatchCondition{{Name: condName, Expression: cond}},
		}
	}
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/name": "implicit-apiserver"}},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			webhook(WebhookLocks, PathLocks, admissionregistrationv1.Fail, 5,
				sourceRule(WebhookLocks), lockTouchedCondition, lockTouched),
			webhook(WebhookShadows, PathShadows, admissionregistrationv1.Fail, 5,
				sourceRule(WebhookShadows), syncedCondition, "false"),
			webhook(WebhookParents, PathParents, admissionregistrationv1.Fail, 5,
				namespaceRules(), hierarchyChangedCondition, hierarchyChanged),
			webhook(WebhookFanout, PathFanout, admissionregistrationv1.Ignore, 2,
				sourceRule(WebhookFanout), syncedCondition, "false"),
			webhook(WebhookMaterialized, PathMaterialized, admissionregistrationv1.Fail, 5,
				sourceRule(WebhookMaterialized), copyTouchedCondition, copyTouchedExpr),
			webhook(WebhookCandidates, PathCandidates, admissionregistrationv1.Fail, 5,
				sourceRule(WebhookCandidates), candidateTouchedCondition, candidateTouchedExpr),
			webhook(WebhookStages, PathStages, admissionregistrationv1.Fail, 5,
				namespaceRules(), stageChangedCondition, stageChanged),
			webhook(WebhookNamespaceDeletions, PathNamespaceDeletions, admissionregistrationv1.Fail, 5,
				namespaceDeleteRules(), syncedCondition, "true"),
		},
	}
	return c
}

// namespaceRules match namespace writes. Labels and annotations can also be
// written through the status and finalize subresources: the guards must see
// those too.
func namespaceRules() []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces", "namespaces/status", "namespaces/finalize"},
			Scope: ptr.To(admissionregistrationv1.ClusterScope)},
	}}
}

// MutatingConfiguration returns the MutatingWebhookConfiguration of the
// mutating guards; client gives each one's client config from its path.
// Both fail closed.
//
// The parent-uid guard records the uid of the parent a namespace's
// implicit.dev/parent names, on the namespace requests that set, change or
// remove the label or the annotation: a label admitted without the uid of
// the parent it meant would be refused by the parent guard anyway.
//
// The own-copy guard makes a write to a materialized copy its writer's own
// (it removes the copy label), on the UPDATEs of namespaced objects of any
// kind whose old object carries the label "true": only copies do (only the
// server may set it), and any kind may be materialized, so its rules need
// no keeping current. Failing closed refuses those writes only, as the
// validating materialized guard does.
func MutatingConfiguration(name string, client func(path string) admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1.MutatingWebhookConfiguration {
	webhook := func(name, path string, rules []admissionregistrationv1.RuleWithOperations, condName, cond string) admissionregistrationv1.MutatingWebhook {
		return admissionregistrationv1.MutatingWebhook{
			Name:                    name,
			ClientConfig:            client(path),
			Rules:                   rules,
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To(int32(5)),
			AdmissionReviewVersions: []string{"v1"},
			// Another mutating webhook that touches what this one writes
			// after it gets it called again.
			ReinvocationPolicy: ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
			MatchConditions:    []admissionregistrationv1.MatchCondition{{Name: condName, Expression: cond}},
		}
	}
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/name": "implicit-apiserver"}},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			webhook(WebhookParentUID, PathParentUID, namespaceRules(), parentTouchedCondition, parentTouched),
			webhook(WebhookOwnCopy, PathOwnCopy, []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}}, copyWrittenCondition, copyWritten),
		},
	}
}

// webhookRules returns the rules of a source webhook for the served
// resources: the lock guard sees updates of the guarded subresources too.
func webhookRules(webhook string, served []schema.GroupResource) []admissionregistrationv1.RuleWithOperations {
	rules := sourceRules(served, sourceWebhookOps[webhook], nil)
	switch webhook {
	case WebhookLocks:
		rules = append(rules, sourceRules(served, []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, GuardedSubresources)...)
	case WebhookMaterialized, WebhookCandidates:
		// A status update writes a copy's labels too, and changes what a
		// candidate's view item shows.
		rules = append(rules, sourceRules(served, []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, []string{SubresourceStatus})...)
	}
	return rules
}

// sourceRules returns the rules matching the served source resources for
// ops, or their subresources when subresources are given. One rule per
// group with that group's resources: a cross product of groups and
// resources could match another group's resource of the same name.
func sourceRules(served []schema.GroupResource, ops []admissionregistrationv1.OperationType, subresources []string) []admissionregistrationv1.RuleWithOperations {
	var groups []string
	byGroup := map[string][]string{}
	for _, gr := range served {
		if _, ok := byGroup[gr.Group]; !ok {
			groups = append(groups, gr.Group)
		}
		if len(subresources) == 0 {
			byGroup[gr.Group] = append(byGroup[gr.Group], gr.Resource)
		}
		for _, sub := range subresources {
			byGroup[gr.Group] = append(byGroup[gr.Group], gr.Resource+"/"+sub)
		}
	}
	rules := make([]admissionregistrationv1.RuleWithOperations, 0, len(groups))
	for _, g := range groups {
		rules = append(rules, admissionregistrationv1.RuleWithOperations{
			Operations: ops,
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{g}, APIVersions: []string{"*"}, Resources: byGroup[g],
				Scope: ptr.To(admissionregistrationv1.NamespacedScope),
			},
		})
	}
	return rules
}

// sourceWebhookOps are the operations of each webhook on source objects.
var sourceWebhookOps = map[string][]admissionregistrationv1.OperationType{
	WebhookLocks:        {admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
	WebhookShadows:      {admissionregistrationv1.Create},
	WebhookFanout:       {admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
	WebhookMaterialized: {admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
	WebhookCandidates:   {admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
}

// setRules sets the source rules of the webhooks on source objects
// to the served resources; it reports whether anything changed.
func setRules(cfg *admissionregistrationv1.ValidatingWebhookConfiguration, served []schema.GroupResource) bool {
	changed := false
	for i := range cfg.Webhooks {
		w := &cfg.Webhooks[i]
		if _, ok := sourceWebhookOps[w.Name]; !ok {
			continue
		}
		want := webhookRules(w.Name, served)
		if !equality.Semantic.DeepEqual(w.Rules, want) {
			w.Rules = want
			changed = true
		}
	}
	return changed
}

// namespaceDeleteRules match the deletion of namespaces.
func namespaceDeleteRules() []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces"},
			Scope: ptr.To(admissionregistrationv1.ClusterScope)},
	}}
}

// InClusterConfiguration is the configuration of artifacts/base: the default
// kinds, implicit-apiserver's Service on port 443, the CA injected by
// cert-manager from the serving certificate.
func InClusterConfiguration() *admissionregistrationv1.ValidatingWebhookConfiguration {
	var served []schema.GroupResource
	for _, k := range kinds.BuiltIns() {
		served = append(served, k.Source.GroupResource())
	}
	cfg := Configuration("implicit-apiserver", served, inClusterClient)
	cfg.APIVersion, cfg.Kind = "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"
	cfg.Annotations = map[string]string{"cert-manager.io/inject-ca-from": "implicit-system/implicit-apiserver-serving-cert"}
	return cfg
}

// InClusterMutatingConfiguration is the MutatingWebhookConfiguration of
// artifacts/base, calling the same Service as InClusterConfiguration.
func InClusterMutatingConfiguration() *admissionregistrationv1.MutatingWebhookConfiguration {
	cfg := MutatingConfiguration("implicit-apiserver", inClusterClient)
	cfg.APIVersion, cfg.Kind = "admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"
	cfg.Annotations = map[string]string{"cert-manager.io/inject-ca-from": "implicit-system/implicit-apiserver-serving-cert"}
	return cfg
}

// inClusterClient calls implicit-apiserver's Service on port 443.
func inClusterClient(path string) admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
		Namespace: "implicit-system", Name: "implicit-apiserver", Path: ptr.To(path), Port: ptr.To(int32(443)),
	}}
}
