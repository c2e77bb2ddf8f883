package admission

import (
	"context"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
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
	if g.index.Terminating(req.Name) {
		return allow()
	}
	g.hierarchy.mu.Lock()
	assumed := g.hierarchy.currentLocked(g.index)
	g.hierarchy.mu.Unlock()
	var lost []LockedItem
	for _, a := range []Assumed{nil, assumed} {
		l, err := g.index.DeletionLoss(req.Name, a)
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
	if losers, err := g.index.DeletionLosers(req.Name); err == nil && len(losers) > 0 {
		warnings = append(warnings, DeletionWarning(req.Name, losers))
	}
	// Until the mirror shows it gone, the namespace is assumed gone: a
	// child moved below it a moment later must not be judged as still
	// inheriting through it.
	if req.DryRun == nil || !*req.DryRun {
		if meta, found := g.index.NamespaceMeta(req.Name); found {
			g.hierarchy.mu.Lock()
			g.hierarchy.byName[req.Name] = assumption{
				meta:  NamespaceMeta{Gone: true},
				old:   &meta,
				until: g.hierarchy.clock.Now().Add(g.hierarchy.ttl),
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
