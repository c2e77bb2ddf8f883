package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

func (o *options) treeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "tree [NAMESPACE]",
		Short: "Print the hierarchy: a namespace's ancestors and subtree, or every namespace, problems marked",
		Long: `Print the hierarchy from hierarchies.implicit.dev.

With NAMESPACE (or -n), its ancestors down to it and the subtree that inherits
from it. Without either, every namespace's tree, when you may list
hierarchies in all namespaces, else the current namespace's. Problems are
marked: a parent cycle, a missing or invalid parent, a parent uid mismatch,
a lineage deeper than --max-depth, a namespace that opted out.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validateOutput(); err != nil {
				return err
			}
			dyn, err := o.dynamicClient()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var ns string
			switch {
			case len(args) == 1:
				ns = args[0]
			case o.explicitNamespace():
				ns = *o.config.Namespace
			default:
				all, err := listHierarchies(ctx, dyn)
				if err == nil {
					return o.printForest(cmd.OutOrStdout(), all)
				}
				if !apierrors.IsForbidden(err) {
					return err
				}
				// Who may not list every namespace's hierarchy gets the
				// current namespace's: the kubeconfig's, else "default".
				named := false
				if ns, named, err = o.config.ToRawKubeConfigLoader().Namespace(); err != nil {
					return err
				}
				err = o.printSubtree(ctx, cmd.OutOrStdout(), dyn, ns)
				if !named && apierrors.IsForbidden(err) {
					return fmt.Errorf("%w\n(no namespace is named, and you may not list every namespace's hierarchy: name yours, kubectl implicit tree NAMESPACE, or set your kubeconfig's namespace)", err)
				}
				return err
			}
			return o.printSubtree(ctx, cmd.OutOrStdout(), dyn, ns)
		},
	}
}

func getHierarchy(ctx context.Context, dyn dynamic.Interface, ns string) (*v1alpha1.Hierarchy, error) {
	u, err := dyn.Resource(gvr(v1alpha1.ResourceHierarchies)).Namespace(ns).Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	h := &v1alpha1.Hierarchy{}
	return h, fromUnstructured(u.Object, h)
}

func listHierarchies(ctx context.Context, dyn dynamic.Interface) (*v1alpha1.HierarchyList, error) {
	u, err := dyn.Resource(gvr(v1alpha1.ResourceHierarchies)).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	l := &v1alpha1.HierarchyList{}
	return l, fromUnstructured(u.UnstructuredContent(), l)
}

// printForest prints every namespace's tree: roots are the namespaces that
// inherit from no parent.
func (o *options) printForest(w io.Writer, all *v1alpha1.HierarchyList) error {
	if !isTable(o.output) {
		return printHierarchies(w, o.output, all)
	}
	byName := map[string]*v1alpha1.Hierarchy{}
	var roots []string
	for i := range all.Items {
		h := &all.Items[i]
		byName[h.Name] = h
		if len(h.Status.Ancestors) == 0 {
			roots = append(roots, h.Name)
		}
	}
	sort.Strings(roots)
	t := o.newTreeTable(w)
	for _, r := range roots {
		printNode(t, byName, r, "", "", map[string]bool{})
	}
	return t.flush()
}

// printSubtree prints ns's ancestors down to it, then the subtree that
// inherits from it, reading each child's Hierarchy; a child the caller may
// not read is printed without its own children.
func (o *options) printSubtree(ctx context.Context, w io.Writer, dyn dynamic.Interface, ns string) error {
	h, err := getHierarchy(ctx, dyn, ns)
	if err != nil {
		return err
	}
	byName := map[string]*v1alpha1.Hierarchy{ns: h}
	// Breadth first: the subtree a tenant may read.
	queue := append([]string(nil), h.Status.Children...)
	for len(queue) > 0 {
		child := queue[0]
		queue = queue[1:]
		if _, seen := byName[child]; seen {
			continue
		}
		ch, err := getHierarchy(ctx, dyn, child)
		switch {
		case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
			continue
		case err != nil:
			return err
		}
		byName[child] = ch
		queue = append(queue, ch.Status.Children...)
	}
	if !isTable(o.output) {
		list := &v1alpha1.HierarchyList{}
		names := make([]string, 0, len(byName))
		for n := range byName {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			list.Items = append(list.Items, *byName[n])
		}
		return printHierarchies(w, o.output, list)
	}
	// The ancestors, farthest first, each one level deeper.
	t := o.newTreeTable(w)
	indent := ""
	for i := len(h.Status.Ancestors) - 1; i >= 0; i-- {
		prefix := ""
		if indent != "" {
			prefix = indent[:len(indent)-4] + "└── "
		}
		t.line(prefix+h.Status.Ancestors[i], nil)
		indent += "    "
	}
	first := ""
	if indent != "" {
		first = indent[:len(indent)-4] + "└── "
	}
	printNode(t, byName, ns, first, indent, map[string]bool{})
	return t.flush()
}

// treeTable prints the tree: a line per namespace, its marks after it; with
// -o wide, a table whose first column is the tree, then each namespace's
// TENANT (or why it is none), PARENT label, ANCESTORS and CHILDREN counts.
type treeTable struct {
	w    io.Writer
	wide *table
}

func (o *options) newTreeTable(w io.Writer) *treeTable {
	t := &treeTable{w: w}
	if o.output == "wide" {
		t.wide = newTable(w, "NAMESPACE", "TENANT", "PARENT", "ANCESTORS", "CHILDREN", "PROBLEMS")
	}
	return t
}

// line prints the namespace drawn as drawn; h is its hierarchy (nil: not
// read, an ancestor or a child the caller may not read).
func (t *treeTable) line(drawn string, h *v1alpha1.Hierarchy) {
	if t.wide == nil {
		fmt.Fprintln(t.w, drawn+marks(h))
		return
	}
	if h == nil {
		t.wide.row(drawn, "?", "?", "?", "?", "?") // not read
		return
	}
	tenant := "yes"
	if !h.Status.Tenant {
		tenant = "no"
		if h.Status.NotTenant != "" {
			tenant = "no (" + h.Status.NotTenant + ")"
		}
	}
	var problems []string
	for _, p := range h.Status.Problems {
		problems = append(problems, p.Reason)
	}
	// An empty cell prints <none>, as kubectl's.
	t.wide.row(drawn, tenant, h.Status.Parent, fmt.Sprint(len(h.Status.Ancestors)), fmt.Sprint(len(h.Status.Children)), strings.Join(problems, ","))
}

func (t *treeTable) flush() error {
	if t.wide != nil {
		return t.wide.flush()
	}
	return nil
}

// printHierarchies prints list as -o format asks, its items with their
// apiVersion and kind (-o name prints hierarchy.implicit.dev/NAMESPACE).
func printHierarchies(w io.Writer, format string, list *v1alpha1.HierarchyList) error {
	list.APIVersion, list.Kind = v1alpha1.SchemeGroupVersion.String(), "HierarchyList"
	for i := range list.Items {
		list.Items[i].APIVersion, list.Items[i].Kind = v1alpha1.SchemeGroupVersion.String(), "Hierarchy"
	}
	return printObject(w, format, list)
}

// printNode prints name (after first) and its children below it (after rest).
func printNode(t *treeTable, byName map[string]*v1alpha1.Hierarchy, name, first, rest string, seen map[string]bool) {
	h, ok := byName[name]
	t.line(first+name, h)
	if !ok || seen[name] {
		return
	}
	seen[name] = true
	kids := h.Status.Children
	for i, c := range kids {
		if i == len(kids)-1 {
			printNode(t, byName, c, rest+"└── ", rest+"    ", seen)
		} else {
			printNode(t, byName, c, rest+"├── ", rest+"│   ", seen)
		}
	}
}

// notTenantMarks say why a namespace is no tenant, by HierarchyStatus.NotTenant.
var notTenantMarks = map[string]string{
	v1alpha1.NotTenantGlobal:   "global: every tenant inherits its sources",
	v1alpha1.NotTenantOptedOut: "opted out: implicit.dev/inherit=false, inherits nothing",
	v1alpha1.NotTenantExcluded: "not a tenant: excluded by the server",
}

// marks are a namespace's annotations in the tree (h nil: not read).
func marks(h *v1alpha1.Hierarchy) string {
	if h == nil {
		return ""
	}
	var m []string
	if !h.Status.Tenant {
		mark, ok := notTenantMarks[h.Status.NotTenant]
		if !ok {
			mark = "not a tenant" // a server that does not say why
		}
		m = append(m, mark)
	}
	for _, p := range h.Status.Problems {
		m = append(m, p.Reason+": "+p.Message)
	}
	if len(m) == 0 {
		return ""
	}
	return "  [" + strings.Join(m, "; ") + "]"
}
