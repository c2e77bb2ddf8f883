package authz

import (
	"fmt"
	"slices"
	"sync/atomic"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// Views is what the authorizer reads of the merged views: *watchmux.Mux.
type Views interface {
	Read(f func(watchmux.Reader)) (string, error)
	LineageGeneration(namespace string) (string, error)
}

// Resources names the views the authorizer reads.
const (
	resourceRoleBindings = "rolebindings"
	resourceRoles        = "roles"
)

// Decision is the answer to one request.
type Decision struct {
	Allowed bool
	// Reason names the inherited binding that allowed the request.
	Reason string
}

// Authorizer decides from inherited RoleBindings. It is safe for concurrent use.
type Authorizer struct {
	views        Views
	clusterRoles rbaclisters.ClusterRoleLister
	// clusterRoleBindings are the requester's real cluster-wide rules, which
	// a delegation (delegation.go) counts beside the namespace's.
	clusterRoleBindings rbaclisters.ClusterRoleBindingLister
	// clusterRoleGen counts ClusterRole changes: cached decisions that read
	// a ClusterRole carry it.
	clusterRoleGen atomic.Uint64
	cache          *decisionCache
	// audit records where open candidates would answer otherwise (audit.go).
	audit *audit
}

// New returns an authorizer reading views, the ClusterRoles of clusterRoles
// and the ClusterRoleBindings of clusterRoleBindings, keeping the latest
// cacheSize decisions (DefaultCacheSize if <= 0) within DefaultCacheBytes.
func New(views Views, clusterRoles, clusterRoleBindings cache.SharedIndexInformer, cacheSize int) (*Authorizer, error) {
	if cacheSize <= 0 {
		cacheSize = DefaultCacheSize
	}
	c, err := newDecisionCache(cacheSize, DefaultCacheBytes)
	if err != nil {
		return nil, err
	}
	a := &Authorizer{
		views:               views,
		clusterRoles:        rbaclisters.NewClusterRoleLister(clusterRoles.GetIndexer()),
		clusterRoleBindings: rbaclisters.NewClusterRoleBindingLister(clusterRoleBindings.GetIndexer()),
		cache:               c,
		audit:               newAudit(clock.RealClock{}),
	}
	bump := func(any) { a.clusterRoleGen.Add(1) }
	if _, err := clusterRoles.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: bump,
		UpdateFunc: func(old, obj any) {
			// A resync delivers unchanged ClusterRoles: nothing to forget.
			if o, ok := old.(*rbacv1.ClusterRole); ok {
				if n, ok := obj.(*rbacv1.ClusterRole); ok && o.ResourceVersion == n.ResourceVersion {
					return
				}
			}
			bump(obj)
		},
		DeleteFunc: bump,
	}); err != nil {
		return nil, err
	}
	return a, nil
}

// Authorize decides a namespaced resource request. A request no inherited
// binding allows gets Allowed false: no opinion. err is set when the views
// can't be read yet; the caller answers no opinion with it.
func (a *Authorizer) Authorize(attrs Attributes) (Decision, error) {
	if attrs.Namespace == "" {
		return Decision{}, nil
	}
	if isBind(attrs) {
		// Decided every time: a delegation reads the namespace's real
		// bindings and the ClusterRoleBindings, which no generation
		// stands for, and kube-apiserver asks it on binding writes only.
		var c cached
		if _, err := a.views.Read(func(r watchmux.Reader) { c = a.decideBindAudited(r, attrs) }); err != nil {
			return Decision{}, err
		}
		a.audit.observe(attrs, c.d, c.shadows)
		return c.d, nil
	}
	gen, err := a.views.LineageGeneration(attrs.Namespace)
	if err != nil {
		return Decision{}, err
	}
	// A request too long to cache is not even turned into a key.
	var key string
	if attrs.keyLen() <= MaxCachedKeyBytes {
		key = fmt.Sprintf("%s\x00%s\x00%d", attrs.key(), gen, a.clusterRoleGen.Load())
		if c, ok := a.cache.get(key); ok {
			fresh, err := a.current(c.roles)
			if err != nil {
				return Decision{}, err
			}
			if fresh {
				decisionsCached.Inc()
				a.audit.observe(attrs, c.d, c.shadows)
				return c.d, nil
			}
		}
	}
	var c cached
	if _, err := a.views.Read(func(r watchmux.Reader) { c = a.decideAudited(r, attrs) }); err != nil {
		return Decision{}, err
	}
	if key != "" {
		a.cache.add(key, c)
	}
	a.audit.observe(attrs, c.d, c.shadows)
	return c.d, nil
}

// current reports whether the real Roles a cached decision resolved are
// still the ones the mirror holds. The views' generations don't stand for
// them: a Role a lock or a candidate keeps out of its own namespace's view
// changes no view, yet a binding there resolves it.
func (a *Authorizer) current(roles []roleVersion) (bool, error) {
	if len(roles) == 0 {
		return true, nil
	}
	fresh := true
	_, err := a.views.Read(func(r watchmux.Reader) {
		for _, want := range roles {
			if _, got := realRole(r, want.namespace, want.name, want.cluster); got != want {
				fresh = false
				return
			}
		}
	})
	return fresh, err
}

// decide looks for an inherited binding of the namespace's view that grants
// attrs, and records the real Roles it resolved on the way.
func (a *Authorizer) decide(r watchmux.Reader, attrs Attributes) cached {
	return a.decideIn(r, attrs, actualView(r, attrs.Namespace))
}

