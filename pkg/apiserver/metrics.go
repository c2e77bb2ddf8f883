package apiserver

import (
	"k8s.io/component-base/metrics/legacyregistry"

	// rest_client_* metrics of the server's calls to the host (and hub)
	// cluster, as metrics-server and kube-controller-manager register them.
	_ "k8s.io/component-base/metrics/prometheus/restclient"

	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/exceptions"
	"github.com/implicit-dev/implicit-apiserver/pkg/fleet"
	"github.com/implicit-dev/implicit-apiserver/pkg/fleethub"
	"github.com/implicit-dev/implicit-apiserver/pkg/hierarchy"
	"github.com/implicit-dev/implicit-apiserver/pkg/kindcontroller"
	"github.com/implicit-dev/implicit-apiserver/pkg/materialize"
	"github.com/implicit-dev/implicit-apiserver/pkg/sourcefeed"
	"github.com/implicit-dev/implicit-apiserver/pkg/version"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
	"github.com/implicit-dev/implicit-apiserver/pkg/webhook"
)

// registerMetrics registers every package's metrics in the legacy registry /metrics serves: the one place they are
// registered (each package's RegisterMetrics, as metrics-server's), so a
// package imported by the plugin or a test registers nothing by itself.
func registerMetrics() {
	register := legacyregistry.MustRegister
	version.RegisterMetrics(register)
	watchmux.RegisterMetrics(register)
	hierarchy.RegisterMetrics(register)
	authz.RegisterMetrics(register)
	kindcontroller.RegisterMetrics(register)
	materialize.RegisterMetrics(register)
	webhook.RegisterMetrics(register)
	sourcefeed.RegisterMetrics(register)
	exceptions.RegisterMetrics(register)
	fleet.RegisterMetrics(register)
	fleethub.RegisterMetrics(register)
}
