package apiserver

import (
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/implicit-dev/implicit-apiserver/pkg/answers"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
	"github.com/implicit-dev/implicit-apiserver/pkg/servedgroup"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// questions returns the storage of the resources that answer questions about
// the views read from mux: hierarchies, exceptions, explanations, previews and rules
// reviews (whose inherited rules rules lists), candidate audits and policy
// reviews (of the host's admission policies), authorized like the views.
func questions(mux *watchmux.Mux, rules registry.RulesLister, policies registry.AdmissionPolicies, gs *genericapiserver.GenericAPIServer, group *servedgroup.Group) map[string]rest.Storage {
	a := answers.New(mux)
	out := map[string]rest.Storage{
		v1alpha1.ResourceHierarchies:   registry.NewHierarchyStorage(a),
		v1alpha1.ResourceExceptions:    registry.NewExceptionStorage(a),
		v1alpha1.ResourceExplanations:  registry.NewExplanationStorage(a, gs.Authorizer),
		v1alpha1.ResourcePreviews:      registry.NewPreviewStorage(a, gs.Authorizer, group.Kinds),
		v1alpha1.ResourceRulesReviews:  registry.NewRulesReviewStorage(rules, gs.Authorizer, watchmux.IsNotSynced),
		v1alpha1.ResourcePolicyReviews: registry.NewPolicyReviewStorage(a, policies, gs.Authorizer, group.Kinds),
	}
	// The audit of candidates, by the same authorizer (pkg/authz, audit.go).
	if au, ok := rules.(registry.AuditReader); ok {
		out[v1alpha1.ResourceCandidateAudits] = registry.NewCandidateAuditStorage(au, gs.Authorizer, watchmux.IsNotSynced)
	}
	return out
}

// admissionPolicies returns the host's admission policies, read with
// informers that stop with the server.
func (c CompletedConfig) admissionPolicies(gs *genericapiserver.GenericAPIServer) (registry.AdmissionPolicies, error) {
	stop := make(chan struct{})
	err := gs.AddPostStartHook("implicit-admission-policies", func(ctx genericapiserver.PostStartHookContext) error {
		go func() {
			<-ctx.Done()
			close(stop)
		}()
		return nil
	})
	return registry.NewHostAdmissionPolicies(c.ExtraConfig.Client, stop), err
}
