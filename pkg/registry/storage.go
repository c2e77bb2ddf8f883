package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// Viewer computes view items. Every object it returns is the caller's to keep.
type Viewer interface {
	// Get returns the view item name in namespace, or a NotFound error.
	Get(ctx context.Context, namespace, name string) (runtime.Object, error)
	// List returns the view items of namespace, or of every namespace when
	// namespace is "", and the resourceVersion they are current at.
	List(ctx context.Context, namespace string) ([]runtime.Object, string, error)
	// Watch watches the view of namespace, or of every namespace.
	Watch(ctx context.Context, namespace string, req WatchRequest) (watch.Interface, error)
}

// NamedLister is a Viewer that can list the items of one name only, across
// namespaces, without merging the other names: what "who sees this global
// object?" (-A with a metadata.name field selector) asks.
type NamedLister interface {
	ListNamed(ctx context.Context, namespace, name string) ([]runtime.Object, string, error)
}

// PastLister is a Viewer that lists its views as of a past version, which
// any replica issued: an exact list (resourceVersionMatch=Exact) of a
// version older than the current one, and the continuations of a list
// whose snapshot is gone. A version it cannot serve (compacted sources,
// another fingerprint) is a 410 Expired.
type PastLister interface {
	ListAt(ctx context.Context, namespace, name, version string) ([]runtime.Object, error)
}

// NamespaceIdentifier is a Viewer that says which namespace a name holds
// now: a namespace deleted and created again (another uid) is another
// namespace, perhaps someone else's, and a continuation of a list of the
// old one reads no page kept of it (pagination.go).
type NamespaceIdentifier interface {
	// NamespaceUID is the uid of the namespace of that name, "" when
	// there is none (or the viewer can't say).
	NamespaceUID(namespace string) types.UID
}

// VersionReacher is a Viewer whose replica can be brought to a version
// another replica issued that it is behind in, as a watch from that
// version is: its informers are waited for, and the sources it is behind
// in are compared with their lists at the version's revisions (a replica
// that names the same state by older revisions is at it).
type VersionReacher interface {
	// ReachVersion waits a few seconds at most until the view's state is
	// at or past version's, and returns the version of the state reached
	// and whether it is exactly version's. A version not reached in time
	// is a 504 (Timeout); ErrCannotReach says the viewer can't tell.
	ReachVersion(ctx context.Context, version string) (current string, same bool, err error)
}

// ChangeNotifier is a Viewer that says when its views change: a list of a
// version ahead of the view waits on it rather than polling.
type ChangeNotifier interface {
	// NextChange returns a channel closed at the views' next change; nil
	// when the viewer can't say.
	NextChange() <-chan struct{}
}

// ErrCannotReach is a VersionReacher's answer when its source of views
// can't catch up: the list waits for the view's own version to move.
var ErrCannotReach = errors.New("the viewer can't catch up with a version")

// WatchRequest is what a watch asks for beside its namespace.
type WatchRequest struct {
	// ResourceVersion to resume after; "" or "0" starts with the current items.
	ResourceVersion string
	// SendInitialEvents, when set, says whether the current items come first
	// (watch-list), followed by an initial-events-end bookmark.
	SendInitialEvents *bool
	AllowBookmarks    bool
	// Name limits the watch to one item name (field selector metadata.name).
	Name string
	// Matches applies the label and field selectors; nil matches all.
	Matches func(runtime.Object) bool
}

// Storage is the REST storage of one view resource.
type Storage struct {
	kind   kinds.Kind
	group  string
	viewer Viewer
	table  tableConvertor
	// snapshots keeps paginated lists for their continuations.
	snapshots *snapshots
	// clock times a list's wait for a version ahead of the view.
	clock clock.Clock
	// withheld are the kind's short names left out of discovery while
	// another resource of the host has them (WithholdShortNames).
	withheld atomic.Pointer[[]string]
}

