package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

func (o *options) diffCommand() *cobra.Command {
	var del bool
	files := genericclioptions.FileNameFlags{
		Usage:     "Files, directories or URLs of the source objects to preview; - for standard input.",
		Filenames: &[]string{}, Kustomize: ptr.To(""), Recursive: ptr.To(false),
	}
	cmd := &cobra.Command{
		Use:   "diff -f FILENAME | -k DIRECTORY",
		Short: "Preview what applying the files' sources (or deleting them) would change in every view",
		Long: `Preview the edit of each source object read as kubectl apply reads them (files,
directories with -R, kustomizations with -k, - for standard input) with a
Preview (previews.implicit.dev): each namespace whose view item would be
Added, Modified or Deleted, and each one a lock, a shadow or an exclusion keeps
unchanged, then a field diff of each changed item (identical ones once, with
their namespaces). A candidate's edit is previewed on the item it stages: its
canary namespaces. Nothing is changed. Needs the permission the edit itself
needs (create, update or delete of the source).

Exit status, as kubectl diff's: 0 when no view would change, 1 when some
would, greater than 1 on error.`,
		Example: `  kubectl implicit diff -f org-viewers.yaml
  kubectl get rolebinding org-viewers.next -n implicit-global -o yaml | kubectl implicit diff -f -
  kubectl implicit diff -k overlays/prod
  kubectl implicit diff -f org-viewers.yaml --delete`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validateOutput(); err != nil {
				return err
			}
			fo := files.ToOptions()
			if len(fo.Filenames) == 0 && fo.Kustomize == "" {
				return errors.New("-f FILENAME or -k DIRECTORY is required")
			}
			if err := fo.RequireFilenameOrKustomize(); err != nil {
				return err
			}
			defaultNS, err := o.namespace()
			if err != nil {
				return err
			}
			infos, err := resource.NewBuilder(o.config).
				Unstructured().
				ContinueOnError().
				NamespaceParam(defaultNS).DefaultNamespace().
				FilenameParam(o.explicitNamespace(), &fo).
				Flatten().
				Do().Infos()
			if err != nil {
				return err
			}
			if len(infos) == 0 {
				return errors.New("no objects passed to diff")
			}
			dyn, err := o.dynamicClient()
			if err != nil {
				return err
			}
			var previews []*v1alpha1.Preview
			changed := false
			for _, info := range infos {
				obj, ok := info.Object.(*unstructured.Unstructured)
				if !ok {
					return fmt.Errorf("%s %s: not an object", info.Mapping.GroupVersionKind.Kind, info.Name)
				}
				resource, err := o.viewResource(info.Mapping.Resource.Resource)
				if err != nil {
					return err
				}
				ns := info.Namespace
				if ns == "" {
					ns = defaultNS
				}
				req := &v1alpha1.Preview{
					TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Preview"},
					Spec:     v1alpha1.PreviewSpec{Resource: resource},
				}
				if del {
					req.Spec.Delete = info.Name
				} else {
					raw, err := json.Marshal(obj.Object)
					if err != nil {
						return err
					}
					req.Spec.Object = &runtime.RawExtension{Raw: raw}
				}
				content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(req)
				if err != nil {
					return err
				}
				u, err := dyn.Resource(gvr(v1alpha1.ResourcePreviews)).Namespace(ns).Create(cmd.Context(), &unstructured.Unstructured{Object: content}, metav1.CreateOptions{})
				if err != nil {
					return fmt.Errorf("%s %s/%s: %w", resource, ns, info.Name, err)
				}
				p := &v1alpha1.Preview{}
				if err := fromUnstructured(u.Object, p); err != nil {
					return err
				}
				previews = append(previews, p)
				changed = changed || len(p.Status.Changed) > 0
			}
			if err := o.printPreviews(cmd.OutOrStdout(), previews); err != nil {
				return err
			}
			if changed {
				return errChanged
			}
			return nil
		},
	}
	files.AddFlags(cmd.Flags())
	cmd.Flags().BoolVar(&del, "delete", false, "Preview deleting the objects instead of applying them.")
	return cmd
}

