package apiserver

import (
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

// startAudit runs the audit of candidates beside the authorization webhook
// once the server serves: the Warning Events on candidates (with a client),
// and the dropping of the records of candidates that are gone.
func (c CompletedConfig) startAudit(gs *genericapiserver.GenericAPIServer, authorizer *authz.Authorizer) error {
	return gs.AddPostStartHook("implicit-candidate-audit", func(ctx genericapiserver.PostStartHookContext) error {
		if c.ExtraConfig.Client != nil {
			authorizer.SetEventRecorder(newRecorder(ctx, c.ExtraConfig.Client))
		}
		go authorizer.RunAudit(ctx)
		return nil
	})
}
