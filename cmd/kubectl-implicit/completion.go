package main

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// Shell completion, as kubectl completes a plugin: kubectl runs the
// executable kubectl_complete-implicit found on PATH (shipped beside the
// binary, hack/krew/kubectl_complete-implicit), which asks cobra's
// __complete. Subcommands and flags complete by cobra; KIND completes to the
// views served and the names users type for them (short names, rb, np);
// NAME to the items of the namespace's view; NAMESPACE and -n to the
// namespaces; -o to the output forms.

// questions are implicit.dev's resources that are not views.
var questions = []string{v1alpha1.ResourceHierarchies, v1alpha1.ResourceExplanations, v1alpha1.ResourcePreviews, v1alpha1.ResourceRulesReviews}

// addCompletions sets the completion functions of root's commands and flags.
func (o *options) addCompletions(root *cobra.Command) {
	root.CompletionOptions.HiddenDefaultCmd = true
	kindAndName := func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			return matching(o.completeKinds(), toComplete), cobra.ShellCompDirectiveNoFileComp
		case 1:
			return matching(o.completeNames(args[0]), toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	namespaceArg := func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return matching(o.completeNamespaces(), toComplete), cobra.ShellCompDirectiveNoFileComp
	}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		switch c.Name() {
		case "why", "reach", "status", "promote", "abort":
			c.ValidArgsFunction = kindAndName
		case "tree":
			c.ValidArgsFunction = namespaceArg
		case "can-i":
			c.ValidArgsFunction = func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if len(args) == 0 {
					return matching([]string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "bind", "escalate", "impersonate"}, toComplete), cobra.ShellCompDirectiveNoFileComp
				}
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
		case "rollout":
			c.ValidArgs = []string{"status", "promote", "abort"}
		case "fleet":
			c.ValidArgs = []string{"status"}
		case "version":
			c.ValidArgsFunction = cobra.NoFileCompletions
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	_ = root.RegisterFlagCompletionFunc("namespace", func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return matching(o.completeNamespaces(), toComplete), cobra.ShellCompDirectiveNoFileComp
	})
	_ = root.RegisterFlagCompletionFunc("output", func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		forms := []string{"json", "yaml", "kyaml", "name", "wide", "jsonpath=", "jsonpath-as-json=", "jsonpath-file=", "go-template=", "go-template-file=", "custom-columns="}
		return matching(forms, toComplete), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	})
}

// matching returns the candidates that start with prefix, sorted, once each.
func matching(candidates []string, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, c := range candidates {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// completeKinds lists what KIND may be: each view served, by its resource
// and singular names, and its source kind's short names and the
// abbreviations users type for it (rb, np).
func (o *options) completeKinds() []string {
	disc, err := o.config.ToDiscoveryClient()
	if err != nil {
		return nil
	}
	views, err := disc.ServerResourcesForGroupVersion(v1alpha1.SchemeGroupVersion.String())
	if err != nil {
		return nil
	}
	served := map[string]bool{}
	var out []string
	for _, r := range views.APIResources {
		if strings.Contains(r.Name, "/") || slices.Contains(questions, r.Name) {
			continue
		}
		served[r.Name] = true
		out = append(out, r.Name)
		if r.SingularName != "" {
			out = append(out, r.SingularName)
		}
		out = append(out, r.ShortNames...)
	}
	// The sources' short names (netpol, a CRD's): discovery of every group.
	_, lists, _ := disc.ServerGroupsAndResources() // partial answers still help
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil || gv.Group == v1alpha1.GroupName {
			continue
		}
		for _, r := range l.APIResources {
			if served[r.Name] {
				out = append(out, r.ShortNames...)
			}
		}
	}
	for short, resource := range abbreviations {
		if served[resource] {
			out = append(out, short)
		}
	}
	return out
}

// completeNames lists the items of the namespace's view of kind.
func (o *options) completeNames(kind string) []string {
	resource, err := o.viewResource(kind)
	if err != nil {
		return nil
	}
	ns, err := o.namespace()
	if err != nil {
		return nil
	}
	dyn, err := o.dynamicClient()
	if err != nil {
		return nil
	}
	list, err := dyn.Resource(gvr(resource)).Namespace(ns).List(contextForCompletion(), metav1.ListOptions{})
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(list.Items))
	for _, it := range list.Items {
		out = append(out, it.GetName())
	}
	return out
}

// completeNamespaces lists the namespaces: all of them for who may list
// them; else those whose hierarchy the user may read, when it may list
// hierarchies everywhere; else the kubeconfig's namespace.
func (o *options) completeNamespaces() []string {
	dyn, err := o.dynamicClient()
	if err != nil {
		return nil
	}
	ctx := contextForCompletion()
	for _, res := range []schema.GroupVersionResource{{Version: "v1", Resource: "namespaces"}, gvr(v1alpha1.ResourceHierarchies)} {
		list, err := dyn.Resource(res).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		out := make([]string, 0, len(list.Items))
		for _, it := range list.Items {
			out = append(out, it.GetName())
		}
		return out
	}
	if ns, named, err := o.config.ToRawKubeConfigLoader().Namespace(); err == nil && named {
		return []string{ns}
	}
	return nil
}

// contextForCompletion bounds a completion's request: a shell waits for it.
func contextForCompletion() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = cancel // released when it expires; the process ends first
	return ctx
}
