package main

import (
	"fmt"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dryRun is --dry-run, as kubectl takes it: none writes, client prints what
// would be written and sends nothing, server sends the writes as dry runs
// (the server's admission, this project's guards among it, judges them and
// warns; nothing is stored).
type dryRun string

const (
	dryRunNone   dryRun = "none"
	dryRunClient dryRun = "client"
	dryRunServer dryRun = "server"
)

// addDryRunFlag adds --dry-run to cmd. A bare --dry-run means client, as
// it did when the flag was a bool (and as kubectl read it).
func addDryRunFlag(cmd *cobra.Command, into *string, what string) {
	cmd.Flags().StringVar(into, "dry-run", string(dryRunNone), `Must be "none", "client", or "server". client: print `+what+`, send nothing. server: send the requests as dry runs, so the server's admission (the guards) judges them and prints its warnings; nothing is stored.`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = string(dryRunClient)
}

// parseDryRun checks --dry-run's value.
func parseDryRun(s string) (dryRun, error) {
	switch d := dryRun(s); d {
	case dryRunNone, dryRunClient, dryRunServer:
		return d, nil
	case "":
		return dryRunNone, nil
	}
	return "", fmt.Errorf(`invalid --dry-run value %q: must be "none", "server", or "client"`, s)
}

// serverDryRun is the DryRun option of a request: All for a server dry run.
func (d dryRun) serverDryRun() []string {
	if d == dryRunServer {
		return []string{metav1.DryRunAll}
	}
	return nil
}

// suffix is what kubectl prints after a dry run's result.
func (d dryRun) suffix() string {
	switch d {
	case dryRunClient:
		return " (dry run)"
	case dryRunServer:
		return " (server dry run)"
	}
	return ""
}
