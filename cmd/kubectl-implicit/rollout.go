package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

func (o *options) rolloutCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout status|promote|abort KIND NAME -n NAMESPACE",
		Short: "Follow, promote or abort the staged rollout of the source NAMESPACE/NAME",
		Long: `A candidate (implicit.dev/candidate-for: NAME, implicit.dev/canary-selector)
stages a new version of the source NAME of NAMESPACE: the namespaces whose
implicit.dev/stage the selector matches see it instead of the stable version.

  status    the stable source, its candidate and selector, which namespaces see which version,
            and for a RoleBinding the audit: requests the candidate would answer otherwise
  promote   write the candidate's content into the stable source (or create it), then delete the candidate
  abort     delete the candidate: every namespace is back on the stable version`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(o.rolloutStatusCommand(), o.rolloutPromoteCommand(), o.rolloutAbortCommand())
	return cmd
}

func (o *options) rolloutStatusCommand() *cobra.Command {
	w := rolloutWait{watch: true}
	cmd := &cobra.Command{
		Use:   "status KIND NAME -n NAMESPACE",
		Short: "Show the stable source NAME, its candidate, and which namespaces see which version; wait until the rollout completes",
		Long: `Show the stable source NAME of NAMESPACE and its candidate (the object of
NAMESPACE annotated implicit.dev/candidate-for: NAME) with its canary selector,
then, from the view of KIND in every namespace (-A: an org admin's question;
a parent admin is answered within its namespace's subtree), the namespaces
that see the candidate (view items annotated implicit.dev/candidate) and those
that see the stable version. The source's own namespace is not counted.

As kubectl rollout status, it then waits (unless --watch=false) until the
rollout is complete: the candidate promoted or aborted, so that every
namespace sees one version; --timeout bounds the wait. A candidate whose
selector matches no namespace is audit-only: it is judged on live traffic
outside any canary and never completes by itself (promote or abort it), so
status prints its audit and returns.

For a RoleBinding, an AUDIT section follows (a CandidateAudit,
candidateaudits.implicit.dev): the requests the authorization webhook
answered outside the candidate's canaries that the candidate would answer
otherwise, would be denied or newly allowed, by subject and namespace, with
the latest ones. It is the view of the replica that answered: each replica
records the requests it answers.`,
		Example: `  kubectl implicit rollout status rolebinding org-viewers -n implicit-global
  kubectl implicit rollout status rolebinding org-viewers -n implicit-global --timeout=10m
  kubectl implicit rollout status networkpolicy default-deny -n org -o yaml --watch=false`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validateOutput(); err != nil {
				return err
			}
			r, err := o.rollout(args[0], args[1])
			if err != nil {
				return err
			}
			return o.rolloutStatus(cmd, r, w)
		},
	}
	cmd.Flags().BoolVarP(&w.watch, "watch", "w", true, "Watch the rollout until it completes (the candidate promoted or aborted), as kubectl rollout status does.")
	cmd.Flags().DurationVar(&w.timeout, "timeout", 0, "The length of time to wait before ending watch, zero means never. Any other values should contain a corresponding time unit (e.g. 1s, 2m, 3h).")
	return cmd
}

func (o *options) rolloutPromoteCommand() *cobra.Command {
	var dryRunFlag string
	cmd := &cobra.Command{
		Use:   "promote KIND NAME -n NAMESPACE",
		Short: "Write the candidate's content into the stable source NAME, then delete the candidate",
		Long: `Promote the candidate of NAME: two writes, whatever the number of namespaces.

1. Update the stable source with the candidate's content, the stable source's
   resourceVersion as precondition: every top-level field but apiVersion,
   kind, metadata and status (a RoleBinding's subjects; its roleRef must be
   the stable one's), and the candidate's labels and annotations, added to
   the stable source's, without the candidate annotations. The stable
   source's implicit.dev/locked and implicit.dev/merge stay whatever the
   candidate says. With no stable source (a staged creation), create it.
2. Delete the candidate, its uid and resourceVersion as preconditions: only
   the version promoted.

If the second write fails, the stable source holds the candidate's content
and the command fails, saying what to do: if the candidate still exists,
delete it (or, if it changed since it was read, check it and promote again);
if it was deleted meanwhile (an abort), the version the update replaced is
printed, to write back if the abort should stand.

--dry-run=client prints what would be written (-o json for JSON, YAML by
default) and sends nothing; --dry-run=server sends both writes as dry runs:
the guards judge them and print their warnings, and the object as the server
would store it is printed (without managedFields). Nothing is written.`,
		Example: `  kubectl implicit rollout promote rolebinding org-viewers -n implicit-global --dry-run=server
  kubectl implicit rollout promote rolebinding org-viewers -n implicit-global`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validateOutput(); err != nil {
				return err
			}
			dryRun, err := parseDryRun(dryRunFlag)
			if err != nil {
				return err
			}
			r, err := o.rollout(args[0], args[1])
			if err != nil {
				return err
			}
			return r.promote(cmd.Context(), cmd.OutOrStdout(), dryRun, o.output)
		},
	}
	addDryRunFlag(cmd, &dryRunFlag, "what would be written")
	return cmd
}

