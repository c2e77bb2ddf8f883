// Command implicit-apiserver serves implicit views of RoleBindings, Roles,
// NetworkPolicies and other configured kinds as an aggregated API server.
// `implicit-apiserver check` is the chart's helm test (check.go).
package main

import (
	"os"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/cli"

	"github.com/implicit-dev/implicit-apiserver/pkg/cmd/server"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "check" {
		os.Exit(runCheck(os.Args[2:], os.Stdout))
	}
	ctx := genericapiserver.SetupSignalContext()
	os.Exit(cli.Run(server.NewCommand(ctx)))
}
