package registry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// Pagination follows kube-apiserver's lists (k8s.io/apiserver/pkg/storage
// and its watch cache): items in the order of their storage key
// "namespace/name" (bytes); limit returns at most that many with an opaque
// continue token, and remainingItemCount when no selector filters the list;
// resourceVersion "0" ignores limit, as the watch cache does.
//
// A viewer that streams (Streamer) answers the lists of its current view
// from a stream, item by item (stream.go); what follows is the whole-view
// path, for the other requests and viewers.
//
// A view is computed on read. A paginated list keeps the items it
// computed, a snapshot, for snapshotTTL: every continuation of it reads the
// same snapshot, at the first page's resourceVersion, as from etcd. A
// continuation whose snapshot is gone (expired, evicted, too large to
// keep, another replica, a restart) is served from the current view when
// the view has not changed since (the same resourceVersion), otherwise
// from the view at the token's version when the viewer lists past states
// (PastLister: the sources listed at its revisions); when that fails as
// compacted, or without a PastLister, it answers 410 Expired with a fresh
// token in its ListMeta, which continues from the current view: the answer
// kube-apiserver gives for a compacted snapshot. An exact list
// (resourceVersionMatch=Exact) of an older version reads that state too.
// A list or continuation of a version ahead of the view's waits for it,
// catching up as a watch does when the viewer can (VersionReacher).
const (
	// snapshotTTL bounds how long a snapshot is kept: etcd's default
	// compaction interval, within which kube-apiserver serves continuations.
	snapshotTTL = 5 * time.Minute
	// maxSnapshots bounds the snapshots kept per view resource, the oldest
	// dropped first.
	maxSnapshots = 16
	// maxSnapshotItems bounds the items of one kept snapshot, and of all the
	// snapshots of a view resource together: view items are distinct
	// objects (one per namespace for a global source), so sixteen
	// snapshots of an -A list could otherwise pin gigabytes.
	maxSnapshotItems = 100_000
)

// continueToken is the decoded value of metadata.continue: the list
// continues after the item whose key is Start, from the snapshot at RV, or
// from the current view when RV is "" (a token from a 410 Expired).
type continueToken struct {
	Version string `json:"v"`
	RV      string `json:"rv"`
	Start   string `json:"start"`
}

// tokenVersion versions the token format.
const tokenVersion = "implicit.dev/continue/v1"

