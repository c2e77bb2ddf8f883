package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// LockIndex is what the lock guard asks of the mirror when a lock is set:
// whom the locked source would reach below it.
type LockIndex interface {
	// ObjectsUnderLock lists the namespaces that would inherit the source
	// namespace/name, locked as obj, while holding an object of that name.
	// holders are namespaces known to hold one that the mirror may not
	// show yet.
	// assumed are the namespace changes the parents guard admitted.
	ObjectsUnderLock(resource, namespace, name string, obj *unstructured.Unstructured, assumed whatif.Assumed, holders []string) ([]string, error)
	// LockedUnderLock lists the locked sources of other namespaces that the
	// source namespace/name, locked as obj, would displace, with the
	// namespace changes assumed and the source writes pending.
	LockedUnderLock(resource, namespace, name string, obj *unstructured.Unstructured, assumed whatif.Assumed, pending whatif.Pending) ([]whatif.LockedItem, error)
	// GoingAwayBelow is the first namespace of namespace's subtree
	// (namespace included) that is being deleted while namespaces below
	// it still inherit through it, or "".
	GoingAwayBelow(namespace string, assumed whatif.Assumed) string
}

// Locks: creating, changing or deleting a locked source, locking or
// unlocking one, needs the unlock verb on it.
//
// An UPDATE through the status or scale subresource changes the source as
// an update of the object does (the view shows its status; scale writes
// spec.replicas), so it needs unlock alike.
func (g *Guards) Locks(ctx context.Context, req *admissionv1.AdmissionRequest) decision {
	s, ok, err := g.source(req, webhookconfig.GuardedSubresources...)
	if !ok || (s.subresource != "" && req.Operation != admissionv1.Update) {
		return allow()
	}
	if err != nil {
		return deny("%v", err)
	}
	admittedOver := s.old // what a lock's write is stored over
	switch {
	case materialized(s.obj) || s.obj == nil && materialized(s.old):
		return allow() // a copy is no source: Materialized guards it
	case materialized(s.old):
		// A copy made the writer's own (OwnCopy removed its label): a
		// source from now on, judged as one created as written.
		s.old = nil
	}
	wasLocked, isLocked, err := g.locked(s)
	if err != nil {
		return unavailable(fmt.Errorf("reading whether %s is locked: %w", s, err))
	}
	if !wasLocked && !isLocked {
		return allow()
	}
	// A locked object goes with its namespace: whoever may delete the
	// namespace may delete what is in it, and the namespace controller,
	// which empties it, must not be stopped by a lock. A deletion can't be
	// undone, and the views below the namespace that lose the object were
	// judged at its first DELETE (NamespaceDeletions); none can join them
	// while it terminates (parentStays).
	if req.Operation == admissionv1.Delete {
		terminating, err := g.namespaceTerminating(ctx, s.namespace)
		if err != nil {
			return unavailable(fmt.Errorf("reading whether namespace %s is being deleted: %w", s.namespace, err))
		}
		if terminating {
			return allow()
		}
	}
	allowed, reason, err := g.authz.Allowed(ctx, req.UserInfo, authorizationv1.ResourceAttributes{
		Verb: UnlockVerb, Group: s.gr.Group, Resource: s.gr.Resource, Namespace: s.namespace, Name: s.name,
	})
	if err != nil {
		return unavailable(fmt.Errorf("checking the unlock permission: %w", err))
	}
	if allowed {
		// Who may lock is told why a lock can't be set now.
		if isLocked && !wasLocked && req.Operation != admissionv1.Delete && s.subresource == "" && !candidateTouched(s) {
			if d := g.openCandidate(s); !d.allowed {
				return d
			}
		}
		// A lock newly set, or a locked candidate that stands in for
		// another name than before.
		if isLocked && req.Operation != admissionv1.Delete && s.subresource == "" && (!wasLocked || standsFor(s.old) != standsFor(s.obj)) {
			if d := g.lockOverObjects(s); !d.allowed {
				return d
			}
			if d := g.lockOverLocks(ctx, req, s); !d.allowed {
				return d
			}
			if d := g.lockAboveDeletion(s); !d.allowed {
				return d
			}
		}
		if isLocked && req.Operation != admissionv1.Delete && (req.DryRun == nil || !*req.DryRun) {
			g.recent.lock(recentKey{s.resource, s.namespace, s.name}, s.obj, admittedOver)
		}
		return allow()
	}
	what := "changing it or removing the lock"
	switch {
	case s.subresource != "":
		what = fmt.Sprintf("updating its %s subresource", s.subresource)
	case req.Operation == admissionv1.Create:
		what = "creating it locked"
	case req.Operation == admissionv1.Delete:
		what = "deleting it"
	case !wasLocked:
		what = "locking it"
	}
	msg := s.String()
	if wasLocked {
		msg += fmt.Sprintf(" is locked (%s: \"true\")", v1alpha1.AnnotationLocked)
	}
	msg += fmt.Sprintf(": %s needs the %q permission on it (RBAC verb %q on %s, resourceNames [%s], in namespace %s)",
		what, UnlockVerb, UnlockVerb, s.gr, s.name, s.namespace)
	if reason != "" {
		msg += ": " + reason
	}
	return deny("%s", msg)
}

