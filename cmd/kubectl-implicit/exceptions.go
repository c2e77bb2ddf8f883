package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

func (o *options) exceptionsCommand() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "exceptions [-A | -n NAMESPACE]",
		Short: "List the exceptions a namespace's lineage declares, with their state and time left",
		Long: `List the exceptions (entries of the namespaces' implicit.dev/exceptions
annotation, served read-only as exceptions.implicit.dev): what each
excepts, why, who requested and approved it, its state (Requested,
Active, Expired) and the time left until its end.

In a namespace the list holds its own exceptions and its ancestors',
which it inherits (NAMESPACE says where each is declared); -A lists every
namespace's. At its end the server marks an exception Expired, and from
that revision on it is in effect nowhere.`,
		Example: `  kubectl implicit exceptions -n team-a
  kubectl implicit exceptions -A -o wide
  kubectl implicit exceptions request ci-bot -n team-a --exclude rolebindings/ci-bot --reason "TICKET-123" --expires 168h
  kubectl implicit exceptions approve ci-bot -n team-a`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validateOutput(); err != nil {
				return err
			}
			return o.exceptions(cmd, all)
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "List the exceptions of every namespace.")
	cmd.AddCommand(o.exceptionRequestCommand(), o.exceptionApproveCommand())
	return cmd
}

// exceptions lists exceptions.implicit.dev in the namespace (or all) and
// prints them.
func (o *options) exceptions(cmd *cobra.Command, all bool) error {
	ns := ""
	if !all {
		var err error
		if ns, err = o.namespace(); err != nil {
			return err
		}
	}
	dyn, err := o.dynamicClient()
	if err != nil {
		return err
	}
	u, err := dyn.Resource(gvr(v1alpha1.ResourceExceptions)).Namespace(ns).List(cmd.Context(), metav1.ListOptions{})
	if err != nil {
		return err
	}
	if !isTable(o.output) {
		return printObject(cmd.OutOrStdout(), o.output, u)
	}
	list := &v1alpha1.ExceptionList{}
	if err := fromUnstructured(u.UnstructuredContent(), list); err != nil {
		return err
	}
	where := "namespace " + ns + " or its ancestors"
	if all {
		where = "any namespace"
	}
	return printExceptions(cmd.OutOrStdout(), list.Items, where, o.output == "wide", time.Now())
}

// printExceptions prints NAMESPACE, NAME, EXCLUDES, STATE, REASON,
// REQUESTER, APPROVER, ENDS (time left at now); wide adds NEEDS-APPROVAL
// and DIGEST.
func printExceptions(w io.Writer, items []v1alpha1.Exception, where string, wide bool, now time.Time) error {
	if len(items) == 0 {
		fmt.Fprintf(w, "No exceptions found in %s.\n", where)
		return nil
	}
	headers := []string{"NAMESPACE", "NAME", "EXCLUDES", "STATE", "REASON", "REQUESTER", "APPROVER", "ENDS"}
	if wide {
		headers = append(headers, "NEEDS-APPROVAL", "DIGEST")
	}
	t := newTable(w, headers...)
	for i := range items {
		e := &items[i]
		approver := "<none>"
		if e.Status.Approval != nil {
			approver = e.Status.Approval.By
		}
		reason := e.Spec.Reason
		if !wide && len(reason) > 40 {
			reason = reason[:39] + "…"
		}
		cells := []string{e.Namespace, e.Name, strings.Join(e.Spec.Exclude, ","), e.Status.State, reason, e.Spec.RequestedBy, approver, e.TimeLeft(now)}
		if wide {
			needs := strings.Join(e.Status.NeedsApproval, ",")
			if needs == "" {
				needs = "<none>"
			}
			cells = append(cells, needs, e.Status.Digest)
		}
		t.row(cells...)
	}
	return t.flush()
}
