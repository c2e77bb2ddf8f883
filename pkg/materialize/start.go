package materialize

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// Server is a server's materializer as the wiring starts it: the server
// learns its own identity (every replica answers the materialized guard,
// whichever writes the copies) and, with materialized kinds, runs the
// Materializer under leader election.
type Server struct {
	// Views are the views the copies are kept equal to.
	Views Views
	// Kinds are every served kind; the materialized ones are written.
	Kinds []kinds.Kind
	// Client asks the host who the server is, and renews the Lease unless
	// LeaseClient is set.
	Client kubernetes.Interface
	// Dynamic writes the copies, with its own rate limit.
	Dynamic dynamic.Interface
	// Protobuf, when set, reads and writes the built-in kinds' copies
	// (Options.Protobuf).
	Protobuf *Protobuf
	// Workers write copies concurrently (Options.Workers).
	Workers int
	// LeaseClient, LeaseNamespace and LeaseName: see Election.
	LeaseClient               kubernetes.Interface
	LeaseNamespace, LeaseName string
	// NewRecorder records the copies' Events, made once there are any.
	NewRecorder func() record.EventRecorder
	// OnIdentity is told the server's own identity (the guards).
	OnIdentity func(user string)
}

// Check says why s can't run: materialized kinds with no client to write
// their copies.
func (s Server) Check() error {
	var sources []schema.GroupVersionResource
	for _, k := range Materialized(s.Kinds) {
		sources = append(sources, k.Source)
	}
	if len(sources) > 0 && s.Dynamic == nil {
		return fmt.Errorf("materialized kinds %v need a host cluster client", sources)
	}
	return nil
}

// Run learns the server's own identity, tells OnIdentity, and with
// materialized kinds runs the Materializer under leader election, until
// ctx is cancelled.
func (s Server) Run(ctx context.Context) {
	id, ok := OwnIdentity(ctx, s.Client)
	if !ok {
		return
	}
	s.OnIdentity(id)
	materialized := Materialized(s.Kinds)
	if len(materialized) == 0 {
		return
	}
	m := New(s.Views, s.Dynamic, materialized, s.NewRecorder(), Options{Workers: s.Workers, Protobuf: s.Protobuf})
	lease := s.LeaseClient
	if lease == nil {
		lease = s.Client
	}
	m.RunWithLeaderElection(ctx, Election{Client: lease, Namespace: s.LeaseNamespace, Name: s.LeaseName})
}

// Materialized are the kinds of ks delivered as real objects.
func Materialized(ks []kinds.Kind) []kinds.Kind {
	var out []kinds.Kind
	for _, k := range ks {
		if k.Materialized() {
			out = append(out, k)
		}
	}
	return out
}

// Resources are the view resources of the kinds delivered as real objects,
// for the guards (admission.Config.Materialized).
func Resources(ks []kinds.Kind) []string {
	var out []string
	for _, k := range Materialized(ks) {
		out = append(out, k.Resource())
	}
	return out
}

// OwnIdentity asks the host who the server is (a SelfSubjectReview, which
// every authenticated user may create), retrying until ctx is cancelled.
func OwnIdentity(ctx context.Context, client kubernetes.Interface) (string, bool) {
	var name string
	err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			klog.ErrorS(err, "Asking the host cluster for the server's own identity (the writer of materialized copies)")
			return false, nil
		}
		name = r.Status.UserInfo.Username
		return name != "", nil
	})
	if err != nil {
		return "", false
	}
	klog.InfoS("The server's own identity: only it writes materialized copies", "user", name)
	return name, true
}
