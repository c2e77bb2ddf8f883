package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

func (o *options) policiesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "policies -n NAMESPACE",
		Short: "List the admission policies whose parameters a namespace inherits from views",
		Long: `List the ValidatingAdmissionPolicies and MutatingAdmissionPolicies of
kube-apiserver whose paramKind is a view (apiVersion implicit.dev/v1alpha1)
and which apply to the namespace: each binding that selects it, the action
it takes there (its validationActions, Mutate, exempt when no parameter is
inherited and parameterNotFoundAction is Allow, Deny when it is Deny), and
the parameters its paramRef resolves to in the namespace's view, with where
each comes from (scope and namespace of its source, and its overlays).

A PolicyReview (policyreviews.implicit.dev) answers it server-side, so a
tenant who may not read the cluster's policies sees those that apply to the
namespace, as far as it may list their parameter views there.`,
		Example: `  kubectl implicit policies -n team-a
  kubectl implicit policies -n team-a -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validateOutput(); err != nil {
				return err
			}
			return o.policies(cmd)
		},
	}
}

// policies asks a PolicyReview in the namespace and prints it.
func (o *options) policies(cmd *cobra.Command) error {
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	dyn, err := o.dynamicClient()
	if err != nil {
		return err
	}
	req := &v1alpha1.PolicyReview{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "PolicyReview"}}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(req)
	if err != nil {
		return err
	}
	u, err := dyn.Resource(gvr(v1alpha1.ResourcePolicyReviews)).Namespace(ns).Create(cmd.Context(), &unstructured.Unstructured{Object: content}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if !isTable(o.output) {
		// Named after the namespace it answers for, as can-i --list's are.
		if u.GetName() == "" {
			u.SetName(ns)
		}
		return printObject(cmd.OutOrStdout(), o.output, u)
	}
	review := &v1alpha1.PolicyReview{}
	if err := fromUnstructured(u.Object, review); err != nil {
		return err
	}
	return printPolicies(cmd.OutOrStdout(), ns, review.Status)
}

// printPolicies prints a row per binding and parameter: POLICY, KIND
// (Validating or Mutating), BINDING, ACTION, PARAM (view resource/name) and
// SOURCE (where the inherited parameter comes from).
func printPolicies(w io.Writer, ns string, st v1alpha1.PolicyReviewStatus) error {
	if len(st.Policies) == 0 {
		fmt.Fprintf(w, "No admission policy takes its parameters from a view you may list in %s.\n", ns)
		return nil
	}
	t := newTable(w, "POLICY", "KIND", "BINDING", "ACTION", "PARAM", "SOURCE")
	var problems []string
	for _, p := range st.Policies {
		kind := strings.TrimSuffix(p.Kind, "AdmissionPolicy")
		for _, b := range p.Bindings {
			if b.Problem != "" {
				problems = append(problems, fmt.Sprintf("%s %s: %s", p.Name, b.Name, b.Problem))
			}
			action := b.Action
			if action == "" {
				// Its parameter is withheld: the problem says why.
				action = "<unknown>"
			}
			if len(b.Params) == 0 {
				t.row(p.Name, kind, b.Name, action, paramWanted(p.ParamResource, b), "<none>")
				continue
			}
			for _, prm := range b.Params {
				t.row(p.Name, kind, b.Name, action, p.ParamResource+"/"+paramName(prm), paramSource(prm))
			}
		}
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, pr := range problems {
		fmt.Fprintln(w, pr)
	}
	return nil
}

// paramWanted names the parameter a binding looked for and did not find.
func paramWanted(resource string, b v1alpha1.ReviewedBinding) string {
	switch {
	case b.ParamName != "":
		return resource + "/" + b.ParamName
	case b.ParamSelector != "":
		return resource + " (" + b.ParamSelector + ")"
	}
	return resource
}

// paramSource says where an inherited parameter comes from: its source's
// scope and namespace, and the overlays merged onto it.
// paramName is the parameter the namespace is enforced with: in a canary
// of a staged rollout, the candidate whose content its view item holds.
func paramName(p v1alpha1.PolicyParam) string {
	if p.Candidate != "" {
		return p.Candidate
	}
	return p.Name
}

func paramSource(p v1alpha1.PolicyParam) string {
	s := p.Scope + " " + p.Namespace
	if p.Candidate != "" {
		s += " (candidate for " + p.Name + ")"
	}
	if len(p.Overlays) > 0 {
		s += " + overlays " + strings.Join(p.Overlays, ",")
	}
	return s
}
