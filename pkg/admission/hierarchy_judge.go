package admission

import (
	"fmt"
	"maps"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
)

// LossIndex is what the guards of namespaces ask of the mirror: the
// locked items a change of a namespace's labels, or its deletion, would
// take out of views or make stand in under a name held below.
type LossIndex interface {
	// LockedLossPending lists the locked items that would leave the views
	// of namespace and its subtree if its labels and annotations became
	// next; pending are the source writes admitted a moment ago.
	LockedLossPending(namespace string, next whatif.NamespaceMeta, assumed whatif.Assumed, pending whatif.Pending) ([]whatif.LockedItem, error)
	// LockedStandIns lists, for resources, the locked items namespace or
	// its subtree would newly inherit under a name it holds an object of.
	LockedStandIns(namespace string, next whatif.NamespaceMeta, assumed whatif.Assumed, resources []string, pending whatif.Pending) ([]whatif.LockedItem, error)
	// DeletionLoss lists the locked items that would leave other
	// namespaces' views if namespace were deleted.
	DeletionLoss(namespace string, assumed whatif.Assumed) ([]whatif.LockedItem, error)
	// DeletionLosers lists the namespaces whose views hold items of
	// namespace or of its ancestors that deleting namespace takes away.
	DeletionLosers(namespace string) ([]string, error)
}

// judgement is what the parent guard found against the mirror and its
// assumptions: a denial, or the locked items the change takes out of views
// (each needs unlock).
type judgement struct {
	d    decision
	lost []whatif.LockedItem
}

// hierarchyChange is what a request changes of a namespace's place in the
// hierarchy: the facts every judgement of it reads.
type hierarchyChange struct {
	name string
	// now is the namespace as the request found it (its old object), nil
	// when it is being created; next its labels and annotations after.
	now  *whatif.NamespaceMeta
	next whatif.NamespaceMeta
	// parent is its parent label after the change; newParent: the change
	// sets or changes it; joins: the namespace comes to inherit through
	// parent (joining).
	parent    string
	newParent bool
	joins     bool
	// terminating: the request's old object shows the namespace's
	// deletion begun (kube-apiserver's answer; the mirror may lag).
	terminating bool
	// dryRun: admitted, it is not assumed.
	dryRun bool
}

// assumedWays are the parent guard's assumptions that still stand
// (currentLocked), and the same with the namespaces assumed gone taken back
// (undeletedLocked): a deletion admitted here may be refused by another
// webhook, and a namespace moved a moment before it then stays where it was
// moved, to lose what a change above it takes, or to hold what a lock
// above it would stand over. Judged the third way too, such a change is
// judged on it. Read under the parent guard's lock.
func (g *Guards) assumedWays() (assumed, undeleted whatif.Assumed) {
	g.hierarchy.mu.Lock()
	defer g.hierarchy.mu.Unlock()
	return g.hierarchy.waysLocked()
}

// judgeHierarchy judges c under the parent guard's lock, against the mirror
// alone and with the assumptions applied.
func (g *Guards) judgeHierarchy(c hierarchyChange) judgement {
	g.hierarchy.mu.Lock()
	defer g.hierarchy.mu.Unlock()
	return g.judgeHierarchyLocked(c)
}

// judgeHierarchyLocked is judgeHierarchy with hierarchy.mu held, judged
// with the current assumptions (assumed; undeleted: the same with the
// namespaces assumed gone taken back, assumptions.waysLocked). Each
// guard of a namespace's place, by what it protects, judges both ways: the
// parent (parentHolds), the locked items in the views (lockedLoss: each
// needs unlock), and the real objects under locked names (standIns). The
// last two also judge a third way, with undeleted: a deletion admitted here
// may be refused by another webhook, and a child moved below the namespace
// a moment before it (assumed, not yet in the mirror) then stays there to
// lose what the change takes, as NamespaceDeletions judges its losses; a
// new parent's place (parentPlace: no cycle) is judged that way too. A
// namespace being created loses nothing.
func (g *Guards) judgeHierarchyLocked(c hierarchyChange) judgement {
	assumed, undeleted := g.hierarchy.waysLocked()
	ways := g.bothWays(c, assumed)
	for _, a := range ways {
		if d := g.parentHolds(c, a); !d.allowed {
			return judgement{d: d}
		}
	}
	// A cycle through a namespace assumed gone is a cycle still if another
	// webhook refused that deletion (with a child moved below the new
	// parent a moment before it, neither of the other ways sees it).
	if c.newParent {
		if d := g.parentPlace(c.name, c.parent, undeleted); !d.allowed {
			return judgement{d: d}
		}
	}
	if c.now == nil {
		return judgement{d: allow()}
	}
	undeleted = maps.Clone(undeleted)
	if undeleted == nil {
		undeleted = whatif.Assumed{}
	}
	undeleted[c.name] = *c.now
	var lost []whatif.LockedItem
	for _, a := range append(ways[:], undeleted) {
		l, err := g.lockedLoss(c, a)
		if err != nil {
			return judgement{d: unavailable(fmt.Errorf("computing the locked items namespace %s would lose: %w", c.name, err))}
		}
		lost = unionLocked(lost, l)
		if d := g.standIns(c.name, c.next, a); !d.allowed {
			return judgement{d: d}
		}
	}
	return judgement{d: allow(), lost: lost}
}

