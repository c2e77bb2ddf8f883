package registry_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// pagedItems are five view items in two namespaces, "a-b" and "a", in the
// viewer's order (by namespace, then name); kube-apiserver's order is by
// the key "namespace/name", where "a-b/..." comes before "a/...".
func pagedItems() []runtime.Object {
	return []runtime.Object{
		viewRoleBinding("a", "x", merge.ScopeLocal, "a"),
		viewRoleBinding("a", "y", merge.ScopeLocal, "a"),
		viewRoleBinding("a-b", "p", merge.ScopeLocal, "a-b"),
		viewRoleBinding("a-b", "q", merge.ScopeGlobal, "implicit-global"),
		viewRoleBinding("a-b", "r", merge.ScopeLocal, "a-b"),
	}
}

// listPage lists every namespace with opts.
func listPage(t *testing.T, s *registry.Storage, opts *metainternalversion.ListOptions) (*rbacv1.RoleBindingList, error) {
	t.Helper()
	obj, err := s.List(genericapirequest.WithNamespace(context.Background(), ""), opts)
	if err != nil {
		return nil, err
	}
	return obj.(*rbacv1.RoleBindingList), nil
}

// whileListing calls list on another goroutine and, once it has read
// viewer (and found it behind the version it asks for), calls catchUp: the
// list must then wait for the view to reach that version.
func whileListing(t *testing.T, viewer *fakeViewer, list func() (*rbacv1.RoleBindingList, error), catchUp func()) (*rbacv1.RoleBindingList, error) {
	t.Helper()
	_, before := viewer.calls()
	type result struct {
		l   *rbacv1.RoleBindingList
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := list()
		done <- result{l, err}
	}()
	testwait.For(t, "the list to read the view", func() bool {
		_, lists := viewer.calls()
		return len(lists) > len(before)
	})
	catchUp()
	r := <-done
	return r.l, r.err
}

func names(l *rbacv1.RoleBindingList) []string {
	out := make([]string, 0, len(l.Items))
	for _, it := range l.Items {
		out = append(out, it.Namespace+"/"+it.Name)
	}
	return out
}

// pageMeta renders a page's list metadata for comparison.
type pageMeta struct {
	names     []string
	rv        string
	more      bool
	remaining *int64
}

func metaOf(l *rbacv1.RoleBindingList) pageMeta {
	return pageMeta{names: names(l), rv: l.ResourceVersion, more: l.Continue != "", remaining: l.RemainingItemCount}
}

func count(n int64) *int64 { return &n }

// TestListPages walks a list page by page, as a client's pager does.
func TestListPages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		limit int64
		rv    string
		label string
		want  []pageMeta
	}{
		{
			name: "limit 2: three pages in key order, all at the first page's version", limit: 2,
			want: []pageMeta{
				{names: []string{"a-b/p", "a-b/q"}, rv: fakeRV, more: true, remaining: count(3)},
				{names: []string{"a-b/r", "a/x"}, rv: fakeRV, more: true, remaining: count(1)},
				{names: []string{"a/y"}, rv: fakeRV},
			},
		},
		{
			name: "a limit of all items: one page", limit: 5,
			want: []pageMeta{{names: []string{"a-b/p", "a-b/q", "a-b/r", "a/x", "a/y"}, rv: fakeRV}},
		},
		{
			name: `resourceVersion "0" ignores limit, as the watch cache`, limit: 2, rv: "0",
			want: []pageMeta{{names: []string{"a-b/p", "a-b/q", "a-b/r", "a/x", "a/y"}, rv: fakeRV}},
		},
		{
			name: "a selector: no remaining count, as kube-apiserver", limit: 2, label: v1alpha1.LabelScope + "=local",
			want: []pageMeta{
				{names: []string{"a-b/p", "a-b/r"}, rv: fakeRV, more: true},
				{names: []string{"a/x", "a/y"}, rv: fakeRV},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := registry.NewStorage(group, kinds.RoleBindings(), newFakeViewer("rolebindings", pagedItems()...))
			opts := &metainternalversion.ListOptions{Limit: tt.limit, ResourceVersion: tt.rv}
			if tt.label != "" {
				opts.LabelSelector = labels.SelectorFromSet(labels.Set{v1alpha1.LabelScope: "local"})
			}
			var got []pageMeta
			for range 10 {
				l, err := listPage(t, s, opts)
				if err != nil {
					t.Fatalf("page %d: %v", len(got)+1, err)
				}
				got = append(got, metaOf(l))
				if l.Continue == "" {
					break
				}
				opts = &metainternalversion.ListOptions{Limit: tt.limit, Continue: l.Continue, LabelSelector: opts.LabelSelector}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("pages:\n got  %s\n want %s", describePages(got), describePages(tt.want))
			}
		})
	}
}

