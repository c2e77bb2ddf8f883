package fleethub

import (
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
)

// DefaultOldAfter is how old a member's report may be before the fan-out
// warning says its count is old.
const DefaultOldAfter = 2 * time.Minute

// Reach is the fleet's share of a change to a hub source: the members'
// namespaces it reaches, how many members that sums, and how many of them
// are known only by an old report (still counted) or not at all.
type Reach struct {
	// Namespaces sums, over the members that reported, the namespaces that
	// inherit the source by their last report; for a member that doesn't
	// report the source (a creation, or a member behind), its namespaces
	// total, except for a deletion (none).
	Namespaces int
	// Members counts the members whose report was summed.
	Members int
	// Old counts those whose report is older than OldAfter.
	Old      int
	OldAfter time.Duration
	// Unreported counts the registered members that never reported.
	Unreported int
}

// Tracker keeps the members' reports and their sums. Its methods are safe
// for concurrent use: the informer's handler writes (OnAdd, OnUpdate,
// OnDelete: the sums are recomputed there, once per report), the fan-out
// guard reads (Reach).
type Tracker struct {
	clock    clock.PassiveClock
	oldAfter time.Duration

	mu      sync.RWMutex
	members map[string]member
	sums    sums
}

// member is one MemberCluster as last read.
type member struct {
	labels map[string]string
	status fleetv1alpha1.MemberClusterStatus
}

// sourceKey names a hub source as the members report it.
type sourceKey struct{ resource, name string }

// sums are the reports' totals, recomputed on every informer event.
type sums struct {
	// namespaces sums the reporting members' Namespaces.
	namespaces int
	// reported sums, per source, the namespaces the members report for it;
	// reporters sums the Namespaces of the members that report it.
	reported, reporters map[sourceKey]int
	// reportTimes are the reporting members' report times, oldest first.
	reportTimes []time.Time
	unreported  int
}

// Config configures a Tracker.
type Config struct {
	// Clock tells a report's age (default: the real clock).
	Clock clock.PassiveClock
	// OldAfter is the age past which a member's count is said to be old
	// (default DefaultOldAfter).
	OldAfter time.Duration
}

// NewTracker returns an empty Tracker.
func NewTracker(c Config) *Tracker {
	t := &Tracker{clock: c.Clock, oldAfter: c.OldAfter, members: map[string]member{}}
	if t.clock == nil {
		t.clock = clock.RealClock{}
	}
	if t.oldAfter <= 0 {
		t.oldAfter = DefaultOldAfter
	}
	t.sums = sumsOf(nil)
	return t
}

// Reach returns the fleet's share of a change to the hub source of resource
// ("resource.group", as fleetv1alpha1.SourceReport.Resource) and name.
// deletion: the source is being deleted.
func (t *Tracker) Reach(resource, name string, deletion bool) Reach {
	t.mu.RLock()
	defer t.mu.RUnlock()
	k := sourceKey{resource, name}
	r := Reach{Members: len(t.sums.reportTimes), Unreported: t.sums.unreported, OldAfter: t.oldAfter}
	r.Namespaces = t.sums.reported[k]
	if !deletion {
		r.Namespaces += t.sums.namespaces - t.sums.reporters[k]
	}
	cut := t.clock.Now().Add(-t.oldAfter)
	r.Old = sort.Search(len(t.sums.reportTimes), func(i int) bool { return !t.sums.reportTimes[i].Before(cut) })
	return r
}

// OnAdd implements cache.ResourceEventHandler.
func (t *Tracker) OnAdd(obj any, _ bool) { t.set(obj) }

// OnUpdate implements cache.ResourceEventHandler.
func (t *Tracker) OnUpdate(_, obj any) { t.set(obj) }

// OnDelete implements cache.ResourceEventHandler.
func (t *Tracker) OnDelete(obj any) {
	if u, ok := unstructuredOf(obj); ok {
		t.mu.Lock()
		delete(t.members, u.GetName())
		t.sums = sumsOf(t.members)
		t.mu.Unlock()
		forgetMember(u.GetName())
	}
}

func (t *Tracker) set(obj any) {
	u, ok := unstructuredOf(obj)
	if !ok {
		return
	}
	var mc fleetv1alpha1.MemberCluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &mc); err != nil {
		return // the CRD's schema keeps this from happening
	}
	t.mu.Lock()
	t.members[mc.Name] = member{labels: mc.Labels, status: mc.Status}
	t.sums = sumsOf(t.members)
	t.mu.Unlock()
}

func unstructuredOf(obj any) (*unstructured.Unstructured, bool) {
	if d, ok := obj.(interface{ GetObject() any }); ok { // DeletedFinalStateUnknown
		obj = d.GetObject()
	}
	u, ok := obj.(*unstructured.Unstructured)
	return u, ok
}

// sumsOf totals members' reports.
func sumsOf(members map[string]member) sums {
	s := sums{reported: map[sourceKey]int{}, reporters: map[sourceKey]int{}}
	for _, m := range members {
		if m.status.ReportTime == nil {
			s.unreported++
			continue
		}
		s.reportTimes = append(s.reportTimes, m.status.ReportTime.Time)
		s.namespaces += int(m.status.Namespaces)
		for _, src := range m.status.Sources {
			k := sourceKey{src.Resource, src.Name}
			s.reported[k] += int(src.Namespaces)
			s.reporters[k] += int(m.status.Namespaces)
		}
	}
	slices.SortFunc(s.reportTimes, func(a, b time.Time) int { return a.Compare(b) })
	return s
}
