package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/dynamic"

	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
)

// defaultGlobalNamespace is the server's --global-namespace default: the
// hub's namespace fleet status reads without -n.
const defaultGlobalNamespace = "implicit-global"

func (o *options) fleetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fleet status [KIND NAME] [-n GLOBAL_NAMESPACE]",
		Short: "On a fleet's hub: what each member cluster serves of the hub's global sources, and since when",
		Long: `On a fleet's hub (docs/fleets.md), the members' reports: each member's
implicit-apiserver keeps its MemberCluster's status current
(memberclusters.fleet.implicit.dev, registered by the hub's admin).

  status              one row per member: the hub revision it serves, how many
                      sources it serves at a version the hub no longer has, stale
                      since, its last report, and its status
  status KIND NAME    per member: which version of the hub source NAME it serves,
                      and its candidates' share there`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(o.fleetStatusCommand())
	return cmd
}

func (o *options) fleetStatusCommand() *cobra.Command {
	silentAfter := 2 * time.Minute
	cmd := &cobra.Command{
		Use:   "status [KIND NAME] [-n GLOBAL_NAMESPACE]",
		Short: "Show each member cluster's served revision, lag behind the hub, staleness and last report",
		Long: `Read the MemberClusters on the hub and compare what each member reports it
serves with the hub's global sources now (-n: the hub's global namespace,
default implicit-global).

STATUS is, most pressing first:
  Unreported  registered, never reported
  Silent      its last report is older than --silent-after: its server is down,
              or can't write its report
  Stale       it reports that it can't read the hub: it serves its last known
              sources (fail-static), since STALE-SINCE
  Behind      it serves sources at a version the hub no longer has (LAG: how
              many, and since the hub's oldest write it lacks)
  Current     it serves the hub's current sources

With KIND NAME: per member, the resourceVersion of the hub source NAME it
serves, whether that is the hub's, and how many of its namespaces inherit it;
then the candidates of NAME each member knows: in the cluster or not (their
implicit.dev/canary-clusters), the namespaces that see them and those that
see the stable version, and the audit's differences there (counts only).`,
		Example: `  kubectl implicit fleet status
  kubectl implicit fleet status --silent-after=5m -o yaml
  kubectl implicit fleet status rolebinding org-viewers -n implicit-global`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 && len(args) != 2 {
				return fmt.Errorf("accepts no argument, or KIND NAME; received %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validateOutput(); err != nil {
				return err
			}
			if len(args) == 2 {
				return o.fleetSourceStatus(cmd, args[0], args[1], silentAfter)
			}
			return o.fleetStatus(cmd, silentAfter)
		},
	}
	cmd.Flags().DurationVar(&silentAfter, "silent-after", silentAfter, "A member whose last report is older than this is Silent.")
	return cmd
}

// hubNamespace is -n, else the default global namespace.
func (o *options) hubNamespace() string {
	if o.explicitNamespace() {
		return *o.config.Namespace
	}
	return defaultGlobalNamespace
}

func (o *options) fleetStatus(cmd *cobra.Command, silentAfter time.Duration) error {
	dyn, err := o.dynamicClient()
	if err != nil {
		return err
	}
	mapper, err := o.config.ToRESTMapper()
	if err != nil {
		return err
	}
	st, err := readFleetStatus(cmd.Context(), dyn, mapperResolver(mapper), o.hubNamespace(), time.Now(), silentAfter)
	if err != nil {
		return err
	}
	if !isTable(o.output) {
		return printObject(cmd.OutOrStdout(), o.output, st)
	}
	return printFleetStatus(cmd.OutOrStdout(), st, time.Now())
}

// readFleetStatus reads the members' reports and the hub's sources.
func readFleetStatus(ctx context.Context, dyn dynamic.Interface, resolve resolver, namespace string, now time.Time, silentAfter time.Duration) (*FleetStatus, error) {
	members, err := listMembers(ctx, dyn)
	if err != nil {
		return nil, noFleet(err)
	}
	hub, err := readHub(ctx, dyn, resolve, namespace, members)
	if err != nil {
		return nil, err
	}
	return &FleetStatus{
		APIVersion: "implicit.dev/v1alpha1", Kind: "FleetStatus", Namespace: namespace, SilentAfter: silentAfter.String(),
		Members: fleetMembers(members, hub, now, silentAfter),
	}, nil
}

// noFleet says what a hub without the MemberCluster CRD lacks.
func noFleet(err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("this cluster serves no %s: not a fleet's hub, or its MemberCluster CRD is not installed (artifacts/fleet/hub/crd-memberclusters.yaml): %w",
			fleetv1alpha1.GroupVersionResource.GroupResource(), err)
	}
	return err
}

func printFleetStatus(w io.Writer, st *FleetStatus, now time.Time) error {
	if len(st.Members) == 0 {
		_, err := fmt.Fprintln(w, "No member cluster is registered on this hub.")
		return err
	}
	t := newTable(w, "NAME", "LABELS", "REVISION", "LAG", "STALE-SINCE", "LAST-REPORT", "STATUS")
	for _, m := range st.Members {
		lag := fmt.Sprint(m.Behind)
		if m.BehindSince != nil {
			lag += " (" + age(m.BehindSince, now) + ")"
		}
		t.row(m.Name, labelsCell(m.Labels), m.Revision, lag, age(m.StaleSince, now), age(m.LastReport, now), m.Status)
	}
	return t.flush()
}

// age prints how long ago t was, as kubectl's AGE; "" for none.
func age(t *metav1.Time, now time.Time) string {
	if t == nil {
		return ""
	}
	return duration.HumanDuration(now.Sub(t.Time))
}