// bothWays are the two states c is judged in: the mirror alone, then with
// the assumptions applied. The namespace itself is, both ways, as the
// request found it, whatever the mirror or an assumption says (the mirror
// may not know a namespace re-created a moment ago); the mirror alone is
// nil when it shows the namespace.
func (g *Guards) bothWays(c hierarchyChange, assumed whatif.Assumed) [2]whatif.Assumed {
	if c.now == nil {
		return [2]whatif.Assumed{nil, assumed}
	}
	mirror := whatif.Assumed{c.name: *c.now}
	if _, known := g.mirror.Namespaces.NamespaceMeta(c.name); known {
		mirror = nil // the mirror alone, as it is
	}
	withAssumed := maps.Clone(assumed)
	if withAssumed == nil {
		withAssumed = whatif.Assumed{}
	}
	withAssumed[c.name] = *c.now
	return [2]whatif.Assumed{mirror, withAssumed}
}

// joining reports whether a namespace comes to inherit through parent
// (after's) by the change from before: a new parent label, or opting back
// in under the parent it names.
func joining(before, after hierarchyOf, created, newParent bool) bool {
	if after.parent == "" || after.inherit == "false" {
		return false
	}
	return newParent || !created && before.inherit == "false"
}

// parentHolds is the parent guard's judgement of where c puts the
// namespace, with assumed applied: a new parent must be a tenant and close
// no cycle (parentPlace), and a namespace that comes to inherit through it
// must not join one going away (parentStays), nor pass what it gains down
// through one going away below it (subtreeStays).
func (g *Guards) parentHolds(c hierarchyChange, assumed whatif.Assumed) decision {
	if c.newParent {
		if d := g.parentPlace(c.name, c.parent, assumed); !d.allowed {
			return d
		}
	}
	if c.joins {
		if d := g.parentStays(c.name, c.parent, assumed); !d.allowed {
			return d
		}
		if d := g.subtreeStays(c, assumed); !d.allowed {
			return d
		}
	}
	return allow()
}

// lockedLoss lists the locked items c takes out of the views of the
// namespace and its subtree, with assumed applied (and then the source
// writes admitted a moment ago too): DESIGN.md's first invariant, each
// needs unlock.
func (g *Guards) lockedLoss(c hierarchyChange, assumed whatif.Assumed) ([]whatif.LockedItem, error) {
	if assumed == nil {
		return g.mirror.Losses.LockedLossPending(c.name, c.next, nil, whatif.Pending{})
	}
	var lost []whatif.LockedItem
	for _, pending := range g.recent.pendingWays() {
		l, err := g.mirror.Losses.LockedLossPending(c.name, c.next, assumed, pending)
		if err != nil {
			return nil, err
		}
		lost = unionLocked(lost, l)
	}
	return lost, nil
}

// admit records c as a change the parent guard admitted, which later
// judgements assume until the mirror shows it (assumptions.go), if judging
// it again under the lock, with the assumptions as they are now, finds what
// prev found: no new denial and no locked item beyond those already
// allowed. Otherwise c must be judged again. A dry run is not assumed.
func (g *Guards) admit(c hierarchyChange, prev judgement) bool {
	g.hierarchy.mu.Lock()
	defer g.hierarchy.mu.Unlock()
	j := g.judgeHierarchyLocked(c)
	if !j.d.allowed || len(unionLocked(prev.lost, j.lost)) != len(prev.lost) {
		return false
	}
	if c.dryRun {
		return true
	}
	as := assumption{meta: cloneMeta(c.next), until: g.hierarchy.clock.Now().Add(g.hierarchy.ttl)}
	if c.now != nil {
		old := cloneMeta(*c.now)
		as.old = &old
	}
	g.hierarchy.put(c.name, as)
	return true
}

// unionLocked adds to a the items of b it lacks, viewers merged.
func unionLocked(a, b []whatif.LockedItem) []whatif.LockedItem {
	at := map[lockedKey]int{}
	for i, it := range a {
		at[lockedKey{resource: it.Resource, namespace: it.Namespace, name: it.Name}] = i
	}
	for _, it := range b {
		k := lockedKey{resource: it.Resource, namespace: it.Namespace, name: it.Name}
		i, ok := at[k]
		if !ok {
			at[k] = len(a)
			a = append(a, whatif.LockedItem{Resource: it.Resource, Namespace: it.Namespace, Name: it.Name, Viewers: slices.Clone(it.Viewers)})
			continue
		}
		for _, v := range it.Viewers {
			if !slices.Contains(a[i].Viewers, v) {
				a[i].Viewers = append(a[i].Viewers, v)
			}
		}
		slices.Sort(a[i].Viewers)
	}
	return a
}

// namespaceChange decodes the old and new namespace of a CREATE or UPDATE
// of a namespace (or of its status or finalize subresource). ok is false
// when there is nothing to guard, or the request can't be decoded: d then
// is the answer.
func namespaceChange(req *admissionv1.AdmissionRequest) (old, obj *unstructured.Unstructured, d decision, ok bool) {
	if !namespaceRequest(req) {
		return nil, nil, allow(), false
	}
	old, err := decode(req.OldObject)
	if err != nil {
		return nil, nil, deny("decoding the old namespace: %v", err), false
	}
	obj, err = decode(req.Object)
	if err != nil {
		return nil, nil, deny("decoding the namespace: %v", err), false
	}
	if obj == nil {
		return nil, nil, allow(), false
	}
	return old, obj, decision{}, true
}

// namespaceRequest reports whether req is a namespace's CREATE or UPDATE,
// of the namespace or of a subresource that saves its metadata.
func namespaceRequest(req *admissionv1.AdmissionRequest) bool {
	return req.Resource.Group == "" && req.Resource.Resource == "namespaces" &&
		(req.SubResource == "" || req.SubResource == "status" || req.SubResource == "finalize") &&
		(req.Operation == admissionv1.Create || req.Operation == admissionv1.Update)
}
