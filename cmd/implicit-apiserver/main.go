// Command implicit-apiserver serves implicit views of RoleBindings, Roles,
// NetworkPolicies and other configured kinds as an aggregated API server.
package main

import (
	"os"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/cli"

	"github.com/implicit-dev/implicit-apiserver/pkg/cmd/server"
)

func main() {
	ctx := genericapiserver.SetupSignalContext()
	os.Exit(cli.Run(server.NewCommand(ctx)))
}