func encodeContinue(rv, start string) string {
	b, err := json.Marshal(continueToken{Version: tokenVersion, RV: rv, Start: start})
	if err != nil { // a struct of strings always marshals
		panic(fmt.Sprintf("registry: encoding a continue token: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeContinue parses a continue token; a malformed one is a 400, as in
// kube-apiserver.
func decodeContinue(s string) (continueToken, error) {
	var t continueToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	switch {
	case err != nil:
	case t.Version != tokenVersion:
		err = fmt.Errorf("unrecognized token version %q", t.Version)
	case t.Start == "":
		err = fmt.Errorf("no start key")
	case t.RV != "" && !isVersion(t.RV):
		err = fmt.Errorf("resourceVersion %q is not a version", t.RV)
	}
	if err != nil {
		return continueToken{}, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
	}
	return t, nil
}

// isVersion reports whether rv is a version a view issues, or issued
// before versions named upstream states (a decimal integer, which answers
// 410 Gone: see checkVersion).
func isVersion(rv string) bool {
	if resourceversion.IsVersion(rv) {
		return true
	}
	_, err := strconv.ParseUint(rv, 10, 64)
	return err == nil
}

// page is one response of a list: its items, version and continuation.
type page struct {
	items     []runtime.Object
	rv        string
	continue_ string
	remaining *int64
}

// listFunc lists the current view, filtered, with its version.
type listFunc func() ([]runtime.Object, string, error)

// pastFunc lists the view, filtered, as of a past version; nil for a
// viewer without past states (then those answer 410 Expired).
type pastFunc func(version string) ([]runtime.Object, error)

// listScope is what a list request reads: key names its namespace and
// selectors, so a continuation reads only a snapshot of the same request;
// filtered says a selector drops items (then, as in kube-apiserver, the
// remaining count is not given).
type listScope struct {
	key       string
	filtered  bool
	namespace string
}

// paginate answers a list request from the current view (list), the view
// at a past version (past: an exact list of an older version), or a kept
// snapshot, by opts' resourceVersion, resourceVersionMatch, limit and
// continue.
func (s *Storage) paginate(ctx context.Context, opts *metainternalversion.ListOptions, sc listScope, list listFunc, past pastFunc, reach reachFunc) (page, error) {
	var o metainternalversion.ListOptions
	if opts != nil {
		o = *opts
	}
	if o.Continue != "" {
		tok, err := decodeContinue(o.Continue)
		if err != nil {
			return page{}, err
		}
		return s.continueList(ctx, tok, o.Limit, sc, list, past, reach)
	}
	uid := s.namespaceUID(sc.namespace)
	changed := s.nextChange()
	items, rv, err := list()
	if err != nil {
		return page{}, err
	}
	// A version ahead of this replica (another's informers were faster,
	// or name the same state by later revisions): wait briefly for this
	// one's, as kube-apiserver's watch cache waits for its store, catching
	// up as a watch from that version does (reach), then answer 504.
	for deadline := s.clock.Now().Add(listAheadWait); ; {
		err := checkVersion(o.ResourceVersion, o.ResourceVersionMatch, rv)
		if err == nil {
			break
		}
		exact := o.ResourceVersionMatch == metav1.ResourceVersionMatchExact
		if past != nil && exact && resourceversion.CompareStrings(o.ResourceVersion, rv) == resourceversion.Older {
			// That state, as kube-apiserver answers an exact list of an
			// older revision from etcd; 410 only once compacted.
			if items, err = past(o.ResourceVersion); err != nil {
				return page{}, err
			}
			rv = o.ResourceVersion
			break
		}
		if !apierrors.IsTimeout(err) {
			return page{}, err
		}
		if reach != nil {
			got, gotRV, rerr := reachList(o.ResourceVersion, rv, exact, list, past, reach)
			if !errors.Is(rerr, ErrCannotReach) {
				if rerr != nil {
					return page{}, rerr
				}
				items, rv = got, gotRV
				break
			}
			reach = nil // wait for the view's own version, below
		}
		if !s.awaitChange(ctx, changed, deadline) {
			return page{}, err
		}
		changed = s.nextChange()
		if items, rv, err = list(); err != nil {
			return page{}, err
		}
	}
	keys := sortByKey(items)
	limit := o.Limit
	if o.ResourceVersion == "0" {
		limit = 0 // the watch cache ignores limit for "any version" lists
	}
	p := pageOf(items, keys, 0, limit, rv, sc.filtered)
	if p.continue_ != "" {
		s.snapshots.put(snapshotKey{rv: rv, scope: sc.key, uid: uid}, items, keys)
	}
	return p, nil
}

// reachFunc brings the viewer to a version ahead of its own
// (VersionReacher.ReachVersion); nil for a viewer that can't.
type reachFunc func(version string) (current string, same bool, err error)

// reachList answers a list at version, ahead of the view's version rv,
// once reach has brought the viewer there: the current view, stamped with
// version when it is exactly version's state; otherwise, for an exact
// list (or a continuation), the view at version (past), and for
// NotOlderThan the current view, at or past version's. A version not
// reached is a 504 Too large.
func reachList(version, rv string, exact bool, list listFunc, past pastFunc, reach reachFunc) ([]runtime.Object, string, error) {
	current, same, err := reach(version)
	if apierrors.IsTimeout(err) {
		return nil, "", tooLargeVersion(version, rv)
	}
	if err != nil {
		return nil, "", err
	}
	items, rv, err := list()
	switch {
	case err != nil:
		return nil, "", err
	case same && rv == current:
		return items, version, nil
	case !exact:
		return items, rv, nil
	case past == nil:
		return nil, "", apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %s (%s)", version, rv))
	}
	if items, err = past(version); err != nil {
		return nil, "", err
	}
	return items, version, nil
}

// continueList serves the page after tok's start key.
func (s *Storage) continueList(ctx context.Context, tok continueToken, limit int64, sc listScope, list listFunc, past pastFunc, reach reachFunc) (page, error) {
	uid := s.namespaceUID(sc.namespace)
	if tok.RV != "" {
		if snap, ok := s.snapshots.get(snapshotKey{rv: tok.RV, scope: sc.key, uid: uid}); ok {
			return pageOf(snap.items, snap.keys, snap.after(tok.Start), limit, tok.RV, sc.filtered), nil
		}
	}
	changed := s.nextChange()
	items, rv, err := list()
	if err != nil {
		return page{}, err
	}
	// A token of a replica ahead of this one (its informers were faster):
	// wait briefly for this one's, as for a list from such a version, then
	// 504; the token is not too old, and a 410 would have the pager list
	// in full.
	for deadline := s.clock.Now().Add(listAheadWait); tok.RV != ""; {
		if o := resourceversion.CompareStrings(tok.RV, rv); o != resourceversion.Newer && o != resourceversion.Concurrent {
			break
		}
		if reach != nil {
			// Caught up as a watch from the token's version is: the
			// view at that version, the current one when it is that
			// state. A compacted one is answered below (410 with a
			// fresh token).
			got, gotRV, err := reachList(tok.RV, rv, true, list, past, reach)
			if err == nil {
				items, rv = got, gotRV
				break
			}
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				break
			}
			if !errors.Is(err, ErrCannotReach) {
				return page{}, err
			}
			reach = nil
		}
		if !s.awaitChange(ctx, changed, deadline) {
			return page{}, tooLargeVersion(tok.RV, rv)
		}
		changed = s.nextChange()
		if items, rv, err = list(); err != nil {
			return page{}, err
		}
	}
	// Any replica continues a token of another at the same state: its
	// views, and their order, are the same; one of an older state, from
	// the view at that state, as kube-apiserver continues at the first
	// page's revision until it is compacted.
	if tok.RV != "" && past != nil && resourceversion.CompareStrings(tok.RV, rv) == resourceversion.Older {
		pastItems, err := past(tok.RV)
		switch {
		case err == nil:
			items, rv = pastItems, tok.RV
		case !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err):
			return page{}, err
		}
	}
	if tok.RV != "" && resourceversion.CompareStrings(tok.RV, rv) != resourceversion.Same {
		expired := apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. " +
			"You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. " +
			"Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
		expired.ErrStatus.ListMeta.Continue = encodeContinue("", tok.Start)
		return page{}, expired
	}
	keys := sortByKey(items)
	snap := snapshot{items: items, keys: keys}
	p := pageOf(items, keys, snap.after(tok.Start), limit, rv, sc.filtered)
	if p.continue_ != "" {
		s.snapshots.put(snapshotKey{rv: rv, scope: sc.key, uid: uid}, items, keys)
	}
	return p, nil
}

// checkVersion answers whether a view current at rv serves a list asking
// for version want with match. Versions name upstream states (see
// pkg/resourceversion), whichever replica issued them: for NotOlderThan (or
// no match), any state at or past want's in every component serves it; for
// Exact, only want's state. A version older than the current one cannot be
// served from the current view: 410 Expired, unless the viewer lists past
// states (PastLister: paginate serves it from that state then). A
// version ahead of this replica in some component: 504 "Too large resource
// version", as from kube-apiserver's watch cache. A version of another
// fingerprint (another binary's semantics or configuration, or a decimal
// version of a binary before vector versions) cannot be ordered: 410
// Expired, so that the client lists again from scratch. A malformed one is
// a 400, as from kube-apiserver.
func checkVersion(want string, match metav1.ResourceVersionMatch, rv string) error {
	if want == "" || want == "0" {
		return nil
	}
	if !isVersion(want) {
		// As kube-apiserver answers a list: a 400 (a watch, 410; see Watch).
		return apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q: not a version of this server", want))
	}
	switch resourceversion.CompareStrings(want, rv) {
	case resourceversion.Same:
		return nil
	case resourceversion.Older:
		if match == metav1.ResourceVersionMatchExact {
			return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %s (%s)", want, rv))
		}
		return nil
	case resourceversion.Newer, resourceversion.Concurrent:
		return tooLargeVersion(want, rv)
	}
	return apierrors.NewResourceExpired(fmt.Sprintf("resourceVersion %s was issued under other merge semantics or configuration (a rollout changed them): list again", want))
}

// listAheadWait bounds a list's wait for a version ahead of this replica,
// as kube-apiserver's watch cache bounds its own (3 s); it looks again at
// each change of the view, or every listAheadPoll for a viewer that can't
// say when it changes.
const (
	listAheadWait = 3 * time.Second
	listAheadPoll = 250 * time.Millisecond
)

// nextChange is the viewer's signal of its next change (ChangeNotifier);
// nil without one. Take it before reading the view, so that a change after
// the read is not missed.
func (s *Storage) nextChange() <-chan struct{} {
	if n, ok := s.viewer.(ChangeNotifier); ok {
		return n.NextChange()
	}
	return nil
}

// awaitChange waits, on the storage's clock, until changed is closed (the
// view moved), or listAheadPoll passed when the viewer can't say (changed
// nil), but not past deadline. It reports false at the deadline, or when
// the request ended (ctx).
func (s *Storage) awaitChange(ctx context.Context, changed <-chan struct{}, deadline time.Time) bool {
	left := deadline.Sub(s.clock.Now())
	if left <= 0 {
		return false
	}
	if changed == nil {
		left = min(left, listAheadPoll)
	}
	t := s.clock.NewTimer(left)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-changed:
		return true
	case <-t.C():
		return s.clock.Now().Before(deadline)
	}
}

// tooLargeVersion is kube-apiserver's answer to a version ahead of its
// cache (storage.NewTooLargeResourceVersionError, whose numbers a vector
// version is not): a 504 with the cause client-go's reflector looks for.
func tooLargeVersion(want, rv string) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %s, current: %s", want, rv), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

// pageOf returns up to limit items (all when limit <= 0) from index from.
// The items of a page with a continuation are copies: the snapshot kept
// for the next pages shares none of its objects with a response being
// encoded.
func pageOf(items []runtime.Object, keys []string, from int, limit int64, rv string, filtered bool) page {
	rest := items[from:]
	if limit <= 0 || int64(len(rest)) <= limit {
		if from > 0 {
			rest = deepCopies(rest)
		}
		return page{items: rest, rv: rv}
	}
	p := page{items: deepCopies(rest[:limit]), rv: rv, continue_: encodeContinue(rv, keys[from+int(limit)-1])}
	if !filtered {
		n := int64(len(rest)) - limit
		p.remaining = &n
	}
	return p
}

func deepCopies(objs []runtime.Object) []runtime.Object {
	out := make([]runtime.Object, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopyObject()
	}
	return out
}

// sortByKey orders items by storage key, namespace/name, as etcd does, and
// returns the keys. Views list in that order already but for namespaces
// whose name continues another's with '-' or '.'.
func sortByKey(items []runtime.Object) []string {
	keys := make([]string, len(items))
	for i, it := range items {
		keys[i] = keyOf(it)
	}
	if !sort.StringsAreSorted(keys) {
		sort.Sort(byKey{items: items, keys: keys})
	}
	return keys
}

func keyOf(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetNamespace() + "/" + m.GetName()
}

type byKey struct {
	items []runtime.Object
	keys  []string
}

func (b byKey) Len() int           { return len(b.keys) }
func (b byKey) Less(i, j int) bool { return b.keys[i] < b.keys[j] }
func (b byKey) Swap(i, j int) {
	b.keys[i], b.keys[j] = b.keys[j], b.keys[i]
	b.items[i], b.items[j] = b.items[j], b.items[i]
}

// snapshotKey names a kept snapshot: the version it is current at, what
// it lists, and the uid of the namespace it lists (read before the list;
// "" for every namespace's, or a viewer that can't say). A continuation
// reads a snapshot only for the namespace of that name now: one deleted
// and created again since is another, perhaps someone else's, and the
// continuation is served as one whose snapshot is gone (the view at the
// token's version answers 410 for another namespace, as a watch does).
type snapshotKey struct {
	rv, scope string
	uid       types.UID
}

// namespaceUID is the uid of namespace now, for a viewer that says
// (NamespaceIdentifier); "" for every namespace's list.
func (s *Storage) namespaceUID(namespace string) types.UID {
	if ni, ok := s.viewer.(NamespaceIdentifier); ok && namespace != "" {
		return ni.NamespaceUID(namespace)
	}
	return ""
}

// snapshot is the sorted items of a paginated list.
type snapshot struct {
	items []runtime.Object
	keys  []string
	taken time.Time
}

// after is the index of the first item whose key follows start.
func (s snapshot) after(start string) int {
	return sort.Search(len(s.keys), func(i int) bool { return s.keys[i] > start })
}

// snapshots keeps recent paginated lists, bounded in number, size and age.
// Its items are shared by the pages read from them: the registry never
// modifies a listed object, and the API server only encodes them.
type snapshots struct {
	clock clock.PassiveClock
	mu    sync.Mutex
	kept  map[snapshotKey]snapshot
	// items counts the items of every kept snapshot, at most
	// maxSnapshotItems.
	items int
	// streams are the streams of paginated lists (Streamer): a frozen
	// state whose size is the sources', whatever the number of items,
	// bounded by maxSnapshots and snapshotTTL.
	streams map[snapshotKey]streamSnapshot
}

// streamSnapshot is a kept stream and when it was taken.
type streamSnapshot struct {
	stream ItemStream
	taken  time.Time
}

func newSnapshots(c clock.PassiveClock) *snapshots {
	return &snapshots{clock: c, kept: map[snapshotKey]snapshot{}, streams: map[snapshotKey]streamSnapshot{}}
}

// getStream returns the stream kept for k, nil if none.
func (s *snapshots) getStream(k snapshotKey) ItemStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	return s.streams[k].stream
}

