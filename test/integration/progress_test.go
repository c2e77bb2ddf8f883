package integration

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
	"github.com/implicit-dev/implicit-apiserver/pkg/sourcefeed"
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
	// A configured kind read from a CRD (guardrails) is tracked as the
	// built-in ones are: its part keeps up too. TestConfiguredKindOverlay
	// creates its CRD for the rest of the suite; run alone, this test does.
	if _, err := dyn.Resource(testfixture.CRDs).Create(ctx, testfixture.GuardrailCRD(false), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ensureNamespace(t, kube, "progress-probe")
	eventually(t, "guardrails.implicit.dev is served", func(ctx context.Context) error {
		_, err := dyn.Resource(testfixture.GuardrailViews).Namespace("progress-probe").List(ctx, metav1.ListOptions{})
		return err
	})
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
	// The vector's parts are the sources in key order: "namespaces" and
	// each served kind's resource (its view's name), every one tracked.
	start := time.Now()
	// Two intervals and their jitter, plus the nudge's own interval.
	within := 3*sourcefeed.DefaultProgress + 10*time.Second
	eventuallyWithin(t, time.Second, within, fmt.Sprintf("every source's part reaches %d (the ConfigMap's revision)", r), func(ctx context.Context) error {
		keys, err := sourceKeys(kube)
		if err != nil {
			return err
		}
		_, l, err := listViewItems(ctx, dyn, "progress-probe", metav1.ListOptions{})
		if err != nil {
			return err
		}
		v, err := resourceversion.Parse(l.GetResourceVersion())
		if err != nil {
			return err
		}
		if len(v.Vector) != len(keys) {
			return fmt.Errorf("version %s has %d parts; the served sources are %v", l.GetResourceVersion(), len(v.Vector), keys)
		}
		for i, part := range v.Vector {
			if part < r {
				return fmt.Errorf("version %s: %s at %d", l.GetResourceVersion(), keys[i], part)
			}
		}
		return nil
	})
	t.Logf("every part reached %d after %s", r, time.Since(start).Round(time.Second))
	if err := kube.CoreV1().ConfigMaps("progress-probe").Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		t.Error(err)
	}
}

// sourceKeys are the mux's source keys in the vector's order: "namespaces"
// and the resource of each view implicit.dev serves.
func sourceKeys(kube kubernetes.Interface) ([]string, error) {
	list, err := kube.Discovery().ServerResourcesForGroupVersion("implicit.dev/v1alpha1")
	if err != nil {
		return nil, err
	}
	keys := []string{"namespaces"}
	for _, r := range list.APIResources {
		if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "watch") {
			continue
		}
		keys = append(keys, r.Name)
	}
	sort.Strings(keys)
	return keys, nil
}
