package server

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/term"

	"github.com/implicit-dev/implicit-apiserver/pkg/version"
)

// NewCommand returns the implicit-apiserver command, running until ctx is cancelled.
func NewCommand(ctx context.Context) *cobra.Command {
	o := NewOptions()
	logOpts := logs.NewOptions()
	var printVersion bool
	cmd := &cobra.Command{
		Use:   "implicit-apiserver",
		Short: "Serve implicit views: effective RoleBindings, Roles and NetworkPolicies per namespace",
		Long: "implicit-apiserver is an aggregated API server serving implicit.dev/v1alpha1: for every namespace, " +
			"the effective objects of each served kind, merged on read from the global namespace, the namespace's " +
			"ancestors and its own objects. Nothing is copied.",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printVersion {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), version.String())
				return err
			}
			if err := logsapi.ValidateAndApply(logOpts, nil); err != nil {
				return err
			}
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return run(ctx, o)
		},
	}
	fss := o.Flags()
	logsapi.AddFlags(logOpts, fss.FlagSet("logging"))
	fss.FlagSet("global").BoolVar(&printVersion, "version", false, "Print the version (implicit-apiserver <version>) and exit.")
	for _, f := range fss.FlagSets {
		cmd.Flags().AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, fss, cols)
	return cmd
}

func run(ctx context.Context, o *Options) error {
	cfg, err := o.Config(ctx)
	if err != nil {
		return err
	}
	srv, err := cfg.Complete().New()
	if err != nil {
		return fmt.Errorf("building the server: %w", err)
	}
	if o.ShutdownCPUProfile != "" {
		defer profileShutdown(ctx, o.ShutdownCPUProfile)()
	}
	return srv.Run(ctx)
}
