package kindcontroller

import (
	"context"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// poll asks the host about every configured kind not built in and acts on
// what changed. It returns a channel per kind it started serving, closed
// once the kind's sources are read and its view is served (or given up).
func (c *Controller) poll(ctx context.Context) []<-chan struct{} {
	var started []<-chan struct{}
	c.mu.Lock()
	retry := c.unpublished
	c.mu.Unlock()
	if retry {
		if err := c.publish(); err != nil {
			klog.ErrorS(err, "Serving the views failed")
		}
	}
	for _, r := range c.unstructured {
		if ctx.Err() != nil {
			return started
		}
		res, err := resolve(ctx, c.dc, c.dyn, &c.docs, r.Source)
		c.mu.Lock()
		known := c.kinds[r.Source.Resource]
		c.mu.Unlock()
		if err == nil && known != nil {
			err = crdGone(known, res)
		}
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
func (c *Controller) options(r kinds.Kind, res resolved) merge.Options {
	o := merge.Options{Strategy: r.Strategy}
	if c.overlayer == nil {
		return o
	}
	ov, err := c.overlayer(res.models, res.names.Model)
	if err != nil {
		klog.ErrorS(err, "No overlays for a kind: its schema can't be used for merging; lower scopes replace inherited items", "resource", r.Source.String())
		return merge.Options{}
	}
	o.Overlayer = ov
	return o
}

// add starts serving a kind the host now has: informer first, view once
// synced. The channel it returns is closed then, or when ctx ends first.
func (c *Controller) add(ctx context.Context, r kinds.Kind, res resolved) (<-chan struct{}, error) {
	kind, err := complete(r, res)
	if err != nil {
		return nil, err
	}
	resource := r.Source.Resource
	o := c.options(r, res)
	syncs, err := c.start(kind, &o)
	if err != nil {
		return nil, err
	}
	c.group.SetSchemas(kind, res.models)
	if c.hubFactory != nil {
		c.hubFactory.Start(ctx)
	}
	c.factory.Start(ctx)
	c.mu.Lock()
	sk := c.kinds[resource]
	sk.fingerprint, sk.fromCRD = res.fingerprint, res.fromCRD
	c.mu.Unlock()
	klog.InfoS("Configured kind found: reading its sources", "resource", r.Source.String(), "kind", kind.Kind, "strategy", string(r.Strategy))

	done := make(chan struct{})
	go func() {
		defer close(done)
		if !cache.WaitForCacheSync(ctx.Done(), syncs...) {
			return
		}
		c.mux.MarkResourceSynced(resource)
		c.mu.Lock()
		sk.synced = true
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
func (c *Controller) update(r kinds.Kind, res resolved) error {
	kind, err := complete(r, res)
	if err != nil {
		return err
	}
	resource := r.Source.Resource
	c.mux.SetMergeOptions(resource, c.options(r, res))
	c.group.SetSchemas(kind, res.models)
	c.mu.Lock()
	sk := c.kinds[resource]
	sk.kind, sk.storage, sk.fingerprint, sk.fromCRD = kind, newStorage(kind, sk.view), res.fingerprint, res.fromCRD
	sk.storage.WithholdShortNames(sk.withheld)
	synced := sk.synced
	c.mu.Unlock()
	klog.InfoS("Configured kind changed in the host: serving its new schema", "resource", r.Source.String())
	if !synced {
		return nil
	}
	return c.publish()
}

// complete gives a configured kind the host's names; a printer column whose
// JSONPath does not parse makes it one that can't be served.
func complete(r kinds.Kind, res resolved) (kinds.Kind, error) {
	kind := r.WithHostNames(res.names, v1alpha1.SchemeGroupVersion)
	if _, err := registry.Cells(kind); err != nil {
		return kinds.Kind{}, err
	}
	return kind, nil
}
