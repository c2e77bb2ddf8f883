package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// errDenied tells run that can-i answered no: exit 1, as kubectl auth can-i.
var errDenied = errors.New("denied")

// inheritedReason prefixes the authorization webhook's reasons.
const inheritedReason = "implicit.dev: "

func (o *options) canICommand() *cobra.Command {
	var list bool
	cmd := &cobra.Command{
		Use:   "can-i VERB RESOURCE [NAME] [--subresource SUB] -n NAMESPACE | can-i --list -n NAMESPACE",
		Short: "Check what you may do in a namespace, through local RBAC and inherited RoleBindings",
		Long: `Check whether you may do something in a namespace, and why, as kubectl auth can-i
does, with the rules inherited RoleBindings grant counted and named.

With VERB RESOURCE [NAME], a SelfSubjectAccessReview answers yes or no with
the reason: local RBAC (the binding kube-apiserver names) or the inherited
RoleBinding, its namespace and scope, that allows it. It exits 1 on no.

With --list, one table holds kube-apiserver's own rules (a
SelfSubjectRulesReview: SOURCE rbac) and the rules inherited RoleBindings
grant (a RulesReview, rulesreviews.implicit.dev: SOURCE inherited from SCOPE
NAMESPACE/BINDING). --as and --as-group ask for another user, which needs
impersonate.`,
		Example: `  kubectl implicit can-i --list -n team-a
  kubectl implicit can-i create rolebindings -n team-a
  kubectl implicit can-i get secrets db-password -n team-a --as dana --as-group platform:admins`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validateOutput(); err != nil {
				return err
			}
			if list {
				if len(args) > 0 {
					return fmt.Errorf("--list takes no arguments, got %q", args)
				}
				return o.canIList(cmd)
			}
			if len(args) < 2 || len(args) > 3 {
				return usageErrorf("want VERB RESOURCE [NAME], or --list; got %d argument(s)", len(args))
			}
			return o.canI(cmd, args)
		},
	}
	cmd.Flags().BoolVar(&list, "list", false, "List every rule you hold in the namespace, local and inherited, with where it comes from")
	cmd.Flags().BoolVarP(&o.quiet, "quiet", "q", false, "If true, suppress output and just return the exit code, as kubectl auth can-i -q.")
	cmd.Flags().StringVar(&o.subresource, "subresource", "", "SubResource such as pod/log or deployment/scale, as kubectl auth can-i --subresource.")
	return cmd
}

// canI answers one request with a SelfSubjectAccessReview: kube-apiserver's
// whole authorizer chain, the authorization webhook included, so an
// inherited grant answers with the webhook's reason naming its binding.
func (o *options) canI(cmd *cobra.Command, args []string) error {
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	gr, err := o.resourceFor(args[1])
	if err != nil {
		return err
	}
	attrs := &authorizationv1.ResourceAttributes{Namespace: ns, Verb: args[0], Group: gr.Group, Resource: gr.Resource}
	if r, sub, ok := strings.Cut(gr.Resource, "/"); ok {
		attrs.Resource, attrs.Subresource = r, sub
	}
	if len(args) == 3 {
		attrs.Name = args[2]
	}
	if o.subresource != "" {
		attrs.Subresource = o.subresource
	}
	client, err := o.kubeClient()
	if err != nil {
		return err
	}
	review, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(cmd.Context(),
		&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attrs}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	switch {
	case o.quiet:
	case !isTable(o.output):
		review.APIVersion, review.Kind = authorizationv1.SchemeGroupVersion.String(), "SelfSubjectAccessReview"
		if err := printObject(cmd.OutOrStdout(), o.output, review); err != nil {
			return err
		}
	default:
		printAccess(cmd.OutOrStdout(), review.Status)
	}
	if !review.Status.Allowed {
		return errDenied
	}
	return nil
}

// printAccess prints yes or no, then why: the inherited binding, or local RBAC.
func printAccess(w io.Writer, st authorizationv1.SubjectAccessReviewStatus) {
	if !st.Allowed {
		fmt.Fprintln(w, "no")
		if st.Reason != "" {
			fmt.Fprintln(w, st.Reason)
		}
		return
	}
	fmt.Fprintln(w, "yes")
	switch reason := st.Reason; {
	case strings.HasPrefix(reason, inheritedReason):
		fmt.Fprintln(w, "inherited: "+strings.TrimPrefix(reason, inheritedReason))
	case reason != "":
		// kube-apiserver's RBAC authorizer says "RBAC: allowed by ...".
		fmt.Fprintln(w, "local RBAC: "+strings.TrimPrefix(reason, "RBAC: "))
	default:
		fmt.Fprintln(w, "local RBAC")
	}
}

