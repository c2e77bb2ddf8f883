package registry_test

import (
	"context"
	"net/http"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

var _ rest.Watcher = &registry.Storage{}

func TestStorageWatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		namespace string // of the request; "" watches all namespaces
		opts      *metainternalversion.ListOptions
		viewerErr error
		wantErr   func(error) bool
		// wantNamespace and the want* fields below are what the viewer is asked.
		wantNamespace   string
		wantRV          string
		wantSendInitial *bool
		wantBookmarks   bool
		wantName        string
		// wantMatched are the view items (viewItems) Matches accepts; nil:
		// Matches must be nil.
		wantMatched []string
	}{
		{
			name: "one namespace from a resourceVersion, with bookmarks", namespace: "team-a",
			opts:          &metainternalversion.ListOptions{Watch: true, ResourceVersion: "123", AllowWatchBookmarks: true},
			wantNamespace: "team-a", wantRV: "123", wantBookmarks: true,
		},
		{
			name: "nil options", namespace: "team-b",
			wantNamespace: "team-b",
		},
		{
			name:          "all namespaces",
			opts:          &metainternalversion.ListOptions{Watch: true},
			wantNamespace: "",
		},
		{
			name: "watch-list: sendInitialEvents true", namespace: "team-a",
			opts: &metainternalversion.ListOptions{Watch: true, SendInitialEvents: ptr.To(true), AllowWatchBookmarks: true,
				ResourceVersionMatch: "NotOlderThan"},
			wantNamespace: "team-a", wantSendInitial: ptr.To(true), wantBookmarks: true,
		},
		{
			name: "sendInitialEvents false", namespace: "team-a",
			opts:          &metainternalversion.ListOptions{Watch: true, SendInitialEvents: ptr.To(false), ResourceVersion: "7"},
			wantNamespace: "team-a", wantSendInitial: ptr.To(false), wantRV: "7",
		},
		{
			name:          "metadata.namespace narrows an all-namespaces watch to one view",
			opts:          &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.namespace", "team-b")},
			wantNamespace: "team-b",
			wantMatched:   []string{"team-b/dept-rb", "team-b/org-viewers"},
		},
		{
			name:          "metadata.namespace of another namespace than the request's",
			namespace:     "team-a",
			opts:          &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.namespace", "team-b")},
			wantNamespace: "team-a",
			wantMatched:   []string{"team-b/dept-rb", "team-b/org-viewers"},
		},
		{
			name:          "metadata.namespace not equal does not narrow",
			opts:          &metainternalversion.ListOptions{FieldSelector: fields.OneTermNotEqualSelector("metadata.namespace", "team-a")},
			wantNamespace: "",
			wantMatched:   []string{"team-b/dept-rb", "team-b/org-viewers"},
		},
		{
			name:          "metadata.name limits the watch to one name",
			opts:          &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "org-viewers")},
			wantNamespace: "", wantName: "org-viewers",
			wantMatched: []string{"team-a/org-viewers", "team-b/org-viewers"},
		},
		{
			name:          "metadata.name not equal is no name",
			namespace:     "team-a",
			opts:          &metainternalversion.ListOptions{FieldSelector: fields.OneTermNotEqualSelector("metadata.name", "org-viewers")},
			wantNamespace: "team-a",
			wantMatched:   []string{"team-a/local-rb", "team-b/dept-rb"},
		},
		{
			name: "metadata.namespace and metadata.name together",
			opts: &metainternalversion.ListOptions{FieldSelector: fields.AndSelectors(
				fields.OneTermEqualSelector("metadata.namespace", "team-a"),
				fields.OneTermEqualSelector("metadata.name", "local-rb"))},
			wantNamespace: "team-a", wantName: "local-rb",
			wantMatched: []string{"team-a/local-rb"},
		},
		{
			name:          "label selector",
			opts:          &metainternalversion.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{v1alpha1.LabelScope: "global"})},
			wantNamespace: "",
			wantMatched:   []string{"team-a/org-viewers", "team-b/org-viewers"},
		},
		{
			name:      "label and field selectors together",
			namespace: "team-b",
			opts: &metainternalversion.ListOptions{
				LabelSelector: labels.SelectorFromSet(labels.Set{"team": "team-b"}),
				FieldSelector: fields.OneTermNotEqualSelector("metadata.name", "org-viewers"),
			},
			wantNamespace: "team-b",
			wantMatched:   []string{"team-b/dept-rb"},
		},
		{
			name:    "unsupported field selector",
			opts:    &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("roleRef.name", "view")},
			wantErr: apierrors.IsBadRequest,
		},
		{
			name:      "unsupported field beside a supported one",
			namespace: "team-a",
			opts: &metainternalversion.ListOptions{FieldSelector: fields.AndSelectors(
				fields.OneTermEqualSelector("metadata.name", "org-viewers"),
				fields.OneTermEqualSelector("status.phase", "x"))},
			wantErr: apierrors.IsBadRequest,
		},
		{
			name:      "viewer API errors pass through",
			namespace: "team-a",
			opts:      &metainternalversion.ListOptions{ResourceVersion: "1"},
			viewerErr: apierrors.NewServiceUnavailable("sources not synced"),
			wantErr:   apierrors.IsServiceUnavailable,
			// The viewer was asked.
			wantNamespace: "team-a", wantRV: "1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			viewer := newFakeViewer("rolebindings", viewItems()...)
			viewer.err = tt.viewerErr
			s := registry.NewStorage(group, kinds.RoleBindings(), viewer)
			ctx := genericapirequest.WithNamespace(context.Background(), tt.namespace)
			w, err := s.Watch(ctx, tt.opts)
			calls := viewer.watchCalls()
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Fatalf("Watch = %v, %v; want a matching error", w, err)
				}
				if apierrors.IsBadRequest(err) {
					if len(calls) != 0 {
						t.Errorf("viewer Watch calls = %+v, want none for a bad request", calls)
					}
					return
				}
			} else {
				if err != nil {
					t.Fatalf("Watch: %v", err)
				}
				if w != viewer.watcher {
					t.Errorf("Watch returned %v, want the viewer's watch", w)
				}
			}
			if len(calls) != 1 {
				t.Fatalf("viewer Watch calls = %+v, want one", calls)
			}
			got := calls[0]
			if got.namespace != tt.wantNamespace {
				t.Errorf("namespace = %q, want %q", got.namespace, tt.wantNamespace)
			}
			if got.req.ResourceVersion != tt.wantRV {
				t.Errorf("ResourceVersion = %q, want %q", got.req.ResourceVersion, tt.wantRV)
			}
			if !reflect.DeepEqual(got.req.SendInitialEvents, tt.wantSendInitial) {
				t.Errorf("SendInitialEvents = %v, want %v", ptr.Deref(got.req.SendInitialEvents, false), ptr.Deref(tt.wantSendInitial, false))
			}
			if got.req.AllowBookmarks != tt.wantBookmarks {
				t.Errorf("AllowBookmarks = %v, want %v", got.req.AllowBookmarks, tt.wantBookmarks)
			}
			if got.req.Name != tt.wantName {
				t.Errorf("Name = %q, want %q", got.req.Name, tt.wantName)
			}
			if tt.wantMatched == nil {
				if got.req.Matches != nil {
					t.Error("Matches is set, want nil without selectors")
				}
				return
			}
			if got.req.Matches == nil {
				t.Fatalf("Matches is nil, want it to accept %q", tt.wantMatched)
			}
			var matched []runtime.Object
			for _, it := range viewItems() {
				if got.req.Matches(it) {
					matched = append(matched, it)
				}
			}
			if k := keys(matched); !reflect.DeepEqual(k, tt.wantMatched) {
				t.Errorf("Matches accepts %q, want %q", k, tt.wantMatched)
			}
		})
	}
}

