package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
)

// NamespaceDeletions guards the deletion of a namespace whose sources
// others inherit (a parent, or the global namespace): its locked sources
// leave every view that inherits them, and its children lose what it and
// its ancestors pass down. That needs unlock on each locked item lost, as
// opting out or re-parenting does. Judged against the mirror alone and with
// the parent guard's assumptions.
func (g *Guards) NamespaceDeletions(ctx context.Context, req *admissionv1.AdmissionRequest) decision {
	if req.Resource.Group != "" || req.Resource.Resource != "namespaces" || req.SubResource != "" || req.Operation != admissionv1.Delete {
		return allow()
	}
	// The deletion that counts was admitted: the namespace controller may
	// finish it (refusing its DELETE would leave the namespace stuck
	// Terminating once its content is gone). That judged the subtree the
	// namespace had when its deletion began, and nothing may join it since
	// (parentStays: no new parent, namespace created or opting in under a
	// namespace going away, or below one), so the DELETEs that follow take
	// no more than was judged. docs/security.md, "Held in Terminating",
	// names what remains.
	// Whether it terminates is read from the request's old object, the
	// namespace as kube-apiserver has it, never from the mirror alone: a
	// mirror that lags may still show a namespace of that name that was
	// deleted before this one was created.
	terminating, err := namespaceDeleting(req)
	if err != nil {
		if terminating, err = g.namespaceTerminating(ctx, req.Name); err != nil {
			return unavailable(fmt.Errorf("reading whether namespace %s is being deleted: %w", req.Name, err))
		}
	}
	if terminating {
		return allow()
	}
	if d := g.mirrorShows(ctx, req); !d.allowed {
		return d
	}
	g.hierarchy.mu.Lock()
	assumed, undeleted := g.hierarchy.waysLocked()
	g.hierarchy.mu.Unlock()
	// The namespace itself is judged as the request found it, whatever an
	// assumption says, as the parent guard judges a namespace it changes
	// (bothWays): this replica may assume it gone already, from an earlier
	// decision of this very deletion (a turn on the shared record that
	// conflicted, or kube-apiserver asking again), and a namespace assumed
	// gone has no subtree to lose anything.
	standing, hasStanding := assumed[req.Name]
	now, hasNow := namespaceFound(req)
	if hasNow {
		assumed[req.Name], undeleted[req.Name] = now, now
	}
	var lost []whatif.LockedItem
	for _, a := range []whatif.Assumed{nil, assumed, undeleted} {
		l, err := g.mirror.Losses.DeletionLoss(req.Name, a)
		if err != nil {
			return unavailable(fmt.Errorf("computing the locked items deleting namespace %s would take: %w", req.Name, err))
		}
		lost = unionLocked(lost, l)
	}
	if len(lost) > 0 {
		if d := g.mayUnlockAll(ctx, req, fmt.Sprintf("deleting namespace %q", req.Name), lost, map[lockedKey]bool{}); !d.allowed {
			return d
		}
	}
	// Allowed: say who loses inherited items (a warning is never worth
	// failing a deletion for).
	var warnings []string
	if losers, err := g.mirror.Losses.DeletionLosers(req.Name); err == nil && len(losers) > 0 {
		warnings = append(warnings, DeletionWarning(req.Name, losers))
	}
	// Until the mirror shows it gone, the namespace is assumed gone: a
	// child moved below it a moment later must not be judged as still
	// inheriting through it.
	if req.DryRun == nil || !*req.DryRun {
		if meta, found := g.mirror.Namespaces.NamespaceMeta(req.Name); found {
			// What the deletion replaced: the namespace as a change
			// admitted a moment ago left it, else as kube-apiserver
			// sent it (undeletedLocked reads it back).
			switch {
			case hasStanding && !standing.Gone:
				meta = standing
			case hasNow:
				meta = now
			}
			g.hierarchy.mu.Lock()
			prev, ok := g.hierarchy.byName[req.Name]
			g.hierarchy.byName[req.Name] = assumption{
				meta:  whatif.NamespaceMeta{Gone: true},
				old:   &meta,
				until: laterThan(prev.until, ok, g.hierarchy.clock.Now().Add(g.hierarchy.ttl)),
			}
			g.hierarchy.mu.Unlock()
		}
	}
	return allow(warnings...)
}

// DeletionWarning is the warning of a namespace's deletion that takes
// inherited items from losers: they lose their parent, and what it and the
// namespaces above it passed down.
func DeletionWarning(namespace string, losers []string) string {
	const show = 10
	names := strings.Join(losers, ", ")
	if len(losers) > show {
		names = fmt.Sprintf("%s and %d more", strings.Join(losers[:show], ", "), len(losers)-show)
	}
	return fmt.Sprintf("implicit.dev: deleting namespace %s takes inherited items from %d namespaces: %s", namespace, len(losers), names)
}

// namespaceDeleting reports whether the namespace a DELETE request's old
// object carries has a deletionTimestamp; an error when the request
// carries none (kube-apiserver always sends it).
func namespaceDeleting(req *admissionv1.AdmissionRequest) (bool, error) {
	old, err := decode(req.OldObject)
	if err != nil {
		return false, err
	}
	if old == nil {
		return false, errors.New("the request carries no old object")
	}
	return old.GetDeletionTimestamp() != nil, nil
}

// namespaceFound is the labels and annotations of the namespace a DELETE
// request's old object carries (kube-apiserver always sends it).
func namespaceFound(req *admissionv1.AdmissionRequest) (whatif.NamespaceMeta, bool) {
	old, err := decode(req.OldObject)
	if err != nil || old == nil {
		return whatif.NamespaceMeta{}, false
	}
	return whatif.NamespaceMeta{Labels: old.GetLabels(), Annotations: old.GetAnnotations()}, true
}

// namespaceUIDs tells the uid of the namespace of a name the mirror holds
// (*whatif.Index does): a mirror that can't tell (the unit tests' fakes)
// is not waited for.
type namespaceUIDs interface {
	NamespaceUID(namespace string) (types.UID, bool)
}

// defaultMirrorWait bounds how long a namespace deletion waits for the
// mirror to show the namespace it deletes: the informers' usual lag is far
// shorter.
const defaultMirrorWait = 2 * time.Second

// mirrorShows waits until the mirror shows the namespace req deletes as
// kube-apiserver has it (its uid), at most mirrorWait: what its deletion
// takes is computed from the mirror's subtree of that name, and a mirror
// that lags may hold no namespace of that name, or one deleted before this
// one was created, whose subtree (the children whose parent-uid names this
// one) it can't tell. Unavailable (503: the failure policy applies, the
// client retries) if it does not.
func (g *Guards) mirrorShows(ctx context.Context, req *admissionv1.AdmissionRequest) decision {
	uids, ok := g.mirror.Namespaces.(namespaceUIDs)
	old, err := decode(req.OldObject)
	if !ok || err != nil || old == nil || old.GetUID() == "" {
		return allow()
	}
	shows := func(context.Context) (bool, error) {
		uid, found := uids.NamespaceUID(req.Name)
		return found && uid == old.GetUID(), nil
	}
	if done, _ := shows(ctx); done {
		return allow()
	}
	g.mu.RLock()
	limit := g.mirrorWait
	g.mu.RUnlock()
	if limit > 0 {
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, limit, false, shows); err == nil {
			return allow()
		}
	}
	return unavailable(fmt.Errorf("namespace %s (uid %s): this replica's informers do not show it yet, so what its deletion takes can't be judged; try again", req.Name, old.GetUID()))
}