// lockOverObjects refuses to make a source of a materialized kind a locked
// item of namespaces that hold an object of their own under its name (a
// candidate: under its stable name): there that object, not the locked
// item, would be the real object engines enforce (DESIGN.md's third
// invariant). Nobody may: those objects must go first.
func (g *Guards) lockOverObjects(s source) decision {
	if !g.isMaterialized(s.resource) || s.obj == nil {
		return allow()
	}
	name := s.name
	if c, _ := candidateOf(s.obj); c != nil {
		if c.For == "" || strings.Contains(c.For, "/") {
			return allow() // malformed: the candidates guard refuses it
		}
		name = c.For
	}
	// Both ways: the mirror, then with the namespaces moved a moment ago
	// (one moved below s's namespace brings its objects along), also with
	// the deletions admitted a moment ago taken back (assumedWays).
	adopters := g.recent.adopters(s.resource, name)
	assumed, undeleted := g.assumedWays()
	var holders []string
	for _, a := range []whatif.Assumed{nil, assumed, undeleted} {
		h, err := g.mirror.Locks.ObjectsUnderLock(s.resource, s.namespace, name, s.obj, a, adopters)
		if err != nil {
			return unavailable(fmt.Errorf("reading which namespaces hold objects named %s: %w", name, err))
		}
		holders = append(holders, h...)
	}
	slices.Sort(holders)
	holders = slices.Compact(holders)
	if len(holders) == 0 {
		return allow()
	}
	return deny("%s would lock %q in namespaces that hold an object of their own under that name: %s. This kind is delivered as real objects (delivery: Materialize), so those objects, not the locked item, would be what is enforced there: delete or rename them first",
		s, name, viewers(holders))
}

// lockAboveDeletion refuses to lock a source above a namespace being
// deleted that others still inherit through: its subtree would get the
// locked item only to lose it when the namespace is gone, and that loss was
// never judged (the deletion was judged at its first DELETE, on the locks
// of then). Lock it once the namespace is gone, or before deleting it.
func (g *Guards) lockAboveDeletion(s source) decision {
	if s.obj == nil || g.isGlobal(s.namespace) {
		return allow() // global items don't come through a parent
	}
	g.hierarchy.mu.Lock()
	assumed := g.hierarchy.currentLocked()
	g.hierarchy.mu.Unlock()
	for _, a := range []whatif.Assumed{nil, assumed} {
		if away := g.mirror.Locks.GoingAwayBelow(s.namespace, a); away != "" {
			return deny("%s can't be locked while namespace %q, below it, is being deleted: the namespaces below %q would get the locked item only to lose it when the deletion ends; lock it once %q is gone",
				s, away, away, away)
		}
	}
	return allow()
}