// decideIn is decide over the bindings of v: the namespace's view, or the
// view it would have with a candidate applied (shadow.go).
func (a *Authorizer) decideIn(r watchmux.Reader, attrs Attributes, v bindingView) cached {
	var c cached
	for _, res := range v.results {
		if res.Scope == merge.ScopeLocal {
			continue // kube-apiserver's RBAC decides local bindings
		}
		reason, ok := a.grants(r, attrs, res, &c.roles)
		if !ok {
			continue
		}
		if hasLocalOverlay(res, attrs.Namespace) {
			// The namespace's own object was merged onto the inherited
			// binding. A local object is kube-apiserver's RBAC's to judge:
			// grant only what the binding grants without it too, so a local
			// overlay can't widen an inherited grant.
			inh, found := v.inherited(res.Item.Name)
			if !found {
				continue
			}
			if _, ok := a.grants(r, attrs, inh, &c.roles); !ok {
				continue
			}
		}
		c.d = Decision{Allowed: true, Reason: reason}
		return c
	}
	return c
}

// grants reports whether the RoleBinding of a view item, as the view shows
// it (merged with its overlays), grants attrs, and why: one of the rules
// bindingRules lists (delegation.go), the rules RulesFor lists too.
// The real Roles it resolves are added to roles.
func (a *Authorizer) grants(r watchmux.Reader, attrs Attributes, res merge.Result, roles *[]roleVersion) (string, bool) {
	g, ok := a.bindingRules(r, attrs, res, roles)
	if !ok {
		return "", false
	}
	for _, rule := range g.rules {
		if ruleAllows(attrs, rule) {
			// The view item's name: a candidate's item has the stable
			// binding's, and says which candidate it shows.
			staged := ""
			if c := res.Candidates(); c != "" {
				staged = fmt.Sprintf(" (candidate %s)", c)
			}
			return fmt.Sprintf("implicit.dev: RoleBinding %q%s inherited from namespace %q (%s) grants %s", res.Item.Name, staged, res.Item.Namespace, res.Scope, g.via), true
		}
	}
	return "", false
}

// hasLocalOverlay reports whether an overlay of namespace's own was merged into res.
func hasLocalOverlay(res merge.Result, namespace string) bool {
	for _, o := range res.Overlays {
		if o.Namespace == namespace {
			return true
		}
	}
	return false
}

// viewObject is the object a view item shows: merged, with overlays.
func viewObject(res merge.Result) any {
	if res.Object != nil {
		return res.Object
	}
	return res.Item.Object
}

// roleRefSource is the namespace (and cluster) of the source whose roleRef
// the merged binding shows, where its Role is looked up: every RoleBinding
// sets its roleRef, so it is the topmost locked layer's (no layer below may
// change it), or else the nearest layer's. An overlay repeating a locked
// roleRef can't make it name the Role of its own namespace. Overlays are
// lower scopes than the item they merge onto, so never a hub's.
func roleRefSource(res merge.Result) (namespace, cluster string) {
	if res.Item.Locked {
		return res.Item.Namespace, res.Item.Cluster
	}
	for _, o := range res.Overlays {
		if o.Locked {
			return o.Namespace, ""
		}
	}
	if n := len(res.Overlays); n > 0 {
		return res.Overlays[n-1].Namespace, ""
	}
	return res.Item.Namespace, res.Item.Cluster
}

func anySubject(attrs Attributes, subjects []rbacv1.Subject, namespace string) bool {
	for _, s := range subjects {
		if subjectMatches(attrs, s, namespace) {
			return true
		}
	}
	return false
}

// rules resolves a binding's roleRef as RBAC resolves it where the binding
// is written: a ClusterRole, or the real Role of that name in the binding's
// own source namespace (and cluster). Never a Role that namespace only sees
// in its view: one it inherits from above, a candidate staged for it, or
// one merged with overlays. The binding's author passed RBAC's escalation
// check for that real Role alone, so when it does not exist the binding
// grants nothing, and a namespace below can't change what it grants by
// shadowing the Role either. The Role resolved is added to roles.
func (a *Authorizer) rules(r watchmux.Reader, rb *rbacv1.RoleBinding, sourceNamespace, cluster string, roles *[]roleVersion) ([]rbacv1.PolicyRule, string) {
	switch rb.RoleRef.Kind {
	case "ClusterRole":
		cr, err := a.clusterRoles.Get(rb.RoleRef.Name)
		if err != nil {
			return nil, ""
		}
		return cr.Rules, "ClusterRole " + cr.Name
	case "Role":
		role, v := realRole(r, sourceNamespace, rb.RoleRef.Name, cluster)
		if !slices.Contains(*roles, v) {
			*roles = append(*roles, v)
		}
		if role != nil {
			return role.Rules, fmt.Sprintf("Role %s/%s", sourceNamespace, role.Name)
		}
	}
	return nil, ""
}

// roleVersion names the real Role a decision resolved, and the version it
// read: uid and resourceVersion empty when there was none.
type roleVersion struct {
	namespace, name, cluster string
	uid                      types.UID
	resourceVersion          string
}

// realRole returns the Role source object namespace/name of cluster, and
// the version read.
func realRole(r watchmux.Reader, namespace, name, cluster string) (*rbacv1.Role, roleVersion) {
	v := roleVersion{namespace: namespace, name: name, cluster: cluster}
	it, ok := r.Source(resourceRoles, namespace, name)
	if !ok || it.Cluster != cluster {
		return nil, v
	}
	role, ok := it.Object.(*rbacv1.Role)
	if !ok {
		return nil, v
	}
	v.uid, v.resourceVersion = role.UID, role.ResourceVersion
	return role, v
}
