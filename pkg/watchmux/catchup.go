package watchmux

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// A source's revision is that of the last change its informer delivered.
// After an informer's list, that is the newest object's, which may be
// older than the list's revision (objects deleted after the newest one was
// written are not in the list, and no event names their deletion), and an
// informer hands its handlers no list revision. A replica started after a
// deletion may then hold a version's state while its vector says it is
// behind; a quiet source would keep it behind until its next change. So a
// watch from a version ahead of this replica, after a short wait, compares
// the sources it is behind in with their lists at the version's revisions:
// a source whose mirror is what the list holds is at that revision, and its
// component moves there.

// catchUpAfter is how long a watch waits for the informers before comparing.
const catchUpAfter = 200 * time.Millisecond

// aheadWait bounds a watch's wait for a version ahead of this replica, as
// kube-apiserver's watch cache bounds its own (3 s): then 504 Too large.
const aheadWait = 3 * time.Second

// ReachVersion waits, as a watch from version does, until this replica's state
// is at or past version's: its informers catch up, or a catch-up finds
// the sources it is behind in equal to their lists at version's revisions
// (a replica that names the same state by older revisions, issue 38, case
// 5). It returns the version of the state reached, and whether that state
// is exactly version's (then a list at version is the current views, with
// nothing listed). A version not reached within aheadWait answers 504, as
// kube-apiserver answers a list ahead of its cache; another fingerprint,
// 410.
func (m *Mux) ReachVersion(ctx context.Context, version string) (current string, same bool, err error) {
	want, err := rv.Parse(version)
	if err != nil {
		return "", false, gone(version, "is not a version of this server: list again")
	}
	m.mu.RLock()
	if !m.synced {
		m.mu.RUnlock()
		return "", false, errNotSynced
	}
	if err := m.sameConfigurationLocked(version, want); err != nil {
		m.mu.RUnlock()
		return "", false, err
	}
	if err := m.reachRLocked(ctx, version, want); err != nil {
		return "", false, err
	}
	defer m.mu.RUnlock()
	return m.currentTextLocked(), want.Mid == nil && m.pos.sameStateLocked(want.Vector), nil
}

// reachRLocked waits, with mu held for reading, until this replica reaches
// want (aheadWait at most, with a catch-up), and returns with mu still held
// for reading; on an error (504), with it released.
func (m *Mux) reachRLocked(ctx context.Context, version string, want rv.Version) error {
	if m.pos.reachesLocked(want.Vector) {
		return nil
	}
	m.mu.RUnlock()
	waitCtx, cancel := context.WithTimeout(ctx, aheadWait)
	err := m.waitFor(waitCtx, want.Vector)
	cancel()
	m.mu.RLock()
	if err != nil || !m.pos.reachesLocked(want.Vector) {
		current := m.currentTextLocked()
		m.mu.RUnlock()
		return apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %s, current: %s", version, current), 1)
	}
	return nil
}

// waitFor waits until the sources have reached vector, or ctx ends.
func (m *Mux) waitFor(ctx context.Context, vector []uint64) error {
	t := m.opts.Clock.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	start := m.opts.Clock.Now()
	compared := false
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
		}
		m.mu.RLock()
		ok := m.pos.reachesLocked(vector)
		m.mu.RUnlock()
		if ok {
			return nil
		}
		if !compared && m.opts.Clock.Since(start) >= catchUpAfter {
			compared = true
			m.catchUp(ctx, vector)
		}
	}
}

// catchUp moves each source behind vector to its component when the
// source's mirror is the source's list at that revision.
func (m *Mux) catchUp(ctx context.Context, vector []uint64) {
	m.mu.RLock()
	keys := m.pos.sortedKeys()
	if len(keys) != len(vector) {
		m.mu.RUnlock()
		return
	}
	type behind struct {
		key  string
		rev  uint64
		list ListFunc
	}
	var todo []behind
	for i, k := range keys {
		if m.pos.revs[k] < vector[i] && m.pos.lists[k] != nil {
			todo = append(todo, behind{k, vector[i], m.pos.lists[k]})
		}
	}
	m.mu.RUnlock()
	for _, b := range todo {
		objs, err := b.list(ctx, strconv.FormatUint(b.rev, 10), "")
		if err != nil {
			continue
		}
		m.mu.Lock()
		if m.pos.revs[b.key] < b.rev && m.mirrorsLocked(b.key, objs) {
			// The state at b.rev is the mirror's, but the revision does
			// not move there: events the informer has not delivered yet
			// may lie before it (a creation and a deletion it lags
			// behind), and would then be stamped after it (issue 38,
			// case 4). They are dropped as they come (passedLocked); the
			// source's first change after b.rev forgets it.
			m.pos.addEqualLocked(b.key, b.rev)
		}
		m.mu.Unlock()
	}
}

// mirrorsLocked reports whether the mirror of source key holds what objs
// hold, all of what it keeps of them: the namespaces' names, uids,
// creation, labels, annotations and whether they are terminating; the
// fleet registration's presence and labels; the source objects by uid and
// resourceVersion.
func (m *Mux) mirrorsLocked(key string, objs []runtime.Object) bool {
	if key == namespacesKey {
		if len(objs) != len(m.st.namespaces) {
			return false
		}
		for _, o := range objs {
			ns, ok := o.(*corev1.Namespace)
			if !ok {
				return false
			}
			have, ok := m.st.namespaces[ns.Name]
			if !ok || have.UID != ns.UID || !have.Created.Equal(ns.CreationTimestamp.Time) ||
				!maps.Equal(have.Labels, ns.Labels) || !maps.Equal(have.Annotations, ns.Annotations) ||
				m.st.terminating.Has(ns.Name) != (ns.DeletionTimestamp != nil) {
				return false
			}
		}
		return true
	}
	if key == m.membershipKey {
		// The registration is no source of view items: the mirror keeps
		// whether it is there and its labels.
		return m.st.membership.equal(membershipOf(objs))
	}
	resource, cluster := key, ""
	for i := range key {
		if key[i] == '@' {
			resource, cluster = key[:i], key[i+1:]
			break
		}
	}
	byNS := m.st.sources[resource]
	n := 0
	for _, o := range objs {
		acc, err := meta.Accessor(o)
		if err != nil {
			return false
		}
		if v1alpha1.IsMaterialized(acc.GetLabels()) ||
			m.hub != "" && cluster == "" && acc.GetNamespace() == m.st.policy.GlobalNamespace {
			continue
		}
		have, ok := byNS[acc.GetNamespace()][acc.GetName()]
		if !ok || have.Cluster != cluster || have.UID != acc.GetUID() {
			return false
		}
		if h, err := meta.Accessor(have.Object); err != nil || h.GetResourceVersion() != acc.GetResourceVersion() {
			return false
		}
		n++
	}
	mine := 0
	for _, items := range byNS {
		for _, it := range items {
			if it.Cluster == cluster {
				mine++
			}
		}
	}
	return n == mine
}
