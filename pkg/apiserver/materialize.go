package apiserver

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/materialize"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// startMaterializer learns the server's own identity for the materialized
// guard (every replica answers the guard, whichever writes the copies) and,
// with materialized kinds, runs the materializer under leader election.
func (c CompletedConfig) startMaterializer(gs *genericapiserver.GenericAPIServer, mux *watchmux.Mux, guards *admission.Guards) error {
	x := c.ExtraConfig
	var materialized []kinds.Kind
	var sources []schema.GroupVersionResource
	for _, k := range x.Kinds {
		if !k.Materialized() {
			continue
		}
		materialized = append(materialized, k)
		sources = append(sources, k.Source)
	}
	if x.Client == nil {
		return nil
	}
	if len(materialized) > 0 && x.Materialize.Dynamic == nil {
		return fmt.Errorf("materialized kinds %v need a host cluster client", sources)
	}
	return gs.AddPostStartHook("implicit-materializer", func(ctx genericapiserver.PostStartHookContext) error {
		go func() {
			id, ok := ownIdentity(ctx, x.Client)
			if !ok {
				return
			}
			guards.SetServerIdentity(id)
			if len(materialized) == 0 {
				return
			}
			var recorder record.EventRecorder = newRecorder(ctx, x.Client)
			m := materialize.New(mux, x.Materialize.Dynamic, materialized, recorder, materialize.Options{})
			lease := x.Materialize.LeaseClient
			if lease == nil {
				lease = x.Client
			}
			m.RunWithLeaderElection(ctx, materialize.Election{
				Client: lease, Namespace: x.Materialize.LeaseNamespace, Name: x.Materialize.LeaseName,
			})
		}()
		return nil
	})
}

// materializedResources are the view resources of the kinds delivered as
// real objects, for the guards (admission.Config.Materialized).
func materializedResources(ks []kinds.Kind) []string {
	var out []string
	for _, k := range ks {
		if k.Materialized() {
			out = append(out, k.Resource())
		}
	}
	return out
}

// ownIdentity asks the host who the server is (a SelfSubjectReview, which
// every authenticated user may create), retrying until ctx is cancelled.
func ownIdentity(ctx context.Context, client kubernetes.Interface) (string, bool) {
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
