package apiserver

import (
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/tools/record"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/materialize"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// startMaterializer starts the server's materializer (pkg/materialize) once
// it serves: it tells the guards the server's own identity and, with
// materialized kinds, writes their copies under leader election.
func (c CompletedConfig) startMaterializer(gs *genericapiserver.GenericAPIServer, mux *watchmux.Mux, guards *admission.Guards) error {
	x := c.ExtraConfig
	if x.Client == nil {
		return nil
	}
	s := materialize.Server{
		Views: mux, Kinds: x.Kinds, Client: x.Client, Dynamic: x.Materialize.Dynamic, Protobuf: x.Materialize.Protobuf, Workers: x.Materialize.Workers,
		LeaseClient: x.Materialize.LeaseClient, LeaseNamespace: x.Materialize.LeaseNamespace, LeaseName: x.Materialize.LeaseName,
		OnIdentity: guards.SetServerIdentity,
	}
	if err := s.Check(); err != nil {
		return err
	}
	return gs.AddPostStartHook("implicit-materializer", func(ctx genericapiserver.PostStartHookContext) error {
		s.NewRecorder = func() record.EventRecorder { return newRecorder(ctx, x.Client) }
		go s.Run(ctx)
		return nil
	})
}