func describePages(pages []pageMeta) string {
	var b strings.Builder
	for _, p := range pages {
		rem := "nil"
		if p.remaining != nil {
			rem = strconv.FormatInt(*p.remaining, 10)
		}
		fmt.Fprintf(&b, "[%s rv=%s more=%t remaining=%s] ", strings.Join(p.names, ","), p.rv, p.more, rem)
	}
	return b.String()
}

// TestListContinueConsistency checks what a continuation reads once the view
// has changed: the first page's snapshot while it is kept; after it expired,
// the current view if unchanged, else 410 Expired with a token that
// continues from the current view.
func TestListContinueConsistency(t *testing.T) {
	t.Parallel()
	const later = "f7.v4712"
	added := viewRoleBinding("a-b", "qq", merge.ScopeLocal, "a-b")
	tests := []struct {
		name    string
		age     time.Duration
		change  bool
		want    []string // the second page
		wantRV  string
		expired bool
	}{
		{name: "kept snapshot, view changed: the snapshot", age: time.Minute, change: true, want: []string{"a-b/r", "a/x"}, wantRV: fakeRV},
		{name: "expired snapshot, view unchanged: the view", age: 6 * time.Minute, want: []string{"a-b/r", "a/x"}, wantRV: fakeRV},
		{name: "expired snapshot, view changed: 410 with a fresh token", age: 6 * time.Minute, change: true, expired: true, want: []string{"a-b/qq", "a-b/r"}, wantRV: later},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := clocktesting.NewFakeClock(time.Now())
			viewer := newFakeViewer("rolebindings", pagedItems()...)
			s := registry.NewStorage(group, kinds.RoleBindings(), viewer).WithClock(clock)
			first, err := listPage(t, s, &metainternalversion.ListOptions{Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			clock.SetTime(clock.Now().Add(tt.age))
			if tt.change {
				viewer.change(later, append(pagedItems(), added)...)
			}
			token := first.Continue
			second, err := listPage(t, s, &metainternalversion.ListOptions{Limit: 2, Continue: token})
			if tt.expired {
				var status apierrors.APIStatus
				if !apierrors.IsResourceExpired(err) || !errorsAs(err, &status) || status.Status().ListMeta.Continue == "" {
					t.Fatalf("continue = %v, want 410 Expired with a fresh token", err)
				}
				token = status.Status().ListMeta.Continue
				second, err = listPage(t, s, &metainternalversion.ListOptions{Limit: 2, Continue: token})
			}
			if err != nil {
				t.Fatalf("continue: %v", err)
			}
			if got := names(second); !reflect.DeepEqual(got, tt.want) || second.ResourceVersion != tt.wantRV {
				t.Errorf("second page = %v at %s, want %v at %s", got, second.ResourceVersion, tt.want, tt.wantRV)
			}
		})
	}
}

func errorsAs(err error, status *apierrors.APIStatus) bool { return errors.As(err, status) }

// TestListContinueMalformed checks that a token the server did not write is
// a 400, as in kube-apiserver.
func TestListContinueMalformed(t *testing.T) {
	t.Parallel()
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, token := range []string{
		"not base64!",
		enc("not json"),
		enc(`{"v":"meta.k8s.io/v1","rv":"1","start":"a/x"}`),
		enc(`{"v":"implicit.dev/continue/v1","rv":"1","start":""}`),
		enc(`{"v":"implicit.dev/continue/v1","rv":"abc","start":"a/x"}`),
	} {
		s := registry.NewStorage(group, kinds.RoleBindings(), newFakeViewer("rolebindings", pagedItems()...))
		_, err := listPage(t, s, &metainternalversion.ListOptions{Limit: 2, Continue: token})
		if !apierrors.IsBadRequest(err) {
			t.Errorf("continue %q: %v, want 400 BadRequest", token, err)
		}
	}
}

