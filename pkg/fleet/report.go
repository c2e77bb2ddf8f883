package fleet

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// InCluster says whether a hub candidate, by its annotations, is a
// candidate in this member (implicit.dev/canary-clusters over the member's
// registered labels). Nil: as the mirror marked it
// (merge.Candidate.OutOfCluster, from the registration the mux is fed).
type InCluster func(annotations map[string]string) bool

// rbacGroup is the group of the RoleBindings the authorization webhook
// audits candidates of.
const rbacGroup = "rbac.authorization.k8s.io"

// contents are what a report is made of, but for its time.
type contents struct {
	// groups maps a served resource to its API group.
	groups    map[string]string
	inCluster InCluster
	// audit counts a RoleBinding candidate's differences (nil: none).
	audit func(namespace, name string) int64
}

// status builds the member's report at now from the mirror's reach of the
// hub's items (those with a Cluster: read from the hub) and the hub's
// staleness.
func (c contents) status(now time.Time, reach watchmux.GlobalReach, staleSince time.Time, stale bool) fleetv1alpha1.MemberClusterStatus {
	st := fleetv1alpha1.MemberClusterStatus{
		ReportTime: &metav1.Time{Time: now},
		Namespaces: int32(reach.Tenants),
	}
	if stale {
		st.StaleSince = &metav1.Time{Time: staleSince}
	}
	var top uint64
	for _, r := range reach.Items {
		if r.Item.Cluster == "" {
			continue
		}
		var annotations map[string]string
		rv := ""
		if o, ok := r.Item.Object.(metav1.Object); ok {
			annotations, rv = o.GetAnnotations(), o.GetResourceVersion()
		}
		if n, err := strconv.ParseUint(rv, 10, 64); err == nil && n > top {
			top = n
			st.ServedRevision = rv
		}
		resource := r.Resource
		group := c.groups[r.Resource]
		if group != "" {
			resource += "." + group
		}
		if r.Item.Candidate == nil {
			st.Sources = append(st.Sources, fleetv1alpha1.SourceReport{
				Resource: resource, Name: r.Item.Name, ResourceVersion: rv, Namespaces: int32(r.Namespaces),
			})
			continue
		}
		cr := fleetv1alpha1.CandidateReport{
			Resource: resource, Name: r.Item.Name, For: r.Item.Candidate.For, ResourceVersion: rv,
			InCluster:        !r.Item.Candidate.OutOfCluster,
			CanaryNamespaces: int32(r.Namespaces), StableNamespaces: int32(r.Stable),
		}
		if c.inCluster != nil {
			cr.InCluster = c.inCluster(annotations)
		}
		if c.audit != nil && r.Resource == "rolebindings" && group == rbacGroup {
			cr.AuditDifferences = c.audit(r.Item.Namespace, r.Item.Name)
		}
		st.Candidates = append(st.Candidates, cr)
	}
	slices.SortFunc(st.Sources, func(a, b fleetv1alpha1.SourceReport) int {
		return cmp.Or(strings.Compare(a.Resource, b.Resource), strings.Compare(a.Name, b.Name))
	})
	slices.SortFunc(st.Candidates, func(a, b fleetv1alpha1.CandidateReport) int {
		return cmp.Or(strings.Compare(a.Resource, b.Resource), strings.Compare(a.Name, b.Name))
	})
	return st
}

// revisions is a fingerprint of the hub items the member serves: each
// one's resource, name and resourceVersion. A report is due soon after it
// changes.
func revisions(r watchmux.Reader) string {
	var b strings.Builder
	for _, resource := range r.Resources() {
		if !r.Serves(resource) {
			continue
		}
		for _, it := range r.SourcesIn(resource, r.GlobalNamespace(resource)) {
			if it.Cluster == "" {
				continue
			}
			rv := ""
			if o, ok := it.Object.(metav1.Object); ok {
				rv = o.GetResourceVersion()
			}
			b.WriteString(resource + "/" + it.Name + "@" + rv + "\n")
		}
	}
	return b.String()
}