func (o *options) rolloutAbortCommand() *cobra.Command {
	var dryRunFlag string
	cmd := &cobra.Command{
		Use:   "abort KIND NAME -n NAMESPACE",
		Short: "Delete the candidate of NAME: every namespace is back on the stable version",
		Long: `Abort the staged rollout of NAME: delete its candidate, its uid as
precondition. Every namespace that saw the candidate is back on the stable
version (for a staged creation, loses the item). --dry-run=client prints what
would be deleted; --dry-run=server sends the delete as a dry run (the guards
judge it and warn). Nothing is deleted.`,
		Example: `  kubectl implicit rollout abort rolebinding org-viewers -n implicit-global`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validateOutput(); err != nil {
				return err
			}
			dryRun, err := parseDryRun(dryRunFlag)
			if err != nil {
				return err
			}
			r, err := o.rollout(args[0], args[1])
			if err != nil {
				return err
			}
			return r.abort(cmd.Context(), cmd.OutOrStdout(), dryRun)
		},
	}
	addDryRunFlag(cmd, &dryRunFlag, "what would be deleted")
	return cmd
}

// rollout resolves KIND and NAME of the command line, with -n, into a rollout.
func (o *options) rollout(kind, name string) (*rollout, error) {
	view, err := o.viewResource(kind)
	if err != nil {
		return nil, err
	}
	mapper, err := o.config.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	source, err := sourceResource(mapper, kind, view)
	if err != nil {
		return nil, err
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	dyn, err := o.dynamicClient()
	if err != nil {
		return nil, err
	}
	return &rollout{dyn: dyn, source: source, view: view, namespace: ns, name: name}, nil
}

// sourceResource resolves the source resource of the view resource view:
// the resource of the same name in a group other than implicit.dev (a view
// is named by its source's resource). A group suffix on KIND
// (guardrails.policy.example.com) picks the group when several serve it.
func sourceResource(mapper meta.RESTMapper, kind, view string) (schema.GroupVersionResource, error) {
	group := ""
	if i := strings.Index(kind, "."); i > 0 {
		group = strings.ToLower(kind[i+1:])
	}
	if group == v1alpha1.GroupName {
		group = ""
	}
	all, err := mapper.ResourcesFor(schema.GroupVersionResource{Group: group, Resource: view})
	if err != nil {
		return schema.GroupVersionResource{}, fmt.Errorf("the source of the view %s.%s: %w", view, v1alpha1.GroupName, err)
	}
	var found []schema.GroupVersionResource
	seen := map[string]bool{}
	for _, r := range all {
		if r.Group == v1alpha1.GroupName || seen[r.Group] {
			continue // the view itself; or a less preferred version
		}
		seen[r.Group] = true
		found = append(found, r)
	}
	switch len(found) {
	case 0:
		return schema.GroupVersionResource{}, fmt.Errorf("the host serves no source resource %q for the view %s.%s", view, view, v1alpha1.GroupName)
	case 1:
		return found[0], nil
	}
	var names []string
	for _, r := range found {
		names = append(names, r.GroupResource().String())
	}
	return schema.GroupVersionResource{}, fmt.Errorf("%q names several source resources (%s): name one with its group", kind, strings.Join(names, ", "))
}

// rollout is the staged rollout of one stable source: name in namespace,
// of the source resource, seen through the view resource view.
type rollout struct {
	dyn       dynamic.Interface
	source    schema.GroupVersionResource
	view      string
	namespace string
	name      string
}

func (r *rollout) sources() dynamic.ResourceInterface {
	return r.dyn.Resource(r.source).Namespace(r.namespace)
}

// ref names an object of the source resource as kubectl prints it.
func (r *rollout) ref(name string) string {
	return r.source.GroupResource().String() + "/" + name
}

// load reads the stable source (nil when it does not exist: a staged
// creation) and its candidates, sorted by name: the objects of the
// namespace annotated implicit.dev/candidate-for: name.
func (r *rollout) load(ctx context.Context) (*unstructured.Unstructured, []unstructured.Unstructured, error) {
	stable, err := r.sources().Get(ctx, r.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		stable = nil
	case err != nil:
		return nil, nil, err
	}
	list, err := r.sources().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, err
	}
	var candidates []unstructured.Unstructured
	for _, it := range list.Items {
		if it.GetName() != r.name && it.GetAnnotations()[v1alpha1.AnnotationCandidateFor] == r.name {
			candidates = append(candidates, it)
		}
	}
	sort.Slice(candidates, func(i, j int) bool { return candidates[i].GetName() < candidates[j].GetName() })
	if stable == nil && len(candidates) == 0 {
		return nil, nil, apierrors.NewNotFound(r.source.GroupResource(), r.name)
	}
	return stable, candidates, nil
}

