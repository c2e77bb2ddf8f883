package webhookconfig

import (
	"context"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	admissionclient "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Guarded is what ConditionSync reads of the sources: *whatif.Index.
type Guarded interface {
	Guarded() (MatchInputs, bool)
	Changed() <-chan struct{}
}

// ConditionSync keeps the shadows and fanout webhooks' match conditions of
// the ValidatingWebhookConfiguration Name equal to the sources: the names of
// locked items, and the namespaces others inherit from. It syncs after every
// change of the sources and of the configuration itself (a GitOps tool
// re-applying artifacts/base resets the conditions to "false"), writes only
// when they differ, at most once per MinInterval; every replica computes the
// same conditions, so concurrent writers agree.
type ConditionSync struct {
	Client admissionclient.ValidatingWebhookConfigurationInterface
	// Kube, when set, watches the configuration (that one object) so that a
	// replaced configuration is synced at once, not at the next Resync.
	Kube            kubernetes.Interface
	Name            string
	GlobalNamespace string
	Source          Guarded
	// Served, when set, returns the served source resources: the rules of
	// the source webhooks are kept equal to them, so kinds served from a
	// configuration, or appearing at run time, are guarded like the defaults.
	Served func() []schema.GroupResource
	// Materialized, when set, returns the view resources delivered as real
	// objects: their every creation is sent to the shadows guard.
	Materialized func() []string
	// MinInterval is the least time between two writes (default 1s);
	// Resync how often the conditions are checked without a change (5m).
	MinInterval time.Duration
	Resync      time.Duration
	// Clock times the interval, the resync and the retry (default the real
	// clock); tests set a fake one.
	Clock clock.Clock
}

// Run syncs after every change of the sources or of the configuration, and
// every Resync, until ctx is cancelled.
func (s *ConditionSync) Run(ctx context.Context) {
	interval := s.MinInterval
	if interval <= 0 {
		interval = time.Second
	}
	resync := s.Resync
	if resync <= 0 {
		resync = 5 * time.Minute
	}
	clk := s.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	configChanged := s.watchConfiguration(ctx)
	var retryAfter <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.Source.Changed():
		case <-configChanged:
		case <-retryAfter:
		case <-clk.After(resync):
		}
		retryAfter = nil
		if err := s.sync(ctx); err != nil {
			klog.ErrorS(err, "Syncing the admission webhook match conditions", "configuration", s.Name)
			retryAfter = clk.After(10 * interval)
		}
		// At most one write per interval; changes meanwhile coalesce.
		select {
		case <-ctx.Done():
			return
		case <-clk.After(interval):
		}
	}
}

// watchConfiguration signals, coalesced, every change of the configuration
// object; nil without Kube. The informer stops with ctx.
func (s *ConditionSync) watchConfiguration(ctx context.Context) <-chan struct{} {
	if s.Kube == nil {
		return nil
	}
	changed := make(chan struct{}, 1)
	signal := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(s.Kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.Name).String()
	}))
	inf := factory.Admissionregistration().V1().ValidatingWebhookConfigurations().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { signal() },
		UpdateFunc: func(any, any) { signal() },
		DeleteFunc: func(any) { signal() },
	}); err != nil {
		klog.ErrorS(err, "Watching the admission webhook configuration", "configuration", s.Name)
		return nil
	}
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	return changed
}

// sync writes the conditions if they differ from the sources'.
func (s *ConditionSync) sync(ctx context.Context) error {
	g, ok := s.Source.Guarded()
	if !ok {
		return nil
	}
	if s.Materialized != nil {
		g.Materialized = s.Materialized()
	}
	want := SyncedConditions(g, s.GlobalNamespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg, err := s.Client.Get(ctx, s.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			klog.V(2).InfoS("No admission webhook configuration to sync", "configuration", s.Name)
			return nil
		}
		if err != nil {
			return err
		}
		changed := setConditions(cfg, want)
		if s.Served != nil {
			if served := s.Served(); len(served) > 0 && setRules(cfg, served) {
				changed = true
			}
		}
		if !changed {
			return nil
		}
		if _, err := s.Client.Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
			return err
		}
		klog.InfoS("Updated the admission webhook match conditions", "configuration", s.Name, "sources", g.String())
		return nil
	})
}

// setConditions sets each named webhook's synced condition; it reports
// whether anything changed.
func setConditions(cfg *admissionregistrationv1.ValidatingWebhookConfiguration, want map[string]string) bool {
	changed := false
	for i := range cfg.Webhooks {
		w := &cfg.Webhooks[i]
		expr, ok := want[w.Name]
		if !ok {
			continue
		}
		found := false
		for j := range w.MatchConditions {
			if w.MatchConditions[j].Name == syncedCondition {
				found = true
				if w.MatchConditions[j].Expression != expr {
					w.MatchConditions[j].Expression = expr
					changed = true
				}
			}
		}
		if !found {
			w.MatchConditions = append(w.MatchConditions, admissionregistrationv1.MatchCondition{Name: syncedCondition, Expression: expr})
			changed = true
		}
	}
	return changed
}

// SyncedConditions are the "implicit-sources" match conditions the server
// keeps current, by webhook.
func SyncedConditions(g MatchInputs, globalNamespace string) map[string]string {
	return map[string]string{
		WebhookShadows:            shadowCondition(g, globalNamespace),
		WebhookFanout:             fanoutCondition(g),
		WebhookNamespaceDeletions: deletionCondition(g),
	}
}
