package kindcontroller

import (
	"slices"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// A view's short name (irb, irole, inetpol, or a configured kind's) is one
// no other resource of the host has. A CRD installed later may take one: the
// view then withholds it from discovery while the collision lasts, so that
// kubectl resolves the name to the CRD as its author meant, and serves it
// again once the CRD drops it. The host's discovery is read every
// shortNamesEvery (it is what kubectl resolves names with).

// shortNamesEvery is how often the host's discovery is read for short names.
const shortNamesEvery = 10 * time.Second

// takenShortNames returns the short names of the host's resources outside
// implicit.dev: short name -> resource.group. A group whose discovery fails
// is left out (its names are checked at the next read).
func takenShortNames(dc discovery.DiscoveryInterface) (map[string]string, error) {
	_, lists, err := dc.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, err
	}
	taken := map[string]string{}
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil || gv.Group == v1alpha1.GroupName {
			continue
		}
		for _, r := range l.APIResources {
			for _, sn := range r.ShortNames {
				if _, ok := taken[sn]; !ok {
					taken[sn] = schema.GroupResource{Group: gv.Group, Resource: r.Name}.String()
				}
			}
		}
	}
	return taken, nil
}

// shortNamesDue reports whether the host's short names are to be read now.
func (c *Controller) shortNamesDue() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if !c.shortNamesRead.IsZero() && now.Sub(c.shortNamesRead) < shortNamesEvery {
		return false
	}
	c.shortNamesRead = now
	return true
}

// withholdShortNames reads the host's short names and withholds each served
// view's that another resource has; it reports whether any view's short
// names changed (the group is to be published again).
func (c *Controller) withholdShortNames() bool {
	if c.dc == nil {
		return false
	}
	taken, err := takenShortNames(c.dc)
	if err != nil {
		klog.V(2).InfoS("Could not read the host's discovery for short names; the views keep theirs", "err", err)
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	resources := make([]string, 0, len(c.kinds))
	for r := range c.kinds {
		resources = append(resources, r)
	}
	sort.Strings(resources)
	for _, resource := range resources {
		sk := c.kinds[resource]
		var withheld []string
		for _, sn := range sk.kind.ShortNames {
			other, ok := taken[sn]
			if !ok {
				continue
			}
			withheld = append(withheld, sn)
			if !slices.Contains(sk.withheld, sn) {
				klog.InfoS("A view's short name is another resource's: left out of discovery while it is, so kubectl resolves it to that resource",
					"view", resource+"."+v1alpha1.GroupName, "shortName", sn, "resource", other)
			}
		}
		for _, sn := range sk.withheld {
			if !slices.Contains(withheld, sn) {
				klog.InfoS("A view's short name is no other resource's any more: back in discovery", "view", resource+"."+v1alpha1.GroupName, "shortName", sn)
			}
		}
		sk.withheld = withheld
		if sk.storage.WithholdShortNames(withheld) && sk.synced {
			changed = true
		}
	}
	return changed
}
