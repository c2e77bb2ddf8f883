package integration

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apiserver"
	"github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// TestQuietSourcesKeepUp: the version of a view names, for every source,
// a revision within about two --source-progress-interval of etcd's, also
// for sources nobody writes (NetworkPolicies, Roles here). A ConfigMap write,
// which no view reads, moves etcd's revision to R; without the progress
// reads and the renewed watches the quiet sources' parts would stay below R
// for about a minute (the watch cache's bookmarks) or ten (etcd's progress
// notifications), and another replica could find them compacted.
func TestQuietSourcesKeepUp(t *testing.T) {
	kube, dyn := admin(t)
	ctx := t.Context()
	ensureNamespace(t, kube, "progress-probe")
	cm, err := kube.CoreV1().ConfigMaps("progress-probe").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := strconv.ParseUint(cm.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	_, before := viewList(t, dyn, "progress-probe", metav1.ListOptions{})
	t.Logf("etcd at %d after the ConfigMap; the view's version then: %s", r, before)
	start := time.Now()
	// Two intervals and their jitter, plus the nudge's own interval.
	within := 3*apiserver.DefaultSourceProgress + 10*time.Second
	eventuallyWithin(t, time.Second, within, fmt.Sprintf("every part of the view's version at or past %d", r), func(ctx context.Context) error {
		_, l, err := listViewItems(ctx, dyn, "progress-probe", metav1.ListOptions{})
		if err != nil {
			return err
		}
		v, err := resourceversion.Parse(l.GetResourceVersion())
		if err != nil {
			return err
		}
		for i, part := range v.Vector {
			if part < r {
				return fmt.Errorf("version %s: part %d at %d", l.GetResourceVersion(), i, part)
			}
		}
		return nil
	})
	t.Logf("every part reached %d after %s", r, time.Since(start).Round(time.Second))
	if err := kube.CoreV1().ConfigMaps("progress-probe").Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
}
