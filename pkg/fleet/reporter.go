package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

const (
	// DefaultReportInterval is --fleet-report-interval's default.
	DefaultReportInterval = 30 * time.Second
	// MinReportGap is the least time between two reports a change of the
	// hub's sources brings forward.
	MinReportGap = 2 * time.Second
	// changeSettle is how long after a change of the mirror its hub
	// revisions are looked at: changes in a burst are read once.
	changeSettle = 250 * time.Millisecond
)

// Mirror is what the reporter reads of the member's views (a
// *watchmux.Mux).
type Mirror interface {
	GlobalReach() (watchmux.GlobalReach, error)
	Read(func(watchmux.Reader)) (string, error)
	NextChange() <-chan struct{}
}

// ReporterOptions configure a Reporter.
type ReporterOptions struct {
	// Name is the member's, its MemberCluster's name on the hub.
	Name string
	// Client writes the report on the hub (--fleet-report-kubeconfig).
	Client dynamic.Interface
	// Mirror is the member's views.
	Mirror Mirror
	// Stale says since when the hub's sources are stale (HubHealth.Stale).
	Stale func() (time.Time, bool)
	// Groups maps each served resource to its API group.
	Groups map[string]string
	// InCluster says whether a hub candidate is one in this member; nil:
	// as the mirror marked it (merge.Candidate.OutOfCluster).
	InCluster InCluster
	// AuditDifferences counts a RoleBinding candidate's differences in this
	// member (authz.Authorizer.AuditDifferences); nil: zero.
	AuditDifferences func(namespace, name string) int64
	// Interval is how often the report is written (default
	// DefaultReportInterval).
	Interval time.Duration
	// Clock is injected for tests (default the real clock).
	Clock clock.WithTicker
}

// Reporter keeps the member's report in its MemberCluster's status on the
// hub.
type Reporter struct {
	o        ReporterOptions
	contents contents

	// Run's goroutine only:
	lastWrite     time.Time
	lastRevisions string
	lastErrLog    time.Time
}

// NewReporter returns a reporter of o.
func NewReporter(o ReporterOptions) *Reporter {
	if o.Interval <= 0 {
		o.Interval = DefaultReportInterval
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Stale == nil {
		o.Stale = func() (time.Time, bool) { return time.Time{}, false }
	}
	return &Reporter{o: o, contents: contents{groups: o.Groups, inCluster: o.InCluster, audit: o.AuditDifferences}}
}

// Run reports at once, then every Interval and soon after a change of the
// hub's sources in the mirror (at most once per MinReportGap), until ctx
// ends. No report is written at the end: the last one's time tells the
// hub since when the member is silent.
func (r *Reporter) Run(ctx context.Context) {
	tick := r.o.Clock.NewTicker(r.o.Interval)
	defer tick.Stop()
	r.report(ctx)
	next := r.o.Mirror.NextChange()
	var settle clock.Timer
	var settled <-chan time.Time
	defer func() {
		if settle != nil {
			settle.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
			r.report(ctx)
		case <-next:
			// Wait for the burst to settle, and for MinReportGap since
			// the last write; the mirror's next changes are read then.
			next = nil
			wait := max(changeSettle, MinReportGap-r.o.Clock.Since(r.lastWrite))
			settle = r.o.Clock.NewTimer(wait)
			settled = settle.C()
		case <-settled:
			settle, settled = nil, nil
			next = r.o.Mirror.NextChange()
			if r.revisions() != r.lastRevisions {
				r.report(ctx)
			}
		}
	}
}

// revisions is the mirror's fingerprint of the hub's items ("" before it
// has synced).
func (r *Reporter) revisions() string {
	var out string
	if _, err := r.o.Mirror.Read(func(rd watchmux.Reader) { out = revisions(rd) }); err != nil {
		return ""
	}
	return out
}

// report writes one report; a failure is counted and logged, at most once
// per Interval, and the next report tries again.
func (r *Reporter) report(ctx context.Context) {
	now := r.o.Clock.Now()
	revs := r.revisions()
	reach, err := r.o.Mirror.GlobalReach()
	if err != nil && !watchmux.IsNotSynced(err) {
		r.failed(now, "error", fmt.Errorf("counting the views: %w", err))
		return
	}
	// Before the mirror has synced the report says so: no revision, no
	// counts.
	since, stale := r.o.Stale()
	st := r.contents.status(now, reach, since, stale)
	body, err := patchBody(st)
	if err != nil {
		r.failed(now, "error", err)
		return
	}
	r.lastWrite = now // a failed write counts: MinReportGap paces the attempts
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = r.o.Client.Resource(fleetv1alpha1.GroupVersionResource).Patch(ctx, r.o.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	switch {
	case err == nil:
		r.lastRevisions = revs
		lastReport.Set(float64(now.Unix()))
		klog.V(4).InfoS("Reported to the hub", "member", r.o.Name, "servedRevision", st.ServedRevision, "namespaces", st.Namespaces)
	case apierrors.IsNotFound(err):
		r.failed(now, "not_registered", fmt.Errorf("member cluster %q is not registered on the hub: the hub's admin must create MemberCluster %s (%s, cluster-scoped; artifacts/fleet/hub/membercluster-example.yaml) and bind this member's hub identity to its ClusterRole (artifacts/fleet/hub/rbac-member.yaml); retrying every %s: %w",
			r.o.Name, r.o.Name, fleetv1alpha1.GroupVersionResource.GroupResource(), r.o.Interval, err))
	case apierrors.IsForbidden(err):
		r.failed(now, "forbidden", fmt.Errorf("the member's hub identity may not write MemberCluster %s's status: bind it to the member's ClusterRole (artifacts/fleet/hub/rbac-member.yaml); retrying every %s: %w", r.o.Name, r.o.Interval, err))
	default:
		r.failed(now, "error", fmt.Errorf("writing MemberCluster %s's status on the hub: %w", r.o.Name, err))
	}
}

// failed counts a failed report and logs it, at most once per Interval.
func (r *Reporter) failed(now time.Time, reason string, err error) {
	reportFailures.WithLabelValues(reason).Inc()
	if !r.lastErrLog.IsZero() && now.Sub(r.lastErrLog) < r.o.Interval {
		return
	}
	r.lastErrLog = now
	klog.ErrorS(err, "Fleet report not written", "member", r.o.Name, "reason", reason)
}

// patchBody is the merge patch that sets the status to st: fields st
// leaves out are removed (null), so a stale member's staleSince goes once
// it has recovered.
func patchBody(st fleetv1alpha1.MemberClusterStatus) ([]byte, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for _, k := range []string{"reportTime", "servedRevision", "staleSince", "sources", "candidates"} {
		if _, ok := m[k]; !ok {
			m[k] = nil
		}
	}
	return json.Marshal(map[string]any{"status": m})
}
