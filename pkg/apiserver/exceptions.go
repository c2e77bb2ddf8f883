package apiserver

import (
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/implicit-dev/implicit-apiserver/pkg/exceptions"
)

// startExceptionWriter starts, on every replica once it serves, the writer
// of the exceptions' expiry marks (pkg/exceptions), on the shared namespace
// informer; without a client to the host, none.
func (c CompletedConfig) startExceptionWriter(gs *genericapiserver.GenericAPIServer) error {
	x := c.ExtraConfig
	if x.Client == nil {
		return nil
	}
	w, err := exceptions.New(exceptions.Config{
		Client:        x.Client,
		Namespaces:    x.Informers.Core().V1().Namespaces(),
		Clock:         x.Clock,
		WarningWindow: x.ExceptionWarningWindow,
	})
	if err != nil {
		return err
	}
	return gs.AddPostStartHook("implicit-exception-expiry", func(ctx genericapiserver.PostStartHookContext) error {
		go w.Run(ctx, newRecorder(ctx, x.Client))
		return nil
	})
}
