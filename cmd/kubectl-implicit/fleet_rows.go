package main

import (
	"context"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/fleethub"
)

// A member's status in fleet status, most pressing first.
const (
	// memberUnreported: registered, never reported.
	memberUnreported = "Unreported"
	// memberSilent: its last report is older than --silent-after.
	memberSilent = "Silent"
	// memberStale: it reports that it can't read the hub (fail-static).
	memberStale = "Stale"
	// memberBehind: it serves sources at versions the hub no longer has.
	memberBehind  = "Behind"
	memberCurrent = "Current"
)

// FleetStatus is what fleet status prints with -o: one entry per
// registered member cluster.
type FleetStatus struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Namespace is the hub's global namespace the sources were read in.
	Namespace string `json:"namespace"`
	// SilentAfter is --silent-after.
	SilentAfter string        `json:"silentAfter"`
	Members     []FleetMember `json:"members"`
}

// FleetMember is one member cluster as the hub knows it.
type FleetMember struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	// Revision is the hub revision the member serves (its report's).
	Revision string `json:"revision,omitempty"`
	// Behind counts the sources the member serves at a version the hub no
	// longer has (another resourceVersion, or deleted); BehindSince is the
	// oldest of the hub's writes it lacks (the differing objects' last
	// managedFields time), when the hub still has one.
	Behind      int          `json:"behind"`
	BehindSince *metav1.Time `json:"behindSince,omitempty"`
	// BehindSources name them, resource/name.
	BehindSources []string     `json:"behindSources,omitempty"`
	StaleSince    *metav1.Time `json:"staleSince,omitempty"`
	LastReport    *metav1.Time `json:"lastReport,omitempty"`
	Namespaces    int32        `json:"namespaces"`
	// Status is Current, Behind, Stale, Silent or Unreported.
	Status string `json:"status"`
}

// hubObject is a hub source as fleet status compares it.
type hubObject struct {
	resourceVersion string
	// written is the object's last write (its managedFields' latest time).
	written time.Time
}

// hubIndex holds the hub's global sources by "resource.group/name".
type hubIndex map[string]hubObject

// SourceResourceVersion implements fleethub.HubSources.
func (h hubIndex) SourceResourceVersion(resource, name string) (string, bool) {
	o, ok := h[resource+"/"+name]
	return o.resourceVersion, ok
}

// resolver maps a report's "resource.group" to the resource to list.
type resolver func(schema.GroupResource) (schema.GroupVersionResource, error)

// listMembers lists the MemberClusters, sorted by name.
func listMembers(ctx context.Context, dyn dynamic.Interface) ([]fleetv1alpha1.MemberCluster, error) {
	list, err := dyn.Resource(fleetv1alpha1.GroupVersionResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]fleetv1alpha1.MemberCluster, 0, len(list.Items))
	for _, it := range list.Items {
		var mc fleetv1alpha1.MemberCluster
		if err := fromUnstructured(it.Object, &mc); err != nil {
			return nil, err
		}
		out = append(out, mc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// readHub lists, in the hub's namespace, every resource the members report.
func readHub(ctx context.Context, dyn dynamic.Interface, resolve resolver, namespace string, members []fleetv1alpha1.MemberCluster) (hubIndex, error) {
	resources := map[string]bool{}
	for _, m := range members {
		for _, s := range m.Status.Sources {
			resources[s.Resource] = true
		}
	}
	hub := hubIndex{}
	for r := range resources {
		gvr, err := resolve(schema.ParseGroupResource(r))
		if meta.IsNoMatchError(err) {
			continue // the hub no longer serves the kind: every member's is behind
		}
		if err != nil {
			return nil, err
		}
		list, err := dyn.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				continue // the hub no longer serves the kind: every member's is behind
			}
			return nil, err
		}
		for i := range list.Items {
			hub[r+"/"+list.Items[i].GetName()] = hubObjectOf(&list.Items[i])
		}
	}
	return hub, nil
}

func hubObjectOf(u *unstructured.Unstructured) hubObject {
	return hubObject{resourceVersion: u.GetResourceVersion(), written: lastWrite(u)}
}

// lastWrite is an object's last write as its managedFields say (their
// latest time), else its creation.
func lastWrite(obj metav1.Object) time.Time {
	t := obj.GetCreationTimestamp().Time
	for _, f := range obj.GetManagedFields() {
		if f.Time != nil && f.Time.After(t) {
			t = f.Time.Time
		}
	}
	return t
}

// fleetMembers computes each member's row at now.
func fleetMembers(members []fleetv1alpha1.MemberCluster, hub hubIndex, now time.Time, silentAfter time.Duration) []FleetMember {
	out := make([]FleetMember, 0, len(members))
	for _, m := range members {
		st := m.Status
		fm := FleetMember{Name: m.Name, Labels: m.Labels, Revision: st.ServedRevision, StaleSince: st.StaleSince, LastReport: st.ReportTime, Namespaces: st.Namespaces}
		for _, s := range fleethub.Behind(st, hub) {
			fm.Behind++
			fm.BehindSources = append(fm.BehindSources, s.Resource+"/"+s.Name)
			if o, ok := hub[s.Resource+"/"+s.Name]; ok && !o.written.IsZero() && (fm.BehindSince == nil || o.written.Before(fm.BehindSince.Time)) {
				fm.BehindSince = &metav1.Time{Time: o.written}
			}
		}
		switch {
		case st.ReportTime == nil:
			fm.Status = memberUnreported
		case now.Sub(st.ReportTime.Time) > silentAfter:
			fm.Status = memberSilent
		case st.StaleSince != nil:
			fm.Status = memberStale
		case fm.Behind > 0:
			fm.Status = memberBehind
		default:
			fm.Status = memberCurrent
		}
		out = append(out, fm)
	}
	return out
}

// labelsCell prints a member's labels as k=v, sorted, without the
// kubernetes.io ones.
func labelsCell(labels map[string]string) string {
	var kv []string
	for k, v := range labels {
		if strings.Contains(k, "kubernetes.io/") {
			continue
		}
		kv = append(kv, k+"="+v)
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}

// mapperResolver resolves a report's resource with the hub's discovery.
func mapperResolver(mapper meta.RESTMapper) resolver {
	return func(gr schema.GroupResource) (schema.GroupVersionResource, error) {
		return mapper.ResourceFor(gr.WithVersion(""))
	}
}