// candidate returns the one candidate of name, or says why there is none to
// act on.
func (r *rollout) candidate(candidates []unstructured.Unstructured) (*unstructured.Unstructured, error) {
	switch len(candidates) {
	case 0:
		return nil, fmt.Errorf("%s in namespace %q has no candidate (no object annotated %s: %s)", r.ref(r.name), r.namespace, v1alpha1.AnnotationCandidateFor, r.name)
	case 1:
		return &candidates[0], nil
	}
	return nil, fmt.Errorf("%s in namespace %q has %d candidates (%s), and none applies: delete all but one (kubectl delete %s NAME -n %s)",
		r.ref(r.name), r.namespace, len(candidates), strings.Join(names(candidates), ", "), r.source.GroupResource(), r.namespace)
}

func names(objs []unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return out
}

// abort deletes the candidate, its uid as precondition.
func (r *rollout) abort(ctx context.Context, w io.Writer, dryRun dryRun) error {
	stable, candidates, err := r.load(ctx)
	if err != nil {
		return err
	}
	cand, err := r.candidate(candidates)
	if err != nil {
		return err
	}
	if dryRun == dryRunClient {
		fmt.Fprintf(w, "%s (uid %s) would be deleted in %s (dry run)\n", r.ref(cand.GetName()), cand.GetUID(), r.namespace)
		return nil
	}
	if err := r.deleteCandidate(ctx, cand, false, dryRun); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s deleted in %s%s\n", r.ref(cand.GetName()), r.namespace, dryRun.suffix())
	if dryRun == dryRunServer {
		return nil
	}
	if stable == nil {
		fmt.Fprintf(w, "The staged creation of %s is withdrawn.\n", r.name)
	} else {
		fmt.Fprintf(w, "Every namespace is back on the stable %s.\n", r.name)
	}
	return nil
}

// deleteCandidate deletes cand, its uid as precondition; unchanged, its
// resourceVersion too: a promotion deletes only the version it promoted.
func (r *rollout) deleteCandidate(ctx context.Context, cand *unstructured.Unstructured, unchanged bool, dryRun dryRun) error {
	p := &metav1.Preconditions{UID: ptr.To(cand.GetUID())}
	if unchanged {
		p.ResourceVersion = ptr.To(cand.GetResourceVersion())
	}
	return r.sources().Delete(ctx, cand.GetName(), metav1.DeleteOptions{Preconditions: p, DryRun: dryRun.serverDryRun()})
}

// candidatesOf lists the candidate names a view item shows
// (implicit.dev/candidate: the base's candidate, then any overlay's).
func candidatesOf(item *unstructured.Unstructured) []string {
	v := item.GetAnnotations()[v1alpha1.AnnotationCandidate]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// viewsOf lists the view items named name the requester may read (viewItemsReadable).
func (r *rollout) viewsOf(ctx context.Context) ([]unstructured.Unstructured, error) {
	views, err := viewItemsReadable(ctx, r.dyn, r.view, r.namespace, r.name)
	if err != nil {
		return nil, err
	}
	return views.items, nil
}