var (
	_ rest.Storage                  = &Storage{}
	_ rest.Getter                   = &Storage{}
	_ rest.Lister                   = &Storage{}
	_ rest.Watcher                  = &Storage{}
	_ rest.Scoper                   = &Storage{}
	_ rest.KindProvider             = &Storage{}
	_ rest.SingularNameProvider     = &Storage{}
	_ rest.CategoriesProvider       = &Storage{}
	_ rest.ShortNamesProvider       = &Storage{}
	_ rest.TableConvertor           = &Storage{}
	_ rest.StorageMetadata          = &Storage{}
	_ rest.GroupVersionKindProvider = &Storage{}
)

// NewStorage returns the storage of kind's view in the API group group.
func NewStorage(group string, kind kinds.Kind, viewer Viewer) *Storage {
	return &Storage{kind: kind, group: group, viewer: viewer, table: newTableConvertor(kind), snapshots: newSnapshots(clock.RealClock{}), clock: clock.RealClock{}}
}

// WithClock sets the clock that ages the snapshots of paginated lists and
// times a list's wait for a version ahead of the view.
func (s *Storage) WithClock(c clock.Clock) *Storage {
	s.snapshots = newSnapshots(c)
	s.clock = c
	return s
}

// New implements rest.Storage.
func (s *Storage) New() runtime.Object { return s.kind.New() }

// Destroy implements rest.Storage.
func (s *Storage) Destroy() {}

// NewList implements rest.Lister.
func (s *Storage) NewList() runtime.Object { return s.kind.NewList() }

// NamespaceScoped implements rest.Scoper.
func (s *Storage) NamespaceScoped() bool { return true }

// Kind implements rest.KindProvider.
func (s *Storage) Kind() string { return s.kind.Kind }

// GetSingularName implements rest.SingularNameProvider.
func (s *Storage) GetSingularName() string { return s.kind.Singular }

// ShortNames implements rest.ShortNamesProvider: the kind's (irb, irole,
// inetpol), never the source's, which kubectl resolves to the source, and
// none that is withheld.
func (s *Storage) ShortNames() []string {
	w := s.withheld.Load()
	if w == nil || len(*w) == 0 {
		return s.kind.ShortNames
	}
	out := make([]string, 0, len(s.kind.ShortNames))
	for _, n := range s.kind.ShortNames {
		if !slices.Contains(*w, n) {
			out = append(out, n)
		}
	}
	return out
}

// WithholdShortNames leaves names (those of the kind's short names another
// resource of the host cluster has) out of ShortNames, replacing what was
// withheld, and reports whether ShortNames changed. The group is installed
// again for discovery to say so.
func (s *Storage) WithholdShortNames(names []string) bool {
	var kept []string
	for _, n := range s.kind.ShortNames {
		if slices.Contains(names, n) {
			kept = append(kept, n)
		}
	}
	prev := s.withheld.Swap(&kept)
	return prev == nil && len(kept) > 0 || prev != nil && !slices.Equal(*prev, kept)
}

// Categories implements rest.CategoriesProvider: every view is in "implicit".
func (s *Storage) Categories() []string { return []string{"implicit"} }

// ProducesMIMETypes implements rest.StorageMetadata.
func (s *Storage) ProducesMIMETypes(verb string) []string { return nil }

// ProducesObject implements rest.StorageMetadata.
func (s *Storage) ProducesObject(verb string) any { return nil }

// GroupVersionKind implements rest.GroupVersionKindProvider: the view's kind
// in the view's own group.
func (s *Storage) GroupVersionKind(containingGV schema.GroupVersion) schema.GroupVersionKind {
	return containingGV.WithKind(s.kind.Kind)
}

// Get implements rest.Getter.
func (s *Storage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns, ok := genericapirequest.NamespaceFrom(ctx)
	if !ok || ns == "" {
		return nil, apierrors.NewBadRequest("a namespace is required")
	}
	return s.viewer.Get(ctx, ns, name)
}

