package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

func (o *options) diffCommand() *cobra.Command {
	var file string
	var del bool
	cmd := &cobra.Command{
		Use:   "diff -f FILE",
		Short: "Preview what applying FILE's sources (or deleting them) would change in every view",
		Long: `Preview the edit of each source object in FILE (YAML or JSON, several
documents allowed; - reads standard input) with a Preview (previews.implicit.dev):
each namespace whose view item would be Added, Modified or Deleted, and each
one a lock, a shadow or an exclusion keeps unchanged. Nothing is changed.
Needs the permission the edit itself needs (create, update or delete of the source).

Exit status: 0 when no view would change, 1 when some would (as kubectl diff),
2 on error.`,
		Example: `  kubectl implicit diff -f org-viewers.yaml
  kubectl implicit diff -f org-viewers.yaml --delete`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validateOutput(); err != nil {
				return err
			}
			if file == "" {
				return errors.New("-f FILE is required")
			}
			objs, err := readObjects(file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			mapper, err := o.config.ToRESTMapper()
			if err != nil {
				return err
			}
			dyn, err := o.dynamicClient()
			if err != nil {
				return err
			}
			defaultNS, err := o.namespace()
			if err != nil {
				return err
			}
			var previews []*v1alpha1.Preview
			changed := false
			for _, obj := range objs {
				gvk := obj.GroupVersionKind()
				mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if err != nil {
					return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
				}
				resource, err := o.viewResource(mapping.Resource.Resource)
				if err != nil {
					return err
				}
				ns := obj.GetNamespace()
				if ns == "" {
					ns = defaultNS
				}
				req := &v1alpha1.Preview{
					TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Preview"},
					Spec:     v1alpha1.PreviewSpec{Resource: resource},
				}
				if del {
					req.Spec.Delete = obj.GetName()
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
					return fmt.Errorf("%s %s/%s: %w", resource, ns, obj.GetName(), err)
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
	cmd.Flags().StringVarP(&file, "filename", "f", "", "The file of source objects to preview; - for standard input.")
	cmd.Flags().BoolVar(&del, "delete", false, "Preview deleting the file's objects instead of applying them.")
	return cmd
}

// readObjects reads every object of a YAML or JSON file.
func readObjects(file string, stdin io.Reader) ([]*unstructured.Unstructured, error) {
	in := stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		in = f
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(in), 4096)
	var out []*unstructured.Unstructured
	for {
		var content map[string]any
		if err := dec.Decode(&content); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(content) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: content}
		if u.IsList() {
			l, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", file, err)
			}
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
			continue
		}
		if u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("%s: every object needs apiVersion, kind and metadata.name", file)
		}
		out = append(out, u)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no objects", file)
	}
	return out, nil
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
		fmt.Fprintf(w, "%s %s/%s (%s): reaches %d namespace(s), changes %d, kept unchanged %d.\n",
			p.Spec.Resource, p.Namespace, st.Name, st.Operation, st.Reached, len(st.Changed), len(st.Unchanged))
		if len(st.Changed)+len(st.Unchanged) == 0 {
			continue
		}
		t := newTable(w, "NAMESPACE", "CHANGE", "BEFORE", "AFTER", "WHY")
		for _, c := range st.Changed {
			t.row(c.Namespace, c.Type, summaryCell(c.Before), summaryCell(c.After), "-")
		}
		for _, u := range st.Unchanged {
			t.row(u.Namespace, "Unchanged", "-", "-", u.Reason+" by "+u.By)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
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
