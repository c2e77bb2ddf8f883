package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/version"
)

// Exit codes, as kubectl's: every command exits exitError on an error, as
// kubectl does; can-i exits exitChanged (1) when the answer is no, as
// kubectl auth can-i does; diff exits exitChanged when something would
// change and exitDiffError on an error, as kubectl diff does (0 no
// differences, 1 differences, >1 an error).
const (
	exitOK        = 0
	exitChanged   = 1
	exitError     = 1
	exitDiffError = 2
)

// errChanged tells run that diff found changes: not an error.
var errChanged = errors.New("changes found")

// displayName is how kubectl runs the plugin, and how its help and
// version name it.
const displayName = "kubectl implicit"

// options are what every subcommand shares: the kubeconfig flags and -o.
type options struct {
	config  *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	output  string
	// can-i's -q and --subresource.
	quiet       bool
	subresource string
}

// run executes the plugin with args and returns its exit code.
func run(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	o := &options{config: genericclioptions.NewConfigFlags(true), streams: streams}
	// A question answers in a moment or not at all: kubectl's
	// --request-timeout, with a default that suits one (kubectl's own, 0,
	// waits as long as the server holds the connection).
	o.config.Timeout = ptr.To(defaultRequestTimeout)
	// The server's warnings (the guards', a deprecation) print as kubectl
	// prints them, "Warning: ..." on standard error, once each; client-go
	// would log them with klog.
	warnings := rest.NewWarningWriter(streams.ErrOut, rest.WarningWriterOptions{Deduplicate: true})
	o.config.WithWrapConfigFn(func(c *rest.Config) *rest.Config {
		c.WarningHandler = warnings
		return c
	})
	root := &cobra.Command{
		// Use is the command's name; help and usage lines read displayName.
		Use:         "implicit",
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: displayName},
		Short:       "Ask implicit-apiserver why a view holds what it holds, where a namespace stands, and what an edit would change",
		Long: `kubectl implicit answers the questions views leave open, from implicit.dev's
hierarchies, explanations, previews and rules reviews and its views:

  tree [NAMESPACE]            the hierarchy, problems marked (a namespace's lineage and subtree, or every namespace's)
  why KIND NAME -n NS         why NAME is, or is not, in NS's view of KIND: every scope, global down to NS
  reach KIND NAME -n NS       the namespaces whose view shows the source NS/NAME (reads the views of every namespace)
  diff -f FILENAME | -k DIR   what applying (or, with --delete, deleting) the sources would change, namespace by namespace,
                              with a field diff per changed item; exits 0 when nothing would change, 1 when something would, >1 on error
  rollout status|promote|abort KIND NAME -n NS
                              a staged rollout: which namespaces see NS/NAME's candidate; promote it (two writes); abort it
  can-i VERB RESOURCE [NAME] -n NS | can-i --list -n NS
                              what you may do in NS and why: local RBAC or which inherited RoleBinding; exits 1 on no
  policies -n NS              the admission policies whose parameters NS inherits from views: bindings, actions, parameters
  exceptions [-A | -n NS]     the exceptions NS's lineage declares: what, why, who, state and time left;
                              exceptions request|approve NAME -n NS writes one, as you
  fleet status [KIND NAME]    on a fleet's hub: each member cluster's served revision, lag, staleness and last report;
                              with KIND NAME, which version of the hub source each member serves, candidates included
  test DIR                    no cluster: check DIR's ImplicitTest expectations (views, guards' refusals, access) against
                              its manifests with the server's own rules; exits 1 on a failure, 2 on bad input
  diff --from A --to B        no cluster: what changing the manifests A (a directory or Git ref) into B changes in every
                              view, and what the guards would refuse; -o markdown for a pull-request comment

Every command exits 1 on an error, as kubectl does, but diff and test, which exit 2.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Version,
	}
	root.SetVersionTemplate(versionLine + "\n")
	root.SetArgs(args)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.config.AddFlags(root.PersistentFlags())
	addKlogFlags(root)
	root.PersistentFlags().StringVarP(&o.output, "output", "o", "", "Output format: "+outputFormats+". Default: a table.")
	root.AddCommand(o.treeCommand(), o.whyCommand(), o.reachCommand(), o.diffCommand(), o.rolloutCommand(), o.canICommand(), o.policiesCommand(), o.exceptionsCommand(), o.fleetCommand(), o.testCommand(), versionCommand())
	o.addCompletions(root)
	usageOnArgs(root)
	cmd, err := root.ExecuteContextC(ctx)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errChanged), errors.Is(err, errDenied), errors.Is(err, errTestsFailed):
		return exitChanged
	}
	printError(streams.ErrOut, err)
	if hint := unavailableHint(err); hint != "" {
		fmt.Fprintln(streams.ErrOut, hint)
	}
	var usage *usageError
	if errors.As(err, &usage) && cmd != nil {
		printUsage(streams.ErrOut, cmd)
	}
	var input *inputError
	if cmd != nil && cmd.Name() == "diff" || errors.As(err, &input) {
		return exitDiffError
	}
	return exitError
}

// printError prints err as kubectl does: an API error as "Error from server
// (Reason): ...", any other as "error: ...". A promotion that stopped
// halfway prints its cause, then what stands.
func printError(w io.Writer, err error) {
	var partial *partialError
	if errors.As(err, &partial) {
		printError(w, partial.cause)
		fmt.Fprintln(w, "error:", partial.msg)
		return
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		switch s := status.Status(); {
		case s.Reason == metav1.StatusReasonUnauthorized:
			fmt.Fprintf(w, "error: You must be logged in to the server (%s)\n", s.Message)
		case s.Reason != "":
			fmt.Fprintf(w, "Error from server (%s): %v\n", s.Reason, err)
		default:
			fmt.Fprintf(w, "Error from server: %v\n", err)
		}
		return
	}
	fmt.Fprintln(w, "error:", err)
}

// validateOutput checks -o.
func (o *options) validateOutput() error { return validateOutput(o.output) }

// versionLine is what version and --version print.
var versionLine = displayName + " version " + version.Version

func versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), versionLine)
			return err
		},
	}
}

// dynamicClient returns a client of the current context.
func (o *options) dynamicClient() (dynamic.Interface, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(cfg)
}

// namespace is -n, or the current context's namespace.
func (o *options) namespace() (string, error) {
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// explicitNamespace reports whether -n was given.
func (o *options) explicitNamespace() bool {
	return o.config.Namespace != nil && *o.config.Namespace != ""
}

// gvr is the group-version-resource of implicit.dev/v1alpha1's resource.
func gvr(resource string) schema.GroupVersionResource {
	return v1alpha1.SchemeGroupVersion.WithResource(resource)
}

// viewResource resolves KIND (rolebinding, RoleBindings,
// rolebindings.implicit.dev, netpol, ...) to a view resource of implicit.dev.
func (o *options) viewResource(kind string) (string, error) {
	mapper, err := o.config.ToRESTMapper()
	if err != nil {
		return "", err
	}
	name := strings.ToLower(kind)
	if i := strings.Index(name, "."); i > 0 {
		name = name[:i] // a group suffix: the view is named by the resource
	}
	r, err := mapper.ResourceFor(schema.GroupVersionResource{Group: v1alpha1.GroupName, Resource: name})
	if err == nil {
		return r.Resource, nil
	}
	if !meta.IsNoMatchError(err) {
		return "", err // discovery failed: asking again would wait again
	}
	// Short names (netpol, a CRD's) are the source kinds': resolve them
	// there; then the abbreviations users type that Kubernetes does not
	// publish (rb, np).
	for _, alias := range []string{name, abbreviations[name]} {
		if alias == "" {
			continue
		}
		src, serr := mapper.ResourceFor(schema.GroupVersionResource{Resource: alias})
		if serr != nil {
			continue
		}
		if r, verr := mapper.ResourceFor(schema.GroupVersionResource{Group: v1alpha1.GroupName, Resource: src.Resource}); verr == nil {
			return r.Resource, nil
		}
	}
	return "", fmt.Errorf("implicit.dev serves no view of %q: %w", kind, err)
}

// abbreviations are the short names users type for the default views'
// source kinds that Kubernetes publishes none for (netpol it publishes).
// Discovery wins: a short name the host serves is never looked up here.
var abbreviations = map[string]string{
	"rb": "rolebindings",
	"np": "networkpolicies",
}

// fromUnstructured converts a server answer into its typed object.
func fromUnstructured(content map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(content, into)
}