// List implements rest.Lister: one namespace's view, or every namespace's
// view, filtered by label selector and by metadata.name and
// metadata.namespace, paginated by limit and continue (see pagination.go).
func (s *Storage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	ns, sel, err := scope(ctx, opts)
	if err != nil {
		return nil, err
	}
	sc := listScope{
		key:       ns + "\x00" + sel.label.String() + "\x00" + sel.field.String(),
		filtered:  !sel.label.Empty() || !sel.field.Empty(),
		namespace: ns,
	}
	if st, ok := s.viewer.(Streamer); ok {
		if obj, served, err := s.listStreaming(ctx, st, opts, ns, sel, sc); served || err != nil {
			return obj, err
		}
	}
	var past pastFunc
	if pl, ok := s.viewer.(PastLister); ok {
		past = func(version string) ([]runtime.Object, error) { return listViewAt(ctx, pl, ns, sel, version) }
	}
	var reach reachFunc
	if r, ok := s.viewer.(VersionReacher); ok {
		reach = func(version string) (string, bool, error) { return r.ReachVersion(ctx, version) }
	}
	p, err := s.paginate(ctx, opts, sc, func() ([]runtime.Object, string, error) { return s.listView(ctx, ns, sel) }, past, reach)
	if err != nil {
		return nil, err
	}
	list := s.kind.NewList()
	if err := meta.SetList(list, p.items); err != nil {
		return nil, fmt.Errorf("list of %s: %w", s.kind.Resource(), err)
	}
	if l, err := meta.ListAccessor(list); err == nil {
		l.SetResourceVersion(p.rv)
		l.SetContinue(p.continue_)
		l.SetRemainingItemCount(p.remaining)
	}
	return list, nil
}

// listView returns the current items of ns's view (every namespace's for
// "") that pass the selectors, and the version they are current at.
func (s *Storage) listView(ctx context.Context, ns string, sel selectors) ([]runtime.Object, string, error) {
	var items []runtime.Object
	var rv string
	var err error
	if name, ok := sel.field.RequiresExactMatch("metadata.name"); ok {
		if nl, ok := s.viewer.(NamedLister); ok {
			items, rv, err = nl.ListNamed(ctx, ns, name)
		} else {
			items, rv, err = s.viewer.List(ctx, ns)
		}
	} else {
		items, rv, err = s.viewer.List(ctx, ns)
	}
	if err != nil {
		return nil, "", err
	}
	kept := make([]runtime.Object, 0, len(items))
	for _, it := range items {
		if sel.matches(it) {
			kept = append(kept, it)
		}
	}
	return kept, rv, nil
}

// listViewAt returns the items of ns's view (every namespace's for "")
// as of version that pass the selectors.
func listViewAt(ctx context.Context, pl PastLister, ns string, sel selectors, version string) ([]runtime.Object, error) {
	name, _ := sel.field.RequiresExactMatch("metadata.name")
	items, err := pl.ListAt(ctx, ns, name, version)
	if err != nil {
		return nil, err
	}
	kept := make([]runtime.Object, 0, len(items))
	for _, it := range items {
		if sel.matches(it) {
			kept = append(kept, it)
		}
	}
	return kept, nil
}

// Watch implements rest.Watcher: changes of one namespace's view or of every
// namespace's, with the same selectors as List.
func (s *Storage) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	ns, sel, err := scope(ctx, opts)
	if err != nil {
		return nil, err
	}
	req := WatchRequest{Matches: sel.matches}
	if name, ok := sel.field.RequiresExactMatch("metadata.name"); ok {
		req.Name = name
	}
	if sel.label.Empty() && sel.field.Empty() {
		req.Matches = nil
	}
	if opts != nil {
		req.ResourceVersion = opts.ResourceVersion
		req.SendInitialEvents = opts.SendInitialEvents
		req.AllowBookmarks = opts.AllowWatchBookmarks
	}
	w, err := s.viewer.Watch(ctx, ns, req)
	// The watch is set up (its initial items are taken): API Priority and
	// Fairness may give its seat back, as kube-apiserver's watch cache
	// does. Without this signal every open watch would hold a seat of its
	// priority level for as long as it lasts, and a few dozen watchers of
	// one level would have the server answer 429 to the rest of it.
	utilflowcontrol.WatchInitialized(ctx)
	if err != nil {
		return errorStream(err)
	}
	return w, nil
}

