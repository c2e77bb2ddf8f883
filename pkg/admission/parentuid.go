package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// NamespaceGetter reads a namespace from the host cluster:
// corev1client.NamespaceInterface.
type NamespaceGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Namespace, error)
}

func (g *Guards) trustedWithParentUID(username string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.trusted[username]
}

// parentUIDOf returns the uid of namespace parent, and false when it does
// not exist.
func (g *Guards) parentUIDOf(ctx context.Context, parent string) (string, bool, error) {
	ns, err := g.hostNamespace(ctx, parent)
	if err != nil || ns == nil {
		return "", false, err
	}
	return string(ns.UID), true, nil
}

// hostNamespace reads namespace name from kube-apiserver (nil when it does
// not exist).
func (g *Guards) hostNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	g.mu.RLock()
	n := g.namespaces
	g.mu.RUnlock()
	if n == nil {
		return nil, fmt.Errorf("no client to read namespace %s from the host cluster", name)
	}
	ns, err := n.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading namespace %s: %w", name, err)
	}
	return ns, nil
}

// parentTerminating refuses parent as namespace name's parent when
// kube-apiserver shows the deletion of parent, or of a namespace above it,
// begun: the mirror may not show it yet (parentStays asks the mirror, with
// the deletions admitted a moment ago). The parent labels are followed up
// as kube-apiserver has them, at most maxLiveAncestors reads.
func (g *Guards) parentTerminating(ctx context.Context, name, parent string) decision {
	seen := map[string]bool{}
	for cur := parent; cur != "" && !seen[cur] && len(seen) < maxLiveAncestors; {
		seen[cur] = true
		ns, err := g.hostNamespace(ctx, cur)
		if err != nil {
			return unavailable(err)
		}
		if ns == nil {
			return allow()
		}
		if ns.DeletionTimestamp != nil {
			return parentGoingAway(name, parent, cur)
		}
		cur = ns.Labels[v1alpha1.LabelParent]
	}
	return allow()
}

// maxLiveAncestors bounds the namespaces parentTerminating reads: the
// merge's depth cap and one more.
const maxLiveAncestors = 33

// ParentUID is the mutating guard: it records in implicit.dev/parent-uid
// the uid of the parent a namespace's implicit.dev/parent names when the
// label is admitted, keeps it when the label stays, and removes it with the
// label. A parent that does not exist gets no uid (the parent guard then
// refuses the label). Whatever a requester writes in the annotation is
// replaced, except by a user TrustParentUIDFrom names while the label stays.
func (g *Guards) ParentUID(ctx context.Context, req *admissionv1.AdmissionRequest) decision {
	old, obj, d, ok := namespaceChange(req)
	if !ok {
		return d
	}
	before, after := hierarchyOfNamespace(old), hierarchyOfNamespace(obj)
	want := hierarchyOf{}
	switch {
	case after.parent == "":
	case old != nil && before.parent == after.parent:
		if g.trustedWithParentUID(req.UserInfo.Username) {
			return allow()
		}
		want.parentUID, want.hasParentUID = before.parentUID, before.hasParentUID
	default:
		uid, found, err := g.parentUIDOf(ctx, after.parent)
		if err != nil {
			return unavailable(err)
		}
		want.parentUID, want.hasParentUID = uid, found
	}
	if want.hasParentUID == after.hasParentUID && want.parentUID == after.parentUID {
		return allow()
	}
	patch, err := parentUIDPatch(obj.GetAnnotations() != nil, want)
	if err != nil {
		return deny("writing the patch: %v", err)
	}
	return decision{allowed: true, patch: patch}
}

// parentUIDPatch sets or removes the annotation as want says.
func parentUIDPatch(hasAnnotations bool, want hierarchyOf) ([]byte, error) {
	key := "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(v1alpha1.AnnotationParentUID)
	// RFC 6902 operations; add replaces a member that exists (4.1).
	var op map[string]any
	switch {
	case !want.hasParentUID:
		op = map[string]any{"op": "remove", "path": key}
	case hasAnnotations:
		op = map[string]any{"op": "add", "path": key, "value": want.parentUID}
	default:
		op = map[string]any{"op": "add", "path": "/metadata/annotations", "value": map[string]string{v1alpha1.AnnotationParentUID: want.parentUID}}
	}
	return json.Marshal([]map[string]any{op})
}

// namespaceTerminating reports whether the deletion of namespace name has
// begun, as kube-apiserver has it now: read from kube-apiserver, whatever
// the mirror shows. A mirror may lag behind the deletion's start (the
// namespace controller acts on its own informers, and its DELETEs of the
// namespace's content would be refused until this replica's catch up),
// and behind a deletion that ended and a namespace created again under the
// name, which is not going away: taking the new namespace for the old would
// let anyone delete its locked content. Without a client to read it (unit
// tests of one replica), the mirror answers.
func (g *Guards) namespaceTerminating(ctx context.Context, name string) (bool, error) {
	g.mu.RLock()
	n := g.namespaces
	g.mu.RUnlock()
	if n == nil {
		return g.mirror.Namespaces.Terminating(name), nil
	}
	ns, err := g.hostNamespace(ctx, name)
	if err != nil {
		return false, err
	}
	return ns != nil && ns.DeletionTimestamp != nil, nil
}
