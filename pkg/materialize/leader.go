package materialize

import (
	"context"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// Election is the Lease the replicas campaign for: only its holder writes
// copies.
type Election struct {
	Client kubernetes.Interface
	// Namespace and Name name the Lease (by default the server's own
	// namespace and implicit-apiserver-materializer).
	Namespace, Name string
	// Identity is this replica's, unique among them (default hostname_uuid).
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod default to 15s, 10s, 2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// DefaultLeaseName is the Lease of the materializer's leader election.
const DefaultLeaseName = "implicit-apiserver-materializer"

// RunWithLeaderElection runs the materializer while this replica holds the
// Lease, campaigning again whenever it loses it, until ctx is cancelled. A
// term's work has stopped before the next campaign starts. Without a
// namespace for the Lease it runs unelected: one replica only.
func (m *Materializer) RunWithLeaderElection(ctx context.Context, e Election) {
	if e.Namespace == "" || e.Client == nil {
		klog.InfoS("Materializing without leader election: no namespace for its Lease; run one replica only")
		m.Run(ctx)
		return
	}
	if e.Name == "" {
		e.Name = DefaultLeaseName
	}
	if e.Identity == "" {
		host, _ := os.Hostname()
		e.Identity = fmt.Sprintf("%s_%s", host, uuid.NewUUID())
	}
	if e.LeaseDuration <= 0 {
		e.LeaseDuration = 15 * time.Second
	}
	if e.RenewDeadline <= 0 {
		e.RenewDeadline = 10 * time.Second
	}
	if e.RetryPeriod <= 0 {
		e.RetryPeriod = 2 * time.Second
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name},
		Client:     e.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.Identity},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   e.LeaseDuration,
			RenewDeadline:   e.RenewDeadline,
			RetryPeriod:     e.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            e.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				// Run waits for the previous term's Run to end: terms
				// never overlap in this replica.
				OnStartedLeading: func(ctx context.Context) {
					klog.InfoS("Leading the materializer", "lease", klog.KRef(e.Namespace, e.Name), "identity", e.Identity)
					m.Run(ctx)
				},
				OnStoppedLeading: func() {
					klog.InfoS("Not leading the materializer", "lease", klog.KRef(e.Namespace, e.Name), "identity", e.Identity)
				},
				OnNewLeader: func(id string) {
					if id != e.Identity {
						klog.InfoS("Another replica leads the materializer", "lease", klog.KRef(e.Namespace, e.Name), "leader", id)
					}
				},
			},
		})
		if err != nil {
			klog.ErrorS(err, "Materializer's leader election")
			return
		}
		le.Run(ctx)
	}
	// The last term's Run ends with ctx: wait for it.
	m.runMu.Lock()
	m.runMu.Unlock() //nolint:staticcheck // an empty critical section: waiting for Run
}
