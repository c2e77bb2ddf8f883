package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
)

// FleetSourceStatus is what fleet status KIND NAME prints with -o: which
// version of one hub source each member serves, and its candidates' share.
type FleetSourceStatus struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Resource is the source's resource, group-qualified; Source is
	// namespace/name on the hub.
	Resource string `json:"resource"`
	Source   string `json:"source"`
	// ResourceVersion is the hub's current one ("" when the hub has no
	// such source: deleted, or a staged creation); Written its last write.
	ResourceVersion string                 `json:"resourceVersion,omitempty"`
	Written         *metav1.Time           `json:"written,omitempty"`
	Members         []FleetSourceMember    `json:"members"`
	Candidates      []FleetCandidateMember `json:"candidates"`
}

// FleetSourceMember is the source in one member.
type FleetSourceMember struct {
	Member string `json:"member"`
	// Status is the member's (fleet status).
	Status string `json:"status"`
	// Serves is the resourceVersion the member serves ("": none).
	Serves string `json:"serves,omitempty"`
	// Current: Serves is the hub's ResourceVersion.
	Current    bool  `json:"current"`
	Namespaces int32 `json:"namespaces"`
}

// FleetCandidateMember is a candidate of the source in one member, by the
// member's report.
type FleetCandidateMember struct {
	Member string `json:"member"`
	fleetv1alpha1.CandidateReport
	// Current: the member serves the candidate's resourceVersion on the hub.
	Current bool `json:"current"`
}

func (o *options) fleetSourceStatus(cmd *cobra.Command, kind, name string, silentAfter time.Duration) error {
	r, err := o.rollout(kind, name)
	if err != nil {
		return err
	}
	r.namespace = o.hubNamespace()
	st, err := readFleetSourceStatus(cmd.Context(), r, time.Now(), silentAfter)
	if err != nil {
		return err
	}
	if !isTable(o.output) {
		return printObject(cmd.OutOrStdout(), o.output, st)
	}
	return printFleetSourceStatus(cmd.OutOrStdout(), st, time.Now())
}

// readFleetSourceStatus reads the hub source r names, its candidates and
// the members' reports.
func readFleetSourceStatus(ctx context.Context, r *rollout, now time.Time, silentAfter time.Duration) (*FleetSourceStatus, error) {
	members, err := listMembers(ctx, r.dyn)
	if err != nil {
		return nil, noFleet(err)
	}
	resource := r.source.GroupResource().String()
	st := &FleetSourceStatus{
		APIVersion: "implicit.dev/v1alpha1", Kind: "FleetSourceStatus", Resource: resource, Source: r.namespace + "/" + r.name,
		Members: []FleetSourceMember{}, Candidates: []FleetCandidateMember{},
	}
	hub := hubIndex{}
	stable, err := r.sources().Get(ctx, r.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, err
	default:
		hub[resource+"/"+r.name] = hubObjectOf(stable)
		st.ResourceVersion = stable.GetResourceVersion()
		st.Written = &metav1.Time{Time: lastWrite(stable)}
	}
	// The candidates' current versions, for their CURRENT column.
	list, err := r.sources().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		hub[resource+"/"+list.Items[i].GetName()] = hubObjectOf(&list.Items[i])
	}
	rows := fleetMembers(members, hub, now, silentAfter)
	for i, m := range members {
		sm := FleetSourceMember{Member: m.Name, Status: rows[i].Status}
		for _, s := range m.Status.Sources {
			if s.Resource == resource && s.Name == r.name {
				sm.Serves, sm.Namespaces = s.ResourceVersion, s.Namespaces
				sm.Current = s.ResourceVersion == st.ResourceVersion
			}
		}
		st.Members = append(st.Members, sm)
		for _, c := range m.Status.Candidates {
			if c.Resource == resource && c.For == r.name {
				rv, _ := hub.SourceResourceVersion(resource, c.Name)
				st.Candidates = append(st.Candidates, FleetCandidateMember{Member: m.Name, CandidateReport: c, Current: rv == c.ResourceVersion})
			}
		}
	}
	return st, nil
}

func printFleetSourceStatus(w io.Writer, st *FleetSourceStatus, now time.Time) error {
	if st.ResourceVersion == "" {
		fmt.Fprintf(w, "%s %s: the hub has no such source (deleted, or a staged creation).\n", st.Resource, st.Source)
	} else {
		fmt.Fprintf(w, "%s %s: the hub's resourceVersion %s, written %s ago.\n", st.Resource, st.Source, st.ResourceVersion, age(st.Written, now))
	}
	if len(st.Members) == 0 {
		_, err := fmt.Fprintln(w, "No member cluster is registered on this hub.")
		return err
	}
	t := newTable(w, "MEMBER", "SERVES", "CURRENT", "NAMESPACES", "STATUS")
	for _, m := range st.Members {
		t.row(m.Member, m.Serves, yesNo(m.Current), fmt.Sprint(m.Namespaces), m.Status)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(st.Candidates) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	t = newTable(w, "MEMBER", "CANDIDATE", "SERVES", "CURRENT", "IN-CLUSTER", "CANARY", "STABLE", "AUDIT-DIFFERENCES")
	for _, c := range st.Candidates {
		t.row(c.Member, c.Name, c.ResourceVersion, yesNo(c.Current), yesNo(c.InCluster),
			fmt.Sprint(c.CanaryNamespaces), fmt.Sprint(c.StableNamespaces), fmt.Sprint(c.AuditDifferences))
	}
	return t.flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