// TestListResourceVersion checks which versions a list serves, by
// resourceVersionMatch, against a view current at fakeRV.
func TestListResourceVersion(t *testing.T) {
	t.Parallel()
	// Versions name upstream states (pkg/resourceversion): f7 is the
	// fingerprint of the fake view's semantics, v4711 its one revision.
	const otherFingerprint = "f8.v4711" // another binary's or configuration's
	tests := []struct {
		name  string
		rv    string
		match metav1.ResourceVersionMatch
		code  int32 // 0: served
		cause metav1.CauseType
	}{
		{name: "unset", rv: ""},
		{name: "any", rv: "0"},
		{name: "current, not older than", rv: fakeRV, match: metav1.ResourceVersionMatchNotOlderThan},
		{name: "current, exact", rv: fakeRV, match: metav1.ResourceVersionMatchExact},
		{name: "older, no match: not older than", rv: "f7.v4700"},
		{name: "older, not older than", rv: "f7.v4700", match: metav1.ResourceVersionMatchNotOlderThan},
		{name: "older, exact: expired", rv: "f7.v4700", match: metav1.ResourceVersionMatchExact, code: http.StatusGone},
		{name: "newer: too large", rv: "f7.v4800", match: metav1.ResourceVersionMatchNotOlderThan, code: http.StatusGatewayTimeout, cause: metav1.CauseTypeResourceVersionTooLarge},
		{name: "newer, exact: too large", rv: "f7.v4800", match: metav1.ResourceVersionMatchExact, code: http.StatusGatewayTimeout, cause: metav1.CauseTypeResourceVersionTooLarge},
		{name: "the same state from another replica (another hint): served", rv: "f7.v4711.s1c0000000001267", match: metav1.ResourceVersionMatchExact},
		{name: "another fingerprint: expired", rv: otherFingerprint, match: metav1.ResourceVersionMatchNotOlderThan, code: http.StatusGone},
		{name: "a decimal version of a binary before vector versions: expired", rv: "1099511632487", match: metav1.ResourceVersionMatchNotOlderThan, code: http.StatusGone},
		{name: "malformed: bad request", rv: "abc", code: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := registry.NewStorage(group, kinds.RoleBindings(), newFakeViewer("rolebindings", pagedItems()...))
			l, err := listPage(t, s, &metainternalversion.ListOptions{ResourceVersion: tt.rv, ResourceVersionMatch: tt.match})
			if tt.code == 0 {
				if err != nil || len(l.Items) != 5 || l.ResourceVersion != fakeRV {
					t.Fatalf("List = %v, %v; want five items at %s", l, err, fakeRV)
				}
				return
			}
			var status apierrors.APIStatus
			if !errorsAs(err, &status) || status.Status().Code != tt.code {
				t.Fatalf("List: %v, want code %d", err, tt.code)
			}
			if tt.cause != "" && (status.Status().Details == nil || len(status.Status().Details.Causes) == 0 || status.Status().Details.Causes[0].Type != tt.cause) {
				t.Errorf("List: %#v, want cause %s", status.Status(), tt.cause)
			}
		})
	}
}

