package apiserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

var configuredKinds = metrics.NewGaugeVec(&metrics.GaugeOpts{
	Namespace:      "implicit",
	Name:           "configured_kinds",
	Help:           "Configured source kinds by state: served, waiting (the host does not serve the kind or its schema yet), or invalid (see the log).",
	StabilityLevel: metrics.ALPHA,
}, []string{"resource", "state"})

func init() {
	legacyregistry.MustRegister(configuredKinds)
}

// NewOverlayer builds a kind's overlayer from its OpenAPI models; the server
// uses merge.NewOverlayer.
type NewOverlayer func(models map[string]*spec.Schema, model string) (merge.Overlayer, error)

// initialSyncTimeout bounds how long readiness waits for the kinds the host
// has at start to be served.
const initialSyncTimeout = 30 * time.Second

// kindController serves the configured kinds that are not built in: it asks
// the host about each (discovery, OpenAPI v3, CustomResourceDefinition)
// until the kind exists, then starts its informer and, once the informer has
// synced, adds its view to the served group. A kind whose CRD appears later is
// served within a poll period, without a restart; a change of its schema or
// printer columns is picked up the same way.
type kindController struct {
	resources []Resource
	dc        discovery.DiscoveryInterface
	dyn       dynamic.Interface
	factory   dynamicinformer.DynamicSharedInformerFactory
	// hub, when set, feeds the global sources of every kind.
	hub        *HubConfig
	hubFactory dynamicinformer.DynamicSharedInformerFactory

	mux        *watchmux.Mux
	objects    *views.Objects
	group      *servedGroup
	schemas    *schemaStore
	overlayer  NewOverlayer
	staleness  views.Staleness
	static     []registry.Kind
	staticView map[string]registry.Viewer
	period     time.Duration
	// docs caches the host's OpenAPI documents between polls.
	docs schemaCache
	// logs keeps a waiting or invalid kind's log line from repeating every poll.
	logs logThrottle
	// onServe is told of each source kind served at run time (the guards).
	onServe func(schema.GroupResource)

	mu sync.Mutex
	// kinds are the resolved kinds by resource, served once synced.
	kinds map[string]*dynamicKind
	// unpublished is set while the last publish failed: the next poll retries.
	unpublished bool
	// checked is closed once every kind was asked about once.
	checked     chan struct{}
	checkedOnce sync.Once
}

// dynamicKind is a configured kind the host serves.
type dynamicKind struct {
	kind        registry.Kind
	view        registry.Viewer
	fingerprint string
	synced      bool
}

// hasChecked reports whether every configured kind was asked about once.
func (c *kindController) hasChecked() bool {
	select {
	case <-c.checked:
		return true
	default:
		return false
	}
}