// errorStream answers a watch the viewer cannot serve from its version as
// kube-apiserver's watch cache does: a 410 Expired (too old, or not this
// instance's) or a 504 Timeout (too large) is the stream's one ERROR event,
// after which it ends. Other errors fail the request.
func errorStream(err error) (watch.Interface, error) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !(apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || apierrors.IsTimeout(err)) {
		return nil, err
	}
	st := status.Status()
	ch := make(chan watch.Event, 1)
	ch <- watch.Event{Type: watch.Error, Object: &st}
	close(ch)
	return watch.NewProxyWatcher(ch), nil
}

// scope returns the namespace a list or watch reads ("" for all) and its
// selectors. A field selector on metadata.namespace narrows an
// all-namespaces request to one namespace's view without computing the others.
func scope(ctx context.Context, opts *metainternalversion.ListOptions) (string, selectors, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	sel, err := selectorsOf(opts)
	if err != nil {
		return "", sel, err
	}
	if v, ok := sel.field.RequiresExactMatch("metadata.namespace"); ok && ns == "" {
		ns = v
	}
	return ns, sel, nil
}

// selectors are a request's label and field selectors.
type selectors struct {
	label labels.Selector
	field fields.Selector
}

func selectorsOf(opts *metainternalversion.ListOptions) (selectors, error) {
	sel := selectors{label: labels.Everything(), field: fields.Everything()}
	if opts != nil && opts.LabelSelector != nil {
		sel.label = opts.LabelSelector
	}
	if opts != nil && opts.FieldSelector != nil {
		sel.field = opts.FieldSelector
	}
	return sel, checkFieldSelector(sel.field)
}

// matches reports whether a view item passes the selectors.
func (sel selectors) matches(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	return sel.label.Matches(labels.Set(m.GetLabels())) &&
		sel.field.Matches(fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()})
}

// checkFieldSelector rejects fields other than metadata.name and metadata.namespace.
func checkFieldSelector(sel fields.Selector) error {
	for _, r := range sel.Requirements() {
		if r.Field != "metadata.name" && r.Field != "metadata.namespace" {
			return apierrors.NewBadRequest(fmt.Sprintf("field selector %q: only metadata.name and metadata.namespace are supported", r.Field))
		}
	}
	return nil
}

// ConvertToTable implements rest.TableConvertor.
func (s *Storage) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	if l, ok := obj.(*StreamList); ok {
		// A table of a whole list (no limit: kubectl pages by 500) reads
		// every item.
		whole, err := l.Whole()
		if err != nil {
			return nil, err
		}
		obj = whole
	}
	return s.table.ConvertToTable(ctx, obj, opts)
}

// RejectWrite returns the 405 MethodNotSupported error of a write to name in
// namespace (either may be empty), naming the source object to edit instead:
// the winning source when the item is in the view, otherwise where one could
// be created.
func (s *Storage) RejectWrite(ctx context.Context, verb, namespace, name string) *apierrors.StatusError {
	view := s.kind.Resource() + "." + s.group
	src := s.kind.Source.GroupResource().String()
	where := fmt.Sprintf("edit the source %s instead", src)
	switch {
	case namespace != "" && name != "":
		obj, err := s.viewer.Get(ctx, namespace, name)
		m, merr := meta.Accessor(obj)
		if err == nil && merr == nil {
			where = fmt.Sprintf("edit the source %s %q in namespace %q instead", src, name, m.GetLabels()[v1alpha1.LabelSourceNamespace])
			break
		}
		where = fmt.Sprintf("create or edit %s %q in namespace %q, one of its ancestors, or the global namespace instead", src, name, namespace)
	case namespace != "":
		where = fmt.Sprintf("create or edit %s in namespace %q, one of its ancestors, or the global namespace instead", src, namespace)
	}
	msg := fmt.Sprintf("%s is a read-only view: %s is not supported; %s", view, verb, where)
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusMethodNotAllowed,
		Reason:  metav1.StatusReasonMethodNotAllowed,
		Message: msg,
		Details: &metav1.StatusDetails{Group: s.group, Kind: s.kind.Resource(), Name: name},
	}}
}
