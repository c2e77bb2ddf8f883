package apiserver

import (
	"net/http"

	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"

	"github.com/implicit-dev/implicit-apiserver/pkg/accessreview"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/materialize"
	"github.com/implicit-dev/implicit-apiserver/pkg/servedgroup"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
	"github.com/implicit-dev/implicit-apiserver/pkg/webhook"
)

// installGuards serves the admission guards on their paths, each wrapped by
// callers and measured (pkg/webhook), and keeps the webhook configuration's match conditions current.
// The guards know the built-in kinds from the start; the kind controller
// tells them of the others as it serves them.
func (c CompletedConfig) installGuards(gs *genericapiserver.GenericAPIServer, mux *watchmux.Mux, group *servedgroup.Group, callers func(http.Handler) http.Handler) (*admission.Guards, error) {
	x := c.ExtraConfig
	typed := kinds.Typed(x.Kinds)
	served := make([]schema.GroupResource, 0, len(typed))
	for _, k := range typed {
		served = append(served, k.Source.GroupResource())
	}
	// The guards' access reviews: cached a moment, capped per admission
	// review, and each requester in turn (pkg/accessreview), on a client of
	// their own so that they neither wait for nor delay the server's other
	// requests to the host.
	reviews := x.AccessReviews
	if reviews == nil && x.Client != nil {
		reviews = x.Client.AuthorizationV1().SubjectAccessReviews()
	}
	var sar admission.Authorizer = admission.SARAuthorizer{}
	if reviews != nil {
		sar = accessreview.New(admission.SARAuthorizer{Client: reviews}, x.AccessReviewOptions)
	}
	index := whatif.New(mux)
	cfg := admission.Config{
		Mirror: admission.MirrorOf(index), Authorizer: sar, Served: served,
		GlobalNamespaces: []string{x.Policy.GlobalNamespace},
		Materialized:     materialize.Resources(x.Kinds),
		Ledger:           x.GuardLedger,
	}
	if x.Hub != nil && x.Hub.Client != nil {
		// Approvals of exceptions of hub items are the hub's RBAC's to
		// decide (docs/fleets.md): asked of the hub, for the same user.
		cfg.Hub = accessreview.New(admission.SARAuthorizer{Client: x.Hub.Client.AuthorizationV1().SubjectAccessReviews()}, x.AccessReviewOptions)
		cfg.HubCluster = x.Hub.Name
	}
	for _, k := range x.Kinds {
		if k.GlobalNamespace != "" {
			cfg.GlobalNamespaces = append(cfg.GlobalNamespaces, k.GlobalNamespace)
		}
	}
	if x.Client != nil {
		// The parent-uid webhook reads parents from kube-apiserver.
		cfg.Namespaces = x.Client.CoreV1().Namespaces()
	}
	fleet, err := c.startFleetHub(gs, index)
	if err != nil {
		return nil, err
	}
	if fleet != nil {
		cfg.Fleet = fleet
	}
	guards := admission.NewGuards(cfg)
	if x.GuardLedger != nil {
		if err := gs.AddPostStartHook("implicit-guard-record", func(ctx genericapiserver.PostStartHookContext) error {
			guards.FollowLedger(ctx)
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if err := c.startMaterializer(gs, mux, guards); err != nil {
		return nil, err
	}
	for _, p := range webhookconfig.Paths {
		gs.Handler.NonGoRestfulMux.Handle(p, webhook.MeasureAdmission(p, callers(guards.Handler(p))))
	}
	if x.Client == nil || x.WebhookConfiguration == "" {
		return guards, nil
	}
	sync := &webhookconfig.ConditionSync{
		Client:          x.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations(),
		Kube:            x.Client,
		Name:            x.WebhookConfiguration,
		GlobalNamespace: x.Policy.GlobalNamespace,
		Source:          index,
		Served:          group.Sources,
		Materialized:    guards.MaterializedResources,
	}
	return guards, gs.AddPostStartHook("implicit-webhook-conditions", func(ctx genericapiserver.PostStartHookContext) error {
		go sync.Run(ctx)
		return nil
	})
}

// newAuthorizer returns the authorization webhook's authorizer: inherited
// RoleBindings grant access. The rules reviews list what it decides with.
func (c CompletedConfig) newAuthorizer(mux *watchmux.Mux) (*authz.Authorizer, error) {
	rbac := c.ExtraConfig.Informers.Rbac().V1()
	return authz.New(mux, rbac.ClusterRoles().Informer(), rbac.ClusterRoleBindings().Informer(), 0)
}

// installAuthorizer serves the authorization webhook.
func (c CompletedConfig) installAuthorizer(gs *genericapiserver.GenericAPIServer, authorizer *authz.Authorizer) {
	gs.Handler.NonGoRestfulMux.Handle(authz.Path, webhook.MeasureAuthorize(c.ExtraConfig.WebhookCallers.Require(authorizer.Handler())))
}

// webhookCallers prepares the webhook endpoints' own authentication
// (webhook.Callers.Prepare), before the handler chain is built, and returns
// what wraps each admission guard.
func (c CompletedConfig) webhookCallers() (func(http.Handler) http.Handler, error) {
	x, gc := c.ExtraConfig, c.GenericConfig
	serving := webhook.Serving{
		Authenticator: &gc.Authentication.Authenticator,
		ApplyClientCert: func(ca dynamiccertificates.CAContentProvider) error {
			return gc.Authentication.ApplyClientCert(ca, gc.SecureServing)
		},
	}
	return x.WebhookCallers.Prepare(serving, authz.Path, webhookconfig.Paths, x.AnonymousWebhooks)
}