// TestListSnapshotBounds checks that no more than 16 snapshots are kept: the
// oldest one's continuation, once the view changed, is expired.
func TestListSnapshotBounds(t *testing.T) {
	t.Parallel()
	clock := clocktesting.NewFakeClock(time.Now())
	viewer := newFakeViewer("rolebindings", pagedItems()...)
	s := registry.NewStorage(group, kinds.RoleBindings(), viewer).WithClock(clock)
	var tokens []string
	for i := range 17 {
		viewer.change("f7.v"+strconv.Itoa(5000+i), pagedItems()...)
		l, err := listPage(t, s, &metainternalversion.ListOptions{Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, l.Continue)
		clock.SetTime(clock.Now().Add(time.Second))
	}
	if _, err := listPage(t, s, &metainternalversion.ListOptions{Limit: 2, Continue: tokens[0]}); !apierrors.IsResourceExpired(err) {
		t.Errorf("the 17th snapshot ago: %v, want 410 Expired", err)
	}
	if l, err := listPage(t, s, &metainternalversion.ListOptions{Limit: 2, Continue: tokens[1]}); err != nil || l.ResourceVersion != "f7.v5001" {
		t.Errorf("the 16th snapshot ago: %v, %v; want its page at 5001", l, err)
	}
}

// TestListContinueOnAnotherReplica checks that a continue token of one
// replica is continued by another at the same upstream state (the same
// vector, another replica's hint), and that one behind it answers 410 with
// a fresh token, as for a changed view.
func TestListContinueOnAnotherReplica(t *testing.T) {
	t.Parallel()
	viewerA := newFakeViewer("rolebindings", pagedItems()...)
	viewerA.change("f7.v4711.s1c0000000000001", pagedItems()...)
	a := registry.NewStorage(group, kinds.RoleBindings(), viewerA)
	first, err := listPage(t, a, &metainternalversion.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	viewerB := newFakeViewer("rolebindings", pagedItems()...)
	viewerB.change("f7.v4711.s2d0000000000005", pagedItems()...)
	b := registry.NewStorage(group, kinds.RoleBindings(), viewerB)
	second, err := listPage(t, b, &metainternalversion.ListOptions{Limit: 2, Continue: first.Continue})
	if err != nil {
		t.Fatalf("continue on the other replica: %v", err)
	}
	if got, want := names(second), []string{"a-b/r", "a/x"}; !reflect.DeepEqual(got, want) {
		t.Errorf("second page on the other replica = %v, want %v", got, want)
	}
	viewerB.change("f7.v4712.s2d0000000000006", pagedItems()...)
	if _, err := listPage(t, b, &metainternalversion.ListOptions{Limit: 2, Continue: first.Continue}); !apierrors.IsResourceExpired(err) {
		t.Errorf("continue on a replica whose view moved on: %v, want 410 Expired", err)
	}
}

// TestListWaitsForAVersionAhead checks that a list from a version this
// replica has not reached yet (another replica's informers were faster)
// waits for it, and is served once the view reaches it.
func TestListWaitsForAVersionAhead(t *testing.T) {
	t.Parallel()
	viewer := newFakeViewer("rolebindings", pagedItems()...)
	s := registry.NewStorage(group, kinds.RoleBindings(), viewer)
	l, err := whileListing(t, viewer, func() (*rbacv1.RoleBindingList, error) {
		return listPage(t, s, &metainternalversion.ListOptions{ResourceVersion: "f7.v4712", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan})
	}, func() { viewer.change("f7.v4712", pagedItems()...) })
	if err != nil || l.ResourceVersion != "f7.v4712" {
		t.Fatalf("List = %v, %v; want the view at f7.v4712", l, err)
	}
}

// TestListContinueWaitsForAVersionAhead checks that a continuation whose
// token another replica issued at a state this one has not reached yet
// (its informers are behind) waits for it, as a list from such a version
// does, and reads that state once the view reaches it, instead of
// answering 410 (client-go's pager would then list in full).
func TestListContinueWaitsForAVersionAhead(t *testing.T) {
	t.Parallel()
	viewerA := newFakeViewer("rolebindings", pagedItems()...)
	viewerA.change("f7.v4712.s1c0000000000001", pagedItems()...)
	a := registry.NewStorage(group, kinds.RoleBindings(), viewerA)
	first, err := listPage(t, a, &metainternalversion.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	viewerB := newFakeViewer("rolebindings", pagedItems()...)
	viewerB.change("f7.v4711.s2d0000000000005", pagedItems()...)
	b := registry.NewStorage(group, kinds.RoleBindings(), viewerB)
	second, err := whileListing(t, viewerB, func() (*rbacv1.RoleBindingList, error) {
		return listPage(t, b, &metainternalversion.ListOptions{Limit: 2, Continue: first.Continue})
	}, func() { viewerB.change("f7.v4712.s2d0000000000006", pagedItems()...) })
	if err != nil {
		t.Fatalf("continue on a replica behind the token: %v, want the next page once it catches up", err)
	}
	if got, want := names(second), []string{"a-b/r", "a/x"}; !reflect.DeepEqual(got, want) {
		t.Errorf("second page on the replica that caught up = %v, want %v", got, want)
	}
}
