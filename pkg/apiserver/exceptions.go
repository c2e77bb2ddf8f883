package apiserver

import (
	corev1 "k8s.io/api/core/v1"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/implicit-dev/implicit-apiserver/pkg/answers"
	"github.com/implicit-dev/implicit-apiserver/pkg/exceptions"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// startExceptionWriter starts, on every replica once it serves, the writer
// of the exceptions' expiry marks (pkg/exceptions), on the shared namespace
// informer; without a client to the host, none.
func (c CompletedConfig) startExceptionWriter(gs *genericapiserver.GenericAPIServer, mux *watchmux.Mux) error {
	x := c.ExtraConfig
	if x.Client == nil {
		return nil
	}
	a := answers.New(mux)
	client := x.ExceptionsClient
	if client == nil {
		client = x.Client
	}
	w, err := exceptions.New(exceptions.Config{
		Client:        client,
		Namespaces:    x.Informers.Core().V1().Namespaces(),
		Clock:         x.Clock,
		WarningWindow: x.ExceptionWarningWindow,
		// Requested needs the views: the served list's state.
		StateOf: func(ns *corev1.Namespace, e merge.Exception) string { return a.ExceptionState(ns.Name, e) },
	})
	if err != nil {
		return err
	}
	return gs.AddPostStartHook("implicit-exception-expiry", func(ctx genericapiserver.PostStartHookContext) error {
		go w.Run(ctx, newRecorder(ctx, x.Client))
		return nil
	})
}
