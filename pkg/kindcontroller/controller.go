package kindcontroller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/utils/clock"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
	"github.com/implicit-dev/implicit-apiserver/pkg/servedgroup"
	"github.com/implicit-dev/implicit-apiserver/pkg/sourcefeed"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// NewOverlayer builds a kind's overlayer from its OpenAPI models; the server
// uses merge.NewOverlayer.
type NewOverlayer func(models map[string]*spec.Schema, model string) (merge.Overlayer, error)

// Group serves the views: a *servedgroup.Group.
type Group interface {
	// SetSchemas records the host's schemas of a kind served from
	// unstructured objects, for the group's OpenAPI documents.
	SetSchemas(k kinds.Kind, models servedgroup.HostSchemas)
	// Set serves views, replacing what was served.
	Set(views []servedgroup.View) error
}

// Hub is the cluster the global sources are read from.
type Hub struct {
	// Name names the cluster in the items it provides.
	Name string
	// Informers watch the global namespace of the hub, for the built-in kinds.
	Informers informers.SharedInformerFactory
	// Dynamic reads the other kinds' global sources; nil: none are read.
	Dynamic dynamic.Interface
	// GlobalNamespace is the namespace those are read from.
	GlobalNamespace string
	// Staleness says since when the hub's sources are stale.
	Staleness views.Staleness
	// Streams are the Trackers of Informers' built-in kinds.
	Streams map[schema.GroupVersionResource]sourcefeed.Stream
}

// Config is what a Controller serves and what it reads.
type Config struct {
	// Kinds are every served kind, built in or not.
	Kinds []kinds.Kind
	// HostSchemas are the host's schemas of the built-in kinds.
	HostSchemas servedgroup.HostSchemas
	// Overlayer builds a kind's overlayer from its schema; nil: no overlays.
	Overlayer NewOverlayer
	// Informers read the built-in kinds' sources; Discovery and Dynamic
	// find and read the others.
	Informers informers.SharedInformerFactory
	Discovery discovery.DiscoveryInterface
	Dynamic   dynamic.Interface
	// Streams are the Trackers of Informers' built-in kinds.
	Streams map[schema.GroupVersionResource]sourcefeed.Stream
	// Hub, when set, feeds the global sources of every kind.
	Hub *Hub
	// Mux merges the sources; Objects make its view items.
	Mux     *watchmux.Mux
	Objects *views.Objects
	// Group serves the views.
	Group Group
	// Period is how often the host is asked about the kinds not built in;
	// it must be positive.
	Period time.Duration
	// Clock drives the polls and the log throttling; required.
	Clock clock.WithTicker
	// OnServe is told of each source kind served at run time (the guards).
	OnServe func(schema.GroupResource)
	// Progress is how often the configured kinds' sources are read for
	// progress and their watches renewed (pkg/sourcefeed); 0: never.
	Progress time.Duration
}

// initialSyncTimeout bounds how long readiness waits for the kinds the host
// has at start to be served.
const initialSyncTimeout = 30 * time.Second

// Controller serves every configured kind. A built-in kind is fed to the
// mux when the Controller is made and served from the start. Each other kind
// is asked about (discovery, OpenAPI v3, CustomResourceDefinition) until the
// host has it; then its informer starts and, once the informer has synced,
// its view is added to the served group. A kind whose CRD appears later is
// served within a poll period, without a restart; a change of its schema or
// printer columns is picked up the same way.
type Controller struct {
	unstructured []kinds.Kind
	dc           discovery.DiscoveryInterface
	dyn          dynamic.Interface
	informers    informers.SharedInformerFactory
	streams      map[schema.GroupVersionResource]sourcefeed.Stream
	// factory reads the sources of the kinds not built in.
	factory *trackedInformers
	// hub, when set, feeds the global sources of every kind; hubFactory,
	// when set, those of the kinds not built in.
	hub        *Hub
	hubFactory *trackedInformers

	mux       *watchmux.Mux
	objects   *views.Objects
	group     Group
	overlayer NewOverlayer
	period    time.Duration
	clock     clock.WithTicker
	// docs caches the host's OpenAPI documents between polls.
	docs schemaCache
	// logs keeps a waiting or invalid kind's log line from repeating every poll.
	logs logThrottle
	// onServe is told of each source kind served at run time (the guards).
	onServe func(schema.GroupResource)

	mu sync.Mutex
	// kinds are the served kinds by resource, built in or found on the
	// host; each is published once synced.
	kinds map[string]*servedKind
	// unpublished is set while the last publish failed: the next poll retries.
	unpublished bool
	// checked is closed once every kind was asked about once.
	checked     chan struct{}
	checkedOnce sync.Once
	// shortNamesRead is when the host's short names were last read.
	shortNamesRead time.Time
}