// lockOverLocks checks that whoever locks s may unlock the locked sources
// of other namespaces it would displace below it (a namespace's own locked
// item under the same name becomes an overlay of s, and s takes the fields
// both set).
func (g *Guards) lockOverLocks(ctx context.Context, req *admissionv1.AdmissionRequest, s source) decision {
	if s.obj == nil {
		return allow()
	}
	name := standsFor(s.obj)
	if name == "" || strings.Contains(name, "/") {
		return allow()
	}
	// Both ways: the mirror alone, then with what the guards admitted a
	// moment ago (a namespace moved below s's, a lock set below it), also
	// with the deletions admitted a moment ago taken back (assumedWays).
	assumed, undeleted := g.assumedWays()
	pending := g.recent.pending()
	ways := []struct {
		assumed whatif.Assumed
		pending whatif.Pending
	}{{nil, whatif.Pending{}}, {assumed, pending}, {undeleted, pending}}
	var lost []whatif.LockedItem
	for _, w := range ways {
		p := w.pending
		// The source the lock is set on is judged as the request found
		// it, both ways: this replica may remember it admitted locked
		// already, by this very request decided before (a turn on the
		// shared record that conflicted, or kube-apiserver asking again),
		// and a lock judged from the state it makes displaces nothing.
		if name == s.name {
			p.Found(whatif.SourceRef{Resource: s.resource, Namespace: s.namespace, Name: s.name}, foundSource(s))
		}
		l, err := g.mirror.Locks.LockedUnderLock(s.resource, s.namespace, name, s.obj, w.assumed, p)
		if err != nil {
			return unavailable(fmt.Errorf("reading the locked items %s would displace: %w", s, err))
		}
		lost = unionLocked(lost, l)
	}
	if len(lost) == 0 {
		return allow()
	}
	return g.mayUnlockAll(ctx, req, fmt.Sprintf("locking %s", s), lost, map[lockedKey]bool{})
}

// foundSource is the source s as the request found it, as other
// namespaces' views show it under its own name: nil when it did not exist
// (a creation, or a copy made the writer's own), or was a candidate (shown
// under its own name in its namespace's view only).
func foundSource(s source) *unstructured.Unstructured {
	if c, _ := candidateOf(s.old); c != nil {
		return nil
	}
	return s.old
}

// standsFor is the name u shows under in views: its stable name when it is
// a candidate, its own otherwise ("" for nil).
func standsFor(u *unstructured.Unstructured) string {
	if u == nil {
		return ""
	}
	if c, _ := candidateOf(u); c != nil {
		return c.For
	}
	return u.GetName()
}

// openCandidate refuses to lock the source s while it has an open
// candidate that is not locked itself, in the mirror or admitted a moment
// ago: the candidate was written without unlock, when the source was not
// locked, and would stand in for the locked source in its canaries. Whoever
// holds unlock promotes or aborts it first. A locked candidate (a staged
// creation of a locked source, which needed unlock to write) may be
// promoted.
func (g *Guards) openCandidate(s source) decision {
	var open []string
	others, err := g.mirror.Candidates.Candidates(s.resource, s.namespace)
	if err != nil {
		return unavailable(fmt.Errorf("reading the candidates of namespace %s: %w", s.namespace, err))
	}
	inMirror := func(name string) bool {
		return slices.ContainsFunc(others, func(o whatif.CandidateSource) bool { return o.Name == name && o.For == s.name })
	}
	if c, found := g.recent.observe(recentKey{s.resource, s.namespace, s.name}, inMirror); found && !c.locked && !inMirror(c.name) {
		open = append(open, c.name)
	}
	for _, o := range others {
		if o.For == s.name && !o.Locked && !slices.Contains(open, o.Name) {
			open = append(open, o.Name)
		}
	}
	if len(open) == 0 {
		return allow()
	}
	name := open[0]
	return deny("%s has the open candidate %q: locking a source that has a candidate is refused, as the candidate was written without the lock; promote it (kubectl implicit rollout promote) or abort it (delete %q) first",
		s, name, name)
}
