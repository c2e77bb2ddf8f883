package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// Reach is what reach prints with -o: the namespaces whose view shows the
// source, and how (as the item's source, or merged on top of it).
type Reach struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Resource   string        `json:"resource"`
	Source     string        `json:"source"`
	Count      int           `json:"count"`
	Namespaces []ReachedView `json:"namespaces"`
}

// ReachedView is one namespace that sees the source.
type ReachedView struct {
	Namespace string `json:"namespace"`
	// As is "source" (the item's winning source) or "overlay".
	As    string `json:"as"`
	Scope string `json:"scope"`
}

func (o *options) reachCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "reach KIND NAME -n SOURCE_NAMESPACE",
		Short: "List the namespaces whose view shows the source SOURCE_NAMESPACE/NAME",
		Long: `List the namespaces whose view of KIND shows the source object NAME of
SOURCE_NAMESPACE, as the item's source or merged onto it as an overlay, with
their count. It lists the view in every namespace (-A): an org admin's question.`,
		Example: `  kubectl implicit reach rolebinding org-viewers -n implicit-global`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validateOutput(); err != nil {
				return err
			}
			resource, err := o.viewResource(args[0])
			if err != nil {
				return err
			}
			source, err := o.namespace()
			if err != nil {
				return err
			}
			dyn, err := o.dynamicClient()
			if err != nil {
				return err
			}
			name := args[1]
			list, err := dyn.Resource(gvr(resource)).List(cmd.Context(), metav1.ListOptions{
				FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
			})
			if err != nil {
				return err
			}
			out := Reach{APIVersion: "implicit.dev/v1alpha1", Kind: "Reach", Resource: resource, Source: source + "/" + name, Namespaces: []ReachedView{}}
			for _, it := range list.Items {
				scope := it.GetLabels()[merge.LabelScope]
				if it.GetLabels()[merge.LabelSourceNamespace] == source {
					out.Namespaces = append(out.Namespaces, ReachedView{Namespace: it.GetNamespace(), As: "source", Scope: scope})
					continue
				}
				for _, ov := range strings.Split(it.GetAnnotations()[merge.AnnotationOverlays], ",") {
					if ov == source+"/"+name {
						out.Namespaces = append(out.Namespaces, ReachedView{Namespace: it.GetNamespace(), As: "overlay", Scope: scope})
						break
					}
				}
			}
			sort.Slice(out.Namespaces, func(i, j int) bool { return out.Namespaces[i].Namespace < out.Namespaces[j].Namespace })
			out.Count = len(out.Namespaces)
			w := cmd.OutOrStdout()
			switch o.output {
			case "", "wide":
			case "name":
				// The names to act on are the namespaces': namespace/NAME.
				for _, r := range out.Namespaces {
					fmt.Fprintln(w, "namespace/"+r.Namespace)
				}
				return nil
			default:
				return printObject(w, o.output, out)
			}
			fmt.Fprintf(w, "%s/%s of %s reaches %d namespace(s).\n", resource, name, source, out.Count)
			if out.Count == 0 {
				return nil
			}
			t := newTable(w, "NAMESPACE", "AS", "SCOPE")
			for _, r := range out.Namespaces {
				t.row(r.Namespace, r.As, r.Scope)
			}
			return t.flush()
		},
	}
}
