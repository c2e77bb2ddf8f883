package main

import (
	"context"
	"errors"
	goflag "flag"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
)

// defaultRequestTimeout is --request-timeout's default: long enough for a
// question of a busy server, short enough that a hung one is not a silent
// wait.
const defaultRequestTimeout = "10s"

// klogFlags are klog's flags, registered once per process (klog's state is
// the process's).
var klogFlags = sync.OnceValue(func() *goflag.FlagSet {
	fs := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(fs)
	// Without -v, client-go's own error lines (a discovery cache that
	// fails, with no server) are not printed: the command's error says what
	// failed, once. Not to standard error, not even an error line (klog
	// writes those at its stderrthreshold whatever logtostderr says).
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	return fs
})

// addKlogFlags adds klog's -v (and --vmodule) as kubectl has them: -v=6
// logs the requests on standard error.
func addKlogFlags(root *cobra.Command) {
	fs := klogFlags()
	for _, name := range []string{"v", "vmodule"} {
		root.PersistentFlags().AddGoFlag(fs.Lookup(name))
	}
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		if v := cmd.Flags().Lookup("v"); v != nil && v.Changed && v.Value.String() != "0" {
			_ = fs.Set("logtostderr", "true")
		}
	}
}

// unavailableHint says what to check when implicit.dev did not answer: a
// hung or unready server behind the APIService, or an unavailable APIService
// (kube-apiserver's aggregator answers ServiceUnavailable).
func unavailableHint(err error) string {
	check := "Check that the APIService is Available (kubectl get apiservice v1alpha1.implicit.dev) and that implicit-apiserver is ready (its pods' readiness, /readyz)."
	var netErr net.Error
	switch {
	case apierrors.IsServiceUnavailable(err),
		strings.Contains(err.Error(), "the server is currently unable to handle the request"):
		return "implicit.dev is unavailable. " + check
	case errors.Is(err, context.DeadlineExceeded), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err),
		errors.As(err, &netErr) && netErr.Timeout(),
		strings.Contains(err.Error(), "Client.Timeout exceeded"):
		return fmt.Sprintf("The server did not answer within --request-timeout (default %s). %s Raise --request-timeout for a slow server.", defaultRequestTimeout, check)
	}
	return ""
}

// usageError is a command line the command can't take (a wrong argument
// count): run prints it with the command's usage line and where its help
// is, as kubectl prints a usage error.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// usageOnArgs makes every command's argument check a usage error.
func usageOnArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				return &usageError{msg: err.Error()}
			}
			return nil
		}
	}
	for _, c := range cmd.Commands() {
		usageOnArgs(c)
	}
}

// printUsage prints what kubectl prints after a usage error.
func printUsage(w io.Writer, cmd *cobra.Command) {
	fmt.Fprintf(w, "Usage:\n  %s\n\nSee '%s -h' for help and examples.\n", cmd.UseLine(), cmd.CommandPath())
}
