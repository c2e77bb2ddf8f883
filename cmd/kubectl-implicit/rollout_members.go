package main

import (
	"context"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// RolloutMember is a hub candidate's share in one member cluster, by the
// member's last report (counts only: the names stay behind the member's
// CandidateAudit permission).
type RolloutMember struct {
	Member string `json:"member"`
	// Candidate is the candidate the member reports ("" when it reports
	// none of this source: not read yet, or not reported).
	Candidate        string `json:"candidate,omitempty"`
	InCluster        bool   `json:"inCluster"`
	CanaryNamespaces int32  `json:"canaryNamespaces"`
	StableNamespaces int32  `json:"stableNamespaces"`
	AuditDifferences int64  `json:"auditDifferences"`
}

// members adds, on a fleet's hub, each member's share of the rollout of a
// global source: when MemberClusters exist (their CRD served, one or more
// registered) and the source is global (a view item says so, or a member
// reports a candidate of it). Anything else leaves st unchanged: a hub's
// report is a complement, never a reason to fail.
func (r *rollout) members(ctx context.Context, st *RolloutStatus, items []unstructured.Unstructured) {
	members, err := listMembers(ctx, r.dyn)
	if err != nil || len(members) == 0 {
		return
	}
	resource := r.source.GroupResource().String()
	global := false
	for i := range items {
		if items[i].GetLabels()[v1alpha1.LabelScope] == "global" && items[i].GetLabels()[v1alpha1.LabelSourceNamespace] == r.namespace {
			global = true
		}
	}
	var out []RolloutMember
	for _, m := range members {
		rm := RolloutMember{Member: m.Name}
		for _, c := range m.Status.Candidates {
			if c.Resource == resource && c.For == r.name {
				rm = RolloutMember{Member: m.Name, Candidate: c.Name, InCluster: c.InCluster,
					CanaryNamespaces: c.CanaryNamespaces, StableNamespaces: c.StableNamespaces, AuditDifferences: c.AuditDifferences}
				global = true
			}
		}
		out = append(out, rm)
	}
	if global {
		st.Members = out
	}
}

func printRolloutMembers(w io.Writer, members []RolloutMember) error {
	if len(members) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nMEMBER CLUSTERS (their last reports):")
	t := newTable(w, "MEMBER", "CANDIDATE", "IN-CLUSTER", "CANARY/STABLE", "AUDIT-DIFFERENCES")
	for _, m := range members {
		if m.Candidate == "" {
			t.row(m.Member, "-", "-", "-", "-")
			continue
		}
		t.row(m.Member, m.Candidate, yesNo(m.InCluster), fmt.Sprintf("%d/%d", m.CanaryNamespaces, m.StableNamespaces), fmt.Sprint(m.AuditDifferences))
	}
	return t.flush()
}