// TestStorageWatchErrorStream checks that a watch the viewer cannot serve
// from its version answers as kube-apiserver's watch cache does: a stream
// whose one event is the ERROR (410 Expired, 504 Timeout), then its end.
func TestStorageWatchErrorStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		viewerErr error
		wantCode  int32
	}{
		{name: "too old or another instance's", viewerErr: apierrors.NewResourceExpired("too old"), wantCode: http.StatusGone},
		{name: "gone", viewerErr: apierrors.NewGone("gone"), wantCode: http.StatusGone},
		{name: "too large", viewerErr: apierrors.NewTimeoutError("too large", 1), wantCode: http.StatusGatewayTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			viewer := newFakeViewer("rolebindings", viewItems()...)
			viewer.err = tt.viewerErr
			s := registry.NewStorage(group, kinds.RoleBindings(), viewer)
			ctx := genericapirequest.WithNamespace(context.Background(), "team-a")
			w, err := s.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: "1"})
			if err != nil {
				t.Fatalf("Watch: %v, want an error stream", err)
			}
			defer w.Stop()
			e, ok := <-w.ResultChan()
			if !ok || e.Type != watch.Error {
				t.Fatalf("first event = %v, %t; want ERROR", e.Type, ok)
			}
			st, isStatus := e.Object.(*metav1.Status)
			if !isStatus || st.Code != tt.wantCode {
				t.Errorf("ERROR object = %#v, want a Status with code %d", e.Object, tt.wantCode)
			}
			if _, ok := <-w.ResultChan(); ok {
				t.Error("the stream goes on after its ERROR event")
			}
		})
	}
}

// initSignal records API Priority and Fairness's watch initialization
// signal.
type initSignal struct{ signalled chan struct{} }

func (s *initSignal) Signal() {
	select {
	case <-s.signalled:
	default:
		close(s.signalled)
	}
}
func (s *initSignal) Wait() { <-s.signalled }

// TestStorageWatchReleasesSeat checks that a watch tells API Priority and
// Fairness it is initialized once it is set up, as kube-apiserver's watch
// cache does, so that an open watch does not hold a seat of its priority
// level for as long as it lasts (the server answered 429 to everyone of a
// level once a few dozen watches of it were open). It must signal for a
// watch that fails to start from its version too.
func TestStorageWatchReleasesSeat(t *testing.T) {
	t.Parallel()
	for _, viewerErr := range []error{nil, apierrors.NewResourceExpired("too old")} {
		viewer := newFakeViewer("rolebindings", viewItems()...)
		viewer.err = viewerErr
		s := registry.NewStorage(group, kinds.RoleBindings(), viewer)
		sig := &initSignal{signalled: make(chan struct{})}
		ctx := utilflowcontrol.WithInitializationSignal(genericapirequest.WithNamespace(context.Background(), "team-a"), sig)
		w, err := s.Watch(ctx, &metainternalversion.ListOptions{Watch: true})
		if err != nil {
			t.Fatalf("viewer error %v: Watch: %v", viewerErr, err)
		}
		select {
		case <-sig.signalled:
		default:
			t.Errorf("viewer error %v: the watch is open and API Priority and Fairness was not told it is initialized", viewerErr)
		}
		w.Stop()
	}
}