// putStream keeps stream for k's continuations.
func (s *snapshots) putStream(k snapshotKey, stream ItemStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	if _, ok := s.streams[k]; ok {
		return
	}
	for len(s.streams) >= maxSnapshots {
		var oldest snapshotKey
		var at time.Time
		for key, snap := range s.streams {
			if at.IsZero() || snap.taken.Before(at) {
				oldest, at = key, snap.taken
			}
		}
		delete(s.streams, oldest)
	}
	s.streams[k] = streamSnapshot{stream: stream, taken: s.clock.Now()}
}

func (s *snapshots) get(k snapshotKey) (snapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	snap, ok := s.kept[k]
	return snap, ok
}

func (s *snapshots) put(k snapshotKey, items []runtime.Object, keys []string) {
	if len(items) > maxSnapshotItems {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	if _, ok := s.kept[k]; ok {
		return
	}
	for len(s.kept) >= maxSnapshots || len(s.kept) > 0 && s.items+len(items) > maxSnapshotItems {
		var oldest snapshotKey
		var at time.Time
		for key, snap := range s.kept {
			if at.IsZero() || snap.taken.Before(at) {
				oldest, at = key, snap.taken
			}
		}
		s.dropLocked(oldest)
	}
	s.kept[k] = snapshot{items: items, keys: keys, taken: s.clock.Now()}
	s.items += len(items)
}

// dropLocked forgets the snapshot k. Called with mu held.
func (s *snapshots) dropLocked(k snapshotKey) {
	s.items -= len(s.kept[k].items)
	delete(s.kept, k)
}

// expireLocked drops the snapshots older than snapshotTTL. Called with mu held.
func (s *snapshots) expireLocked() {
	now := s.clock.Now()
	for k, snap := range s.kept {
		if now.Sub(snap.taken) >= snapshotTTL {
			s.dropLocked(k)
		}
	}
	for k, snap := range s.streams {
		if now.Sub(snap.taken) >= snapshotTTL {
			delete(s.streams, k)
		}
	}
}

// len is the number of snapshots kept.
func (s *snapshots) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.kept) + len(s.streams)
}

// itemCount is the number of items the kept snapshots hold.
func (s *snapshots) itemCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.items
}