func (o *options) printPreviews(w io.Writer, previews []*v1alpha1.Preview) error {
	switch {
	case o.output == "json" && len(previews) > 1:
		items := make([]any, 0, len(previews))
		for _, p := range previews {
			content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
			if err != nil {
				return err
			}
			items = append(items, content)
		}
		return printObject(w, o.output, map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	case !isTable(o.output):
		for i, p := range previews {
			if p.Name == "" {
				p.Name = p.Status.Name // -o name: preview.implicit.dev/NAME
			}
			if i > 0 && o.output == "yaml" {
				fmt.Fprintln(w, "---")
			}
			if err := printObject(w, o.output, p); err != nil {
				return err
			}
		}
		return nil
	}
	for i, p := range previews {
		if i > 0 {
			fmt.Fprintln(w)
		}
		st := p.Status
		// status.reached counts the source's own namespace; a reach, as
		// the guards' warnings and reach count it, is who inherits.
		fmt.Fprintf(w, "%s %s/%s (%s): reaches %d namespace(s) besides its own, changes %d, kept unchanged %d.\n",
			p.Spec.Resource, p.Namespace, st.Name, st.Operation, max(st.Reached-1, 0), len(st.Changed), len(st.Unchanged))
		if len(st.Changed)+len(st.Unchanged) == 0 {
			continue
		}
		wide := o.output == "wide"
		headers := []string{"NAMESPACE", "CHANGE", "BEFORE", "AFTER", "WHY"}
		if wide {
			headers = append(headers, "CONFLICT BEFORE", "CONFLICT AFTER")
		}
		t := newTable(w, headers...)
		for _, c := range st.Changed {
			row := []string{c.Namespace, c.Type, summaryCell(c.Before), summaryCell(c.After), "-"}
			if wide {
				row = append(row, conflictCell(c.Before), conflictCell(c.After))
			}
			t.row(row...)
		}
		for _, u := range st.Unchanged {
			row := []string{u.Namespace, "Unchanged", "-", "-", u.Reason + " by " + u.By}
			if wide {
				row = append(row, "-", "-")
			}
			t.row(row...)
		}
		if err := t.flush(); err != nil {
			return err
		}
		if err := printFieldDiffs(w, p); err != nil {
			return err
		}
	}
	return nil
}

// printFieldDiffs prints a unified diff of each changed view item's
// content (YAML) before and after, as kubectl diff prints one per object;
// namespaces whose item changes the same way share one diff.
func printFieldDiffs(w io.Writer, p *v1alpha1.Preview) error {
	type diff struct {
		name, text string
		namespaces []string
	}
	var order []string
	byText := map[string]*diff{}
	for _, c := range p.Status.Changed {
		before, err := contentYAML(c.Before)
		if err != nil {
			return err
		}
		after, err := contentYAML(c.After)
		if err != nil {
			return err
		}
		name := p.Status.Name
		for _, s := range []*v1alpha1.ItemSummary{c.After, c.Before} {
			if s != nil {
				name = s.Source.Name // a candidate's: the item it stages
			}
		}
		item := p.Spec.Resource + "." + v1alpha1.GroupName + "/" + name
		text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(before), B: difflib.SplitLines(after),
			FromFile: item + " (before)", ToFile: item + " (after)", Context: 3,
		})
		if err != nil {
			return err
		}
		if text == "" {
			continue // only what the table says changed (the source or scope)
		}
		key := item + "\x00" + text
		d, ok := byText[key]
		if !ok {
			d = &diff{name: item, text: text}
			byText[key] = d
			order = append(order, key)
		}
		d.namespaces = append(d.namespaces, c.Namespace)
	}
	for _, key := range order {
		d := byText[key]
		sort.Strings(d.namespaces)
		fmt.Fprintf(w, "\ndiff -u %s in %s\n", d.name, strings.Join(d.namespaces, ", "))
		if _, err := io.WriteString(w, d.text); err != nil {
			return err
		}
	}
	return nil
}

// contentYAML is the view item's content as YAML, or "" when not in the view.
func contentYAML(s *v1alpha1.ItemSummary) (string, error) {
	if s == nil || s.Content == nil || len(s.Content.Raw) == 0 {
		return "", nil
	}
	b, err := yaml.JSONToYAML(s.Content.Raw)
	return string(b), err
}

// summaryCell names a view item's source: namespace/name (scope), and its overlays.
func summaryCell(s *v1alpha1.ItemSummary) string {
	if s == nil {
		return "-"
	}
	out := fmt.Sprintf("%s/%s (%s)", s.Source.Namespace, s.Source.Name, s.Source.Scope)
	if len(s.Overlays) > 0 {
		out += fmt.Sprintf(" +%d overlay(s)", len(s.Overlays))
	}
	return out
}

// conflictCell is what a lock blocked in the view item (-o wide).
func conflictCell(s *v1alpha1.ItemSummary) string {
	if s == nil || s.Conflict == "" {
		return "-"
	}
	return s.Conflict
}
