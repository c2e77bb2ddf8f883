package main

import (
	"context"
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
	"k8s.io/client-go/dynamic"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

func (o *options) diffCommand() *cobra.Command {
	var del bool
	var mode applyMode
	var off offlineDiff
	files := genericclioptions.FileNameFlags{
		Usage:     "Files, directories or URLs of the source objects to preview; - for standard input.",
		Filenames: &[]string{}, Kustomize: ptr.To(""), Recursive: ptr.To(false),
	}
	cmd := &cobra.Command{
		Use:   "diff -f FILENAME | -k DIRECTORY | --from DIR_OR_GIT_REF --to DIR_OR_GIT_REF",
		Short: "Preview what applying the files' sources (or deleting them) would change in every view; --from/--to offline",
		Long: `Two forms. With -f or -k, diff asks the live cluster; with --from and --to,
it needs no cluster: it compares two sets of manifest files (for a pull
request: the base and the head), each a directory or a Git ref, with the
server's own merge and guard rules (see "Offline" below).

Preview what kubectl apply -f (or, with --server-side, kubectl apply
--server-side; with --delete, kubectl delete -f) would change in every view.
diff asks the live cluster, as kubectl diff does: it reads the files as
kubectl apply reads them (directories with -R, kustomizations with -k, - for
standard input), sends each apply as a server-side dry run (so it is the
object the apply would store: the fields the file leaves out and those other
managers set are kept, defaults and admission's changes are in), then asks a
Preview (previews.implicit.dev) what that object changes: each namespace whose
view item would be Added, Modified or Deleted, and each one a lock, a shadow or
an exclusion keeps unchanged, then a field diff of each changed item (identical
ones once, with their namespaces). A candidate in the files is previewed as a
candidate: on the item it stages, in its canary namespaces. A Namespace whose
parent, tenancy, stage or exclusion would change is listed with the change,
then each view item it and its subtree would gain, lose or see change (with
-o json or yaml, a Preview of the Namespace per view); with --delete, a
Namespace is listed with the namespaces below it, which lose what it and its
ancestors pass down. Nothing is changed.

An apply the server would refuse (an immutable field, a guard of
implicit.dev, a forbidden write) is an error, as it is for kubectl diff.
Exit status, as kubectl diff's: 0 when no view would change, 1 when some
would, greater than 1 on error.

Offline (--from A --to B): A and B are each a directory of plain YAML or JSON
manifests (kustomize build or helm template output; kustomizations and charts
are never built, nothing is executed, no network), or a Git ref (REF or
REF:PATH, of the repository holding the other side's directory, else the
current directory's; REF alone reads the other side's directory's path): its
tree is read with git ls-tree and cat-file, with no checkout. A ref missing from a shallow clone is an error saying so. The
writes that turn A into B are judged in order by the server's admission
guards (namespaces, parents first; sources; deletions), each as --as would
send it (default: a member of system:masters, so only the guards' own rules
refuse: a shadow or exclusion of a locked item, a cycle, a missing parent);
then every namespace's views of A and B are compared: items added, removed
and changed (field paths; values only with --show-data), and hierarchy
problems. -o markdown prints a pull-request comment, -o json the report.
Exit status: 0 when nothing changes, 1 when views change or an edit is
refused, greater than 1 on error.`,
		Example: `  kubectl implicit diff -f org-viewers.yaml
  kubectl implicit diff -f org-viewers.yaml --server-side
  kubectl get rolebinding org-viewers.next -n implicit-global -o yaml | kubectl implicit diff -f -
  kubectl implicit diff -k overlays/prod
  kubectl implicit diff -f org-viewers.yaml --delete
  kubectl implicit diff --from origin/main --to ./policies -o markdown
  kubectl implicit diff --from ./before --to ./after`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if off.from != "" || off.to != "" {
				if len(*files.Filenames) > 0 || *files.Kustomize != "" || del || mode.serverSide {
					return errors.New("--from/--to compare files offline: -f, -k, --delete and --server-side are for the live cluster")
				}
				return o.runOfflineDiff(cmd, off)
			}
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
			if mode.forceConflicts && !mode.serverSide {
				return errors.New("--force-conflicts only works with --server-side")
			}
			if mode.fieldManager == "" {
				mode.fieldManager = clientSideFieldManager
				if mode.serverSide {
					mode.fieldManager = serverSideFieldManager
				}
			}
			dyn, err := o.dynamicClient()
			if err != nil {
				return err
			}
			f := cmdutil.NewFactory(o.config)
			var previews []*v1alpha1.Preview
			overCopies := map[*v1alpha1.Preview]string{}
			var namespaces []namespaceChange
			changed := false
			for _, info := range infos {
				var edit *appliedEdit
				if del {
					edit, err = dryRunDelete(info)
				} else {
					edit, err = dryRunApply(f, info, mode, cmd.ErrOrStderr())
				}
				if err != nil {
					return err // as the apply (or delete) would fail
				}
				if isNamespace(info) && edit.merged == nil {
					// Deleting a namespace takes its views along and, from
					// its subtree's, what it and its ancestors pass down,
					// whatever its labels (the server's dry run warns).
					namespaces = append(namespaces, namespaceDeletion(cmd.Context(), dyn, edit.info.Name))
					changed = true
					continue
				}
				if isNamespace(info) {
					c, ok := tenancyChange(edit)
					if !ok {
						continue
					}
					namespaces = append(namespaces, c)
					changed = true
					if edit.merged == nil {
						continue // a namespace deleted takes its views along
					}
					ps, err := o.previewNamespace(cmd.Context(), dyn, edit)
					if err != nil {
						return err
					}
					previews = append(previews, ps...)
					continue
				}
				p, err := o.preview(cmd.Context(), dyn, edit)
				if err != nil {
					return err
				}
				if p == nil {
					continue // no view's source
				}
				previews = append(previews, p)
				if c := copyOf(edit.live); c != "" && p.Status.Operation == v1alpha1.OperationCreate {
					overCopies[p] = c
				}
				changed = changed || len(p.Status.Changed) > 0
			}
			printNamespaceChanges(cmd.OutOrStdout(), o.output, namespaces)
			if err := o.printPreviews(cmd.OutOrStdout(), previews, overCopies); err != nil {
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
	cmd.Flags().BoolVar(&mode.serverSide, "server-side", false, "Preview kubectl apply --server-side: a server-side apply under --field-manager.")
	cmd.Flags().StringVar(&mode.fieldManager, "field-manager", "", `The field manager of the apply, as kubectl apply's (default "kubectl-client-side-apply", with --server-side "kubectl").`)
	cmd.Flags().BoolVar(&mode.forceConflicts, "force-conflicts", false, "With --server-side, take the fields other managers own, as kubectl apply --server-side --force-conflicts would.")
	off.addFlags(cmd)
	return cmd
}

// preview asks the server what edit would change in the views of its
// kind (nil: the kind is no view's source).
func (o *options) preview(ctx context.Context, dyn dynamic.Interface, edit *appliedEdit) (*v1alpha1.Preview, error) {
	info := edit.info
	resource, err := o.viewResource(info.Mapping.Resource.Resource)
	if err != nil {
		return nil, nil //nolint:nilerr // not a source kind: applying it changes no view
	}
	req := &v1alpha1.Preview{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Preview"},
		Spec:     v1alpha1.PreviewSpec{Resource: resource},
	}
	if edit.merged == nil {
		req.Spec.Delete = info.Name
	} else {
		raw, err := json.Marshal(edit.merged.Object)
		if err != nil {
			return nil, err
		}
		req.Spec.Object = &runtime.RawExtension{Raw: raw}
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(req)
	if err != nil {
		return nil, err
	}
	u, err := dyn.Resource(gvr(v1alpha1.ResourcePreviews)).Namespace(info.Namespace).Create(ctx, &unstructured.Unstructured{Object: content}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	p := &v1alpha1.Preview{}
	if err := fromUnstructured(u.Object, p); err != nil {
		return nil, err
	}
	return p, nil
}

// copyOf names the source of live when live is a materialized copy
// (label implicit.dev/materialized), and is empty otherwise.
func copyOf(live *unstructured.Unstructured) string {
	if live == nil || !v1alpha1.IsMaterialized(live.GetLabels()) {
		return ""
	}
	return live.GetLabels()[v1alpha1.LabelSourceNamespace] + "/" + live.GetName()
}

// printPreviews prints each preview as a table and the items' field diffs.
// overCopies names, for a preview that creates a source where a materialized
// copy stands, the copy's source: kubectl apply patches that copy (kubectl
// diff shows it changing) while the views gain a source.
func (o *options) printPreviews(w io.Writer, previews []*v1alpha1.Preview, overCopies map[*v1alpha1.Preview]string) error {
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
	shown := 0
	for _, p := range previews {
		if isNamespacePreview(p) && len(p.Status.Changed) == 0 && p.Status.Hidden == 0 {
			continue // the namespace's line says what changes
		}
		if shown > 0 {
			fmt.Fprintln(w)
		}
		shown++
		st := p.Status
		if isNamespacePreview(p) {
			if err := printNamespacePreview(w, p); err != nil {
				return err
			}
			continue
		}
		// status.reached is the reach the fan-out warning, reach and
		// rollout status count (watchmux.Reach).
		operation := st.Operation
		if c := overCopies[p]; c != "" {
			operation += ", over its materialized copy of " + c
		}
		fmt.Fprintf(w, "%s %s/%s (%s): reaches %d namespace(s) besides its own, changes %d, kept unchanged %d.\n",
			p.Spec.Resource, p.Namespace, st.Name, operation, st.Reached, len(st.Changed), len(st.Unchanged))
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
		if c.Name != "" {
			name = c.Name // a Namespace's preview: one of its items
		}
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
