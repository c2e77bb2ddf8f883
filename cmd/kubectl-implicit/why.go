package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

func (o *options) whyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "why KIND NAME [-n NAMESPACE]",
		Short: "Explain why NAME is, or is not, in the namespace's view of KIND",
		Long: `Explain one item of a view with an Explanation (explanations.implicit.dev):
every scope from global down to the namespace, the item each holds, and what
became of it: Won, Shadowed, Overlaid, BlockedByLock, Excluded, and by which
namespace (-o wide: and in words). NAME need not be in the view; a candidate
is explained as the item it stages. Needs get on the view in the namespace.`,
		Example: `  kubectl implicit why rolebinding org-viewers -n team-a
  kubectl implicit why networkpolicies default-deny-ingress -n team-a -o yaml`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validateOutput(); err != nil {
				return err
			}
			resource, err := o.viewResource(args[0])
			if err != nil {
				return err
			}
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			dyn, err := o.dynamicClient()
			if err != nil {
				return err
			}
			req := &v1alpha1.Explanation{
				TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Explanation"},
				Spec:     v1alpha1.ExplanationSpec{Resource: resource, Name: args[1]},
			}
			content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(req)
			if err != nil {
				return err
			}
			u, err := dyn.Resource(gvr(v1alpha1.ResourceExplanations)).Namespace(ns).Create(cmd.Context(), &unstructured.Unstructured{Object: content}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			e := &v1alpha1.Explanation{}
			if err := fromUnstructured(u.Object, e); err != nil {
				return err
			}
			if !isTable(o.output) {
				// An explanation is named after the item it explains
				// (-o name: explanation.implicit.dev/NAME).
				if e.Name == "" {
					e.Name = e.Spec.Name
				}
				e.APIVersion, e.Kind = v1alpha1.SchemeGroupVersion.String(), "Explanation"
				return printObject(cmd.OutOrStdout(), o.output, e)
			}
			return printExplanation(cmd.OutOrStdout(), e, o.output == "wide")
		},
	}
}

// printExplanation prints the summary, then a row per scope; wide adds
// each scope's MESSAGE (what became of its item, in words).
func printExplanation(w io.Writer, e *v1alpha1.Explanation, wide bool) error {
	st := e.Status
	fmt.Fprintln(w, st.Summary+".")
	if st.HierarchyProblem != "" {
		fmt.Fprintln(w, "Hierarchy problem: "+st.HierarchyProblem+".")
	}
	fmt.Fprintln(w)
	headers := []string{"SCOPE", "NAMESPACE", "ITEM", "LOCKED", "OUTCOME", "BY", "EXCLUSIONS"}
	if wide {
		headers = append(headers, "MESSAGE")
	}
	t := newTable(w, headers...)
	var notes []string
	for _, s := range st.Scopes {
		item, locked := "-", "-"
		if s.Item != nil {
			item, locked = s.Item.Name, fmt.Sprint(s.Item.Locked)
		}
		var ex []string
		for _, x := range s.Exclusions {
			ex = append(ex, exclusionCell(x))
			if x.Exception != "" || x.Blocked != "" {
				notes = append(notes, exceptionNote(s.Namespace, x, time.Now()))
			}
		}
		by := s.By
		if by == "" {
			by = "-"
		}
		exclusions := strings.Join(ex, ", ")
		if exclusions == "" {
			exclusions = "-"
		}
		row := []string{s.Scope, s.Namespace, item, locked, s.Outcome, by, exclusions}
		if wide {
			row = append(row, s.Message)
		}
		t.row(row...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	for _, c := range st.Conflicts {
		fmt.Fprintln(w, "Conflict: "+c)
	}
	return nil
}

// exclusionCell is an exclusion and its effect, with the exception that
// declares it, if one does.
func exclusionCell(x v1alpha1.ExclusionEffect) string {
	if x.Exception == "" {
		return x.Exclusion + " " + x.Effect
	}
	return x.Exclusion + " " + x.Effect + " (exception " + x.Exception + ")"
}

// exceptionNote says which exception an exclusion is, its end and, when its
// source's rules blocked it, why.
func exceptionNote(namespace string, x v1alpha1.ExclusionEffect, now time.Time) string {
	what := "Exclusion " + x.Exclusion + " of " + namespace
	if x.Exception != "" {
		what = "Exception " + x.Exception + " of " + namespace + " (" + x.Exclusion + ")"
	}
	switch {
	case x.Ends == nil:
		what += ": no end"
	case x.Ends.After(now):
		what += fmt.Sprintf(": ends %s (in %s)", x.Ends.UTC().Format(time.RFC3339), duration.HumanDuration(x.Ends.Sub(now)))
	default:
		what += fmt.Sprintf(": ended %s, in effect until the server marks it expired", x.Ends.UTC().Format(time.RFC3339))
	}
	if x.Blocked != "" {
		what += "; not applied: " + x.Blocked
	}
	return what + "."
}
