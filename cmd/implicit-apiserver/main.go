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