// canIList prints kube-apiserver's own rules beside the inherited ones.
func (o *options) canIList(cmd *cobra.Command) error {
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	client, err := o.kubeClient()
	if err != nil {
		return err
	}
	own, err := client.AuthorizationV1().SelfSubjectRulesReviews().Create(cmd.Context(),
		&authorizationv1.SelfSubjectRulesReview{Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	dyn, err := o.dynamicClient()
	if err != nil {
		return err
	}
	req := &v1alpha1.RulesReview{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "RulesReview"}}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(req)
	if err != nil {
		return err
	}
	u, err := dyn.Resource(gvr(v1alpha1.ResourceRulesReviews)).Namespace(ns).Create(cmd.Context(), &unstructured.Unstructured{Object: content}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	inherited := &v1alpha1.RulesReview{}
	if err := fromUnstructured(u.Object, inherited); err != nil {
		return err
	}
	if !isTable(o.output) {
		// Both answers, as a List (-o name prints a line for each), each
		// named after the namespace it answers for, as an explanation is
		// after its item.
		own.APIVersion, own.Kind = authorizationv1.SchemeGroupVersion.String(), "SelfSubjectRulesReview"
		ownContent, err := runtime.DefaultUnstructuredConverter.ToUnstructured(own)
		if err != nil {
			return err
		}
		answers := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List", "metadata": map[string]any{}}}
		for _, content := range []map[string]any{ownContent, u.Object} {
			item := unstructured.Unstructured{Object: content}
			if item.GetName() == "" {
				item.SetName(ns)
			}
			answers.Items = append(answers.Items, item)
		}
		return printObject(cmd.OutOrStdout(), o.output, answers)
	}
	return printRules(cmd.OutOrStdout(), own.Status, inherited.Status)
}

// printRules prints one table, as kubectl auth can-i --list does with a
// SOURCE column: a row per resource (resource.group/subresource) and its
// resource names, or per non-resource URL rule, and source, with the verbs
// of every rule of that source merged.
func printRules(w io.Writer, own authorizationv1.SubjectRulesReviewStatus, inherited v1alpha1.RulesReviewStatus) error {
	type key struct{ resource, urls, names, source string }
	verbs := map[key][]string{}
	add := func(k key, vs []string) {
		for _, v := range vs {
			if !slices.Contains(verbs[k], v) {
				verbs[k] = append(verbs[k], v)
			}
		}
	}
	addRule := func(groups, resources, names, vs []string, source string) {
		for _, g := range groups {
			for _, r := range resources {
				add(key{resource: combineResourceGroup(r, g), urls: "[]", names: list(names), source: source}, vs)
			}
		}
	}
	for _, r := range own.ResourceRules {
		addRule(r.APIGroups, r.Resources, r.ResourceNames, r.Verbs, "rbac")
	}
	for _, r := range own.NonResourceRules {
		add(key{resource: "", urls: list(r.NonResourceURLs), names: "[]", source: "rbac"}, r.Verbs)
	}
	for _, r := range inherited.Rules {
		source := fmt.Sprintf("inherited from %s %s/%s", r.Binding.Scope, r.Binding.Namespace, r.Binding.Name)
		addRule(r.APIGroups, r.Resources, r.ResourceNames, r.Verbs, source)
	}
	keys := make([]key, 0, len(verbs))
	for k := range verbs {
		keys = append(keys, k)
	}
	// Resource rules first, by resource, then the non-resource URLs.
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if (a.resource == "") != (b.resource == "") {
			return b.resource == ""
		}
		return fmt.Sprint(a.resource, "\x00", a.urls, "\x00", a.names, "\x00", a.source) <
			fmt.Sprint(b.resource, "\x00", b.urls, "\x00", b.names, "\x00", b.source)
	})
	t := newTable(w, "RESOURCES", "NON-RESOURCE URLS", "RESOURCE NAMES", "VERBS", "SOURCE")
	for _, k := range keys {
		vs := verbs[k]
		sort.Strings(vs)
		t.row(k.resource, k.urls, k.names, list(vs), k.source)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if own.Incomplete && own.EvaluationError != "" && !strings.Contains(own.EvaluationError, "webhook") {
		fmt.Fprintln(w, "kube-apiserver's own list may be incomplete: "+own.EvaluationError)
	}
	return nil
}

// combineResourceGroup names a resource of group as kubectl auth can-i
// --list does: resource.group/subresource.
func combineResourceGroup(resource, group string) string {
	r, sub, ok := strings.Cut(resource, "/")
	if group != "" {
		r += "." + group
	}
	if ok {
		r += "/" + sub
	}
	return r
}

// list prints strings as kubectl auth can-i --list does: [a b].
func list(s []string) string { return "[" + strings.Join(s, " ") + "]" }

// resourceFor resolves RESOURCE (pods, deploy, deployments.apps,
// pods/log) as kubectl auth can-i does; an unknown one is asked as typed.
func (o *options) resourceFor(arg string) (schema.GroupResource, error) {
	resource, sub, _ := strings.Cut(arg, "/")
	gr := schema.ParseGroupResource(resource)
	mapper, err := o.config.ToRESTMapper()
	if err != nil {
		return schema.GroupResource{}, err
	}
	if r, err := mapper.ResourceFor(gr.WithVersion("")); err == nil {
		gr = r.GroupResource()
	}
	if sub != "" {
		gr.Resource += "/" + sub
	}
	return gr, nil
}

// kubeClient returns a typed client of the current context.
func (o *options) kubeClient() (kubernetes.Interface, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