// servedKind is a kind whose sources are read, and the storage of its view.
type servedKind struct {
	kind        kinds.Kind
	view        *views.View
	storage     *registry.Storage
	fingerprint string
	synced      bool
	// fromCRD: the kind's columns were read from its CRD (crdgone.go).
	fromCRD bool
	// withheld are the kind's short names another resource of the host
	// has (shortnames.go).
	withheld []string
}

// New feeds the built-in kinds of c to the mux, which must have
// been made with their resources, and prepares the polling of the others.
func New(c Config) (*Controller, error) {
	if c.Period <= 0 || c.Clock == nil {
		return nil, fmt.Errorf("the kind controller needs a positive poll period and a clock (period %v)", c.Period)
	}
	ctl := &Controller{
		dc:        c.Discovery,
		dyn:       c.Dynamic,
		informers: c.Informers,
		streams:   c.Streams,
		mux:       c.Mux,
		objects:   c.Objects,
		group:     c.Group,
		overlayer: c.Overlayer,
		period:    c.Period,
		clock:     c.Clock,
		logs:      logThrottle{clock: c.Clock},
		onServe:   c.OnServe,
		kinds:     map[string]*servedKind{},
		checked:   make(chan struct{}),
	}
	if c.Dynamic != nil {
		ctl.factory = newTrackedInformers(c.Dynamic, "", c.Progress)
	}
	if c.Hub != nil {
		ctl.hub = c.Hub
		if c.Hub.Dynamic != nil {
			ctl.hubFactory = newTrackedInformers(c.Hub.Dynamic, c.Hub.GlobalNamespace, c.Progress)
		}
	}
	for _, k := range c.Kinds {
		if k.GlobalNamespace != "" {
			c.Mux.SetGlobalNamespace(k.Resource(), k.GlobalNamespace)
		}
		if !k.Typed() {
			ctl.unstructured = append(ctl.unstructured, k)
		}
	}
	for _, k := range kinds.Typed(c.Kinds) {
		var o *merge.Options
		if c.Overlayer != nil {
			ov, err := c.Overlayer(c.HostSchemas, k.Model)
			if err != nil {
				return nil, fmt.Errorf("overlays of %s: %w", k.Source, err)
			}
			o = &merge.Options{Strategy: k.Strategy, Overlayer: ov}
		}
		if _, err := ctl.start(k, o); err != nil {
			return nil, err
		}
	}
	if len(ctl.unstructured) > 0 && (ctl.factory == nil || ctl.dc == nil) {
		return nil, fmt.Errorf("configured kinds %v need a host cluster client", ctl.unstructured)
	}
	return ctl, nil
}

// HasChecked reports whether every configured kind was asked about once.
func (c *Controller) HasChecked() bool {
	select {
	case <-c.checked:
		return true
	default:
		return false
	}
}

// Run serves the built-in kinds at once, then polls the host for the
// others until ctx is cancelled. Every shortNamesEvery it withholds the
// views' short names that another resource of the host has taken.
func (c *Controller) Run(ctx context.Context) {
	c.shortNamesDue()
	c.withholdShortNames()
	if err := c.publish(); err != nil {
		klog.ErrorS(err, "Serving the views failed")
	}
	if len(c.unstructured) > 0 {
		defer c.factory.Shutdown()
		if c.hubFactory != nil {
			defer c.hubFactory.Shutdown()
		}
	}
	t := c.clock.NewTicker(c.period)
	defer t.Stop()
	for {
		var synced []<-chan struct{}
		if len(c.unstructured) > 0 {
			synced = c.poll(ctx)
		}
		// Ready once every kind the host has at start is served: a restart
		// must not hide a view that kube-apiserver's discovery still lists.
		c.checkedOnce.Do(func() {
			// Bounded: a kind the server may not list (missing RBAC) never
			// syncs, and must not keep every other view unready.
			deadline := c.clock.After(initialSyncTimeout)
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
		if c.shortNamesDue() && c.withholdShortNames() {
			if err := c.publish(); err != nil {
				klog.ErrorS(err, "Serving the views' short names failed")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// publish serves every synced kind: the built-in ones from the start.
func (c *Controller) publish() error {
	c.mu.Lock()
	served := make([]servedgroup.View, 0, len(c.kinds))
	for _, sk := range c.kinds {
		if sk.synced {
			served = append(served, servedgroup.View{Kind: sk.kind, Storage: sk.storage})
		}
	}
	c.mu.Unlock()
	err := c.group.Set(served)
	c.mu.Lock()
	c.unpublished = err != nil
	c.mu.Unlock()
	return err
}
