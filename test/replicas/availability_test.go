package replicas

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

// logAvailability logs every change of the APIService's Available
// condition, as kube-apiserver's aggregator sets it, until the test ends: a
// client that sees the aggregator's own 503 ("the server is currently
// unable to handle the request") is then explained by the log. It polls
// four times a second.
func logAvailability(ctx context.Context, t *testing.T, cfg *rest.Config) {
	t.Helper()
	agg, err := aggregator.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	t.Cleanup(func() { cancel(); wg.Wait() })
	go func() {
		defer wg.Done()
		last := ""
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			svc, err := agg.ApiregistrationV1().APIServices().Get(ctx, controlplane.APIServiceName, metav1.GetOptions{})
			if err != nil {
				continue
			}
			for _, c := range svc.Status.Conditions {
				if c.Type != apiregistrationv1.Available {
					continue
				}
				now := string(c.Status) + " " + c.Reason + ": " + c.Message
				if now != last && ctx.Err() == nil {
					t.Logf("%s APIService Available=%s", time.Now().Format("15:04:05.000"), now)
					last = now
				}
			}
		}
	}()
}
