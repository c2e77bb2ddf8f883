package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// Reach is what reach prints with -o: the namespaces that inherit the
// source and see it in their view, and how. The source's own namespace is
// not counted, as the guards' warnings count none: a reach is who inherits.
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
	// As is how the namespace sees the source: "source" (its item's
	// source), "candidate" (its item is the candidate standing in for the
	// source, or, for a candidate, the item it stages) or "overlay" (merged
	// onto another item).
	As string `json:"as"`
	// Candidate names the candidate the namespace sees, when it sees one.
	Candidate string `json:"candidate,omitempty"`
	Scope     string `json:"scope"`
	// Item is the view item's name: the source's, or for a candidate the
	// name it stages.
	Item string `json:"item"`
	// Overlays are the view item's overlays (namespace/name).
	Overlays []string `json:"overlays,omitempty"`
}

func (o *options) reachCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "reach KIND NAME -n SOURCE_NAMESPACE",
		Short: "List the namespaces that inherit the source SOURCE_NAMESPACE/NAME and see it",
		Long: `List the namespaces whose view of KIND shows the source object NAME of
SOURCE_NAMESPACE, as the item's source or merged onto it as an overlay, with
their count. The source's own namespace is not counted (as the guards'
warnings count none): a reach is the namespaces that inherit it. AS says how
each sees it: source; candidate (the namespace's stage is selected, so it
sees the source's candidate instead, or, for a candidate, the item it
stages); overlay. It lists the view in every namespace (-A): an org admin's
question. -o wide adds the view item, its candidate and overlays.`,
		Example: `  kubectl implicit reach rolebinding org-viewers -n implicit-global
  kubectl implicit reach rolebinding org-viewers.next -n implicit-global -o wide`,
		Args: cobra.ExactArgs(2),
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
			stable, candidates, err := o.candidateNames(cmd.Context(), dyn, args[0], resource, source, name)
			if err != nil {
				return err
			}
			item := name
			if stable != "" {
				item = stable // a candidate shows under the name it stages
			}
			views, err := viewItemsReadable(cmd.Context(), dyn, resource, source, item)
			if err != nil {
				return err
			}
			items := views.items
			out := Reach{APIVersion: "implicit.dev/v1alpha1", Kind: "Reach", Resource: resource, Source: source + "/" + name, Namespaces: []ReachedView{}}
			for _, it := range items {
				if it.GetNamespace() == source {
					continue // the source's own namespace: no reach
				}
				if r, ok := reachedBy(it, source, name, stable, candidates); ok {
					out.Namespaces = append(out.Namespaces, r)
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
			views.note(w, source)
			if out.Count == 0 {
				return nil
			}
			headers := []string{"NAMESPACE", "AS", "SCOPE"}
			if o.output == "wide" {
				headers = append(headers, "ITEM", "CANDIDATE", "OVERLAYS")
			}
			t := newTable(w, headers...)
			for _, r := range out.Namespaces {
				row := []string{r.Namespace, r.As, r.Scope}
				if o.output == "wide" {
					row = append(row, r.Item, r.Candidate, strings.Join(r.Overlays, ","))
				}
				t.row(row...)
			}
			return t.flush()
		},
	}
}

// candidateNames reads the source object source/name: stable is the name it
// stages when it is a candidate; candidates are the candidates for name
// among source's objects otherwise. Who may not read the sources gets
// neither: the view items alone answer then. A source that does not exist,
// and has no candidate staging its creation, is NotFound, as kubectl
// answers for it.
func (o *options) candidateNames(ctx context.Context, dyn dynamic.Interface, kind, view, source, name string) (stable string, candidates []string, err error) {
	mapper, err := o.config.ToRESTMapper()
	if err != nil {
		return "", nil, nil
	}
	res, err := sourceResource(mapper, kind, view)
	if err != nil {
		return "", nil, nil
	}
	obj, getErr := dyn.Resource(res).Namespace(source).Get(ctx, name, metav1.GetOptions{})
	if getErr == nil {
		if c, _ := merge.ParseCandidate(name, obj.GetAnnotations()); c != nil {
			return c.For, nil, nil
		}
	} else if !apierrors.IsNotFound(getErr) {
		return "", nil, nil
	}
	list, err := dyn.Resource(res).Namespace(source).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", nil, nil
	}
	for _, it := range list.Items {
		if it.GetName() != name && it.GetAnnotations()[v1alpha1.AnnotationCandidateFor] == name {
			candidates = append(candidates, it.GetName())
		}
	}
	if getErr != nil && len(candidates) == 0 {
		return "", nil, getErr
	}
	return "", candidates, nil
}

// reachedBy says how the view item it shows the source source/name (for a
// candidate, stable is the name it stages; candidates are name's own).
func reachedBy(it unstructured.Unstructured, source, name, stable string, candidates []string) (ReachedView, bool) {
	r := ReachedView{Namespace: it.GetNamespace(), Scope: it.GetLabels()[v1alpha1.LabelScope], Item: it.GetName()}
	ann := it.GetAnnotations()
	if ov := ann[v1alpha1.AnnotationOverlays]; ov != "" {
		r.Overlays = strings.Split(ov, ",")
	}
	var seen []string
	if v := ann[v1alpha1.AnnotationCandidate]; v != "" {
		seen = strings.Split(v, ",")
	}
	fromSource := it.GetLabels()[v1alpha1.LabelSourceNamespace] == source
	overlay := slices.Contains(r.Overlays, source+"/"+it.GetName())
	switch {
	case stable != "":
		// A candidate reaches the namespaces whose item it stands in for.
		if (fromSource || overlay) && slices.Contains(seen, name) {
			r.As, r.Candidate = "candidate", name
			return r, true
		}
		return r, false
	case fromSource || overlay:
		r.As = "source"
		if overlay {
			r.As = "overlay"
		}
		for _, c := range candidates {
			if slices.Contains(seen, c) {
				r.As, r.Candidate = "candidate", c // sees the candidate instead
			}
		}
		return r, true
	}
	return r, false
}