// Run serves the static kinds at once, then polls the host for the others
// until ctx is cancelled.
func (c *kindController) Run(ctx context.Context) {
	if err := c.publish(); err != nil {
		klog.ErrorS(err, "Serving the views failed")
	}
	if len(c.resources) == 0 {
		c.checkedOnce.Do(func() { close(c.checked) })
		return
	}
	defer c.factory.Shutdown()
	if c.hubFactory != nil {
		defer c.hubFactory.Shutdown()
	}
	t := time.NewTicker(c.period)
	defer t.Stop()
	for {
		synced := c.poll(ctx)
		// Ready once every kind the host has at start is served: a restart
		// must not hide a view that kube-apiserver's discovery still lists.
		c.checkedOnce.Do(func() {
			// Bounded: a kind the server may not list (missing RBAC) never
			// syncs, and must not keep every other view unready.
			deadline := time.After(initialSyncTimeout)
		wait:
			for _, s := range synced {
				select {
				case <-s:
				case <-deadline:
					klog.ErrorS(nil, "Configured kinds still reading their sources; ready without them, they are served once read (can the server list and watch them?)", "timeout", initialSyncTimeout)
					break wait
				case <-ctx.Done():
					break wait
				}
			}
			close(c.checked)
		})
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// poll asks the host about every configured kind and acts on what changed.
// It returns a channel per kind it started serving, closed once the kind's
// sources are read and its view is served (or given up).
func (c *kindController) poll(ctx context.Context) []<-chan struct{} {
	var started []<-chan struct{}
	c.mu.Lock()
	retry := c.unpublished
	c.mu.Unlock()
	if retry {
		if err := c.publish(); err != nil {
			klog.ErrorS(err, "Serving the views failed")
		}
	}
	for _, r := range c.resources {
		if ctx.Err() != nil {
			return started
		}
		res, err := resolve(ctx, c.dc, c.dyn, &c.docs, r.Source)
		c.mu.Lock()
		known := c.kinds[r.Source.Resource]
		c.mu.Unlock()
		switch {
		case err != nil && known != nil:
			// Served already: keep serving what was read (fail-static); the
			// kind's informer says what it can.
			klog.V(2).InfoS("Could not re-read a served kind", "resource", r.Source.String(), "err", err)
		case IsNotYet(err):
			setKindState(r.Source, "waiting")
			if c.logs.due(r.Source.Resource, err.Error()) {
				klog.InfoS("Configured kind not served by the host yet: its view appears once it is", "resource", r.Source.String(), "reason", err.Error())
			}
		case err != nil:
			setKindState(r.Source, "invalid")
			if c.logs.due(r.Source.Resource, err.Error()) {
				klog.ErrorS(err, "Configured kind can't be served", "resource", r.Source.String())
			}
		case known == nil:
			done, err := c.add(ctx, r, res)
			if err != nil {
				setKindState(r.Source, "invalid")
				klog.ErrorS(err, "Configured kind can't be served", "resource", r.Source.String())
				continue
			}
			started = append(started, done)
		case known.fingerprint != res.fingerprint:
			if err := c.update(r, res); err != nil {
				klog.ErrorS(err, "Could not apply the new schema of a served kind; serving the previous one", "resource", r.Source.String())
			}
		}
	}
	return started
}

// options returns the merge options of a kind from its schema.
func (c *kindController) options(r Resource, res resolved) merge.Options {
	o := merge.Options{Strategy: r.Strategy}
	if c.overlayer == nil {
		return o
	}
	ov, err := c.overlayer(res.models, res.source.Model)
	if err != nil {
		klog.ErrorS(err, "No overlays for a kind: its schema can't be used for merging; lower scopes replace inherited items", "resource", r.Source.String())
		return merge.Options{}
	}
	o.Overlayer = ov
	return o
}

// add starts serving a kind the host now has: informer first, view once
// synced. The channel it returns is closed then, or when ctx ends first.
func (c *kindController) add(ctx context.Context, r Resource, res resolved) (<-chan struct{}, error) {
	kind, err := registry.Generic(res.source)
	if err != nil {
		return nil, err
	}
	resource := r.Source.Resource
	if err := c.mux.AddResource(resource, c.options(r, res)); err != nil {
		return nil, err
	}
	c.objects.Add(resource, kind.New)
	c.schemas.set(resource, res.models, res.source.Model, kind.Kind)
	view := views.New(SchemeGroupVersion.WithResource(resource).GroupResource(), c.mux).WithKind(SchemeGroupVersion.WithKind(kind.Kind))
	var regs []cache.ResourceEventHandlerRegistration
	reg, err := c.mux.AddSource(resource, watchmux.Source{Informer: c.factory.ForResource(r.Source).Informer()})
	if err != nil {
		return nil, err
	}
	regs = append(regs, reg)
	if c.hub != nil {
		reg, err := c.mux.AddSource(resource, watchmux.Source{Informer: c.hubFactory.ForResource(r.Source).Informer(), Cluster: c.hub.Name})
		if err != nil {
			return nil, err
		}
		regs = append(regs, reg)
		view.WithStaleness(c.staleness)
		c.hubFactory.Start(ctx.Done())
	}
	c.factory.Start(ctx.Done())
	dk := &dynamicKind{kind: kind, view: view, fingerprint: res.fingerprint}
	c.mu.Lock()
	c.kinds[resource] = dk
	c.mu.Unlock()
	klog.InfoS("Configured kind found: reading its sources", "resource", r.Source.String(), "kind", kind.Kind, "strategy", string(r.Strategy))

	done := make(chan struct{})
	go func() {
		defer close(done)
		syncs := make([]cache.InformerSynced, 0, len(regs))
		for _, reg := range regs {
			syncs = append(syncs, reg.HasSynced)
		}
		if !cache.WaitForCacheSync(ctx.Done(), syncs...) {
			return
		}
		c.mux.MarkResourceSynced(resource)
		c.mu.Lock()
		dk.synced = true
		c.mu.Unlock()
		if err := c.publish(); err != nil {
			klog.ErrorS(err, "Serving the views failed", "resource", r.Source.String())
			return
		}
		if c.onServe != nil {
			c.onServe(r.Source.GroupResource())
		}
		setKindState(r.Source, "served")
	}()
	return done, nil
}

// update serves a kind's new schema or printer columns.
func (c *kindController) update(r Resource, res resolved) error {
	kind, err := registry.Generic(res.source)
	if err != nil {
		return err
	}
	resource := r.Source.Resource
	c.mux.SetMergeOptions(resource, c.options(r, res))
	c.schemas.set(resource, res.models, res.source.Model, kind.Kind)
	c.mu.Lock()
	dk := c.kinds[resource]
	dk.kind, dk.fingerprint = kind, res.fingerprint
	synced := dk.synced
	c.mu.Unlock()
	klog.InfoS("Configured kind changed in the host: serving its new schema", "resource", r.Source.String())
	if !synced {
		return nil
	}
	return c.publish()
}

// publish serves the static kinds and every synced dynamic kind.
func (c *kindController) publish() error {
	c.mu.Lock()
	kinds := append([]registry.Kind(nil), c.static...)
	viewers := make(map[string]registry.Viewer, len(c.static)+len(c.kinds))
	for r, v := range c.staticView {
		viewers[r] = v
	}
	for r, dk := range c.kinds {
		if dk.synced {
			kinds = append(kinds, dk.kind)
			viewers[r] = dk.view
		}
	}
	c.mu.Unlock()
	err := c.group.set(kinds, viewers)
	c.mu.Lock()
	c.unpublished = err != nil
	c.mu.Unlock()
	return err
}

// logThrottle says when a kind's repeated condition is worth a log line:
// when it is new or changed, and every repeatEvery while it lasts.
type logThrottle struct {
	mu   sync.Mutex
	last map[string]loggedAt
}

type loggedAt struct {
	message string
	at      time.Time
}

// repeatEvery is how often an unchanged condition is logged again.
const repeatEvery = 5 * time.Minute

func (l *logThrottle) due(resource, message string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if prev, ok := l.last[resource]; ok && prev.message == message && now.Sub(prev.at) < repeatEvery {
		return false
	}
	if l.last == nil {
		l.last = map[string]loggedAt{}
	}
	l.last[resource] = loggedAt{message: message, at: now}
	return true
}

func setKindState(gvr schema.GroupVersionResource, state string) {
	for _, s := range []string{"served", "waiting", "invalid"} {
		v := 0.0
		if s == state {
			v = 1
		}
		configuredKinds.WithLabelValues(gvr.String(), s).Set(v)
	}
}

// String describes a configured resource for logs and errors.
func (r Resource) String() string { return fmt.Sprintf("%s (%s)", r.Source, r.Strategy) }
