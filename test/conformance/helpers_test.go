package conformance

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
)

// converge bounds how long a source change may take to show in a view.
const converge = 30 * time.Second

// target is one side of a comparison: native RoleBindings from
// kube-apiserver, or the rolebindings view through the aggregator.
type target string

const (
	native target = "native"
	view   target = "view"
)

// path is the collection path of target's RoleBindings in namespace.
func (tg target) path(namespace string) string {
	if tg == native {
		return "/apis/rbac.authorization.k8s.io/v1/namespaces/" + namespace + "/rolebindings"
	}
	return "/apis/implicit.dev/v1alpha1/namespaces/" + namespace + "/rolebindings"
}

var worlds atomic.Int64

// world is a namespace whose local RoleBindings are the same items in the
// native collection and in the view.
type world struct {
	t    *testing.T
	ns   string
	kube kubernetes.Interface
	http *http.Client
	host string
}

// newWorld creates a namespace holding the RoleBindings names (labelled
// app=<name>, plus labels) and waits until its view holds the same names.
func newWorld(t *testing.T, names []string, labels map[string]map[string]string) *world {
	t.Helper()
	cfg := cp.AdminConfig()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ns: fmt.Sprintf("conf-%d", worlds.Add(1)), kube: kube, http: hc, host: strings.TrimSuffix(cfg.Host, "/")}
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", w.ns, err)
	}
	for _, n := range names {
		w.create(n, labels[n])
	}
	w.waitViewNames(names...)
	return w
}

// roleBinding binds the ClusterRole view to the group "conformance:<name>".
func roleBinding(namespace, name string, labels map[string]string) *rbacv1.RoleBinding {
	return testfixture.GroupBinding(metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels}, "view", "conformance:"+name)
}

// create creates RoleBinding name: the change both sides see.
func (w *world) create(name string, labels map[string]string) {
	w.t.Helper()
	if _, err := w.kube.RbacV1().RoleBindings(w.ns).Create(context.Background(), roleBinding(w.ns, name, labels), metav1.CreateOptions{}); err != nil {
		w.t.Fatalf("creating rolebinding %s/%s: %v", w.ns, name, err)
	}
}

// relabel replaces RoleBinding name's labels.
func (w *world) relabel(name string, labels map[string]string) {
	w.t.Helper()
	rb, err := w.kube.RbacV1().RoleBindings(w.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	rb.Labels = labels
	if _, err := w.kube.RbacV1().RoleBindings(w.ns).Update(context.Background(), rb, metav1.UpdateOptions{}); err != nil {
		w.t.Fatalf("updating rolebinding %s/%s: %v", w.ns, name, err)
	}
}

// delete deletes RoleBinding name.
func (w *world) delete(name string) {
	w.t.Helper()
	err := w.kube.RbacV1().RoleBindings(w.ns).Delete(context.Background(), name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		w.t.Fatalf("deleting rolebinding %s/%s: %v", w.ns, name, err)
	}
}

// waitViewNames waits until the view lists exactly names.
func (w *world) waitViewNames(names ...string) {
	w.t.Helper()
	want := append([]string(nil), names...)
	sort.Strings(want)
	var got []string
	err := wait.PollUntilContextTimeout(w.t.Context(), 100*time.Millisecond, converge, true, func(ctx context.Context) (bool, error) {
		l := w.list(view, nil)
		if l.Code != http.StatusOK {
			return false, nil
		}
		got = l.Names
		return strings.Join(got, ",") == strings.Join(want, ","), nil
	})
	if err != nil {
		w.t.Fatalf("view of %s lists %v, want %v", w.ns, got, want)
	}
}

// url is target's collection URL with query q.
func (w *world) url(tg target, q url.Values) string {
	u := w.host + tg.path(w.ns)
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// listResult is what a list answered.
type listResult struct {
	Code   int
	Reason metav1.StatusReason
	// Message and Status of an error.
	Status *metav1.Status
	Names  []string
	Meta   metav1.ListMeta
}

// list GETs target's collection with query q.
func (w *world) list(tg target, q url.Values) listResult {
	w.t.Helper()
	resp, err := w.http.Get(w.url(tg, q))
	if err != nil {
		w.t.Fatalf("list %s: %v", tg, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatalf("list %s: %v", tg, err)
	}
	r := listResult{Code: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		r.Status = &metav1.Status{}
		if err := json.Unmarshal(body, r.Status); err != nil {
			w.t.Fatalf("list %s: status %d: %s", tg, resp.StatusCode, body)
		}
		r.Reason = r.Status.Reason
		return r
	}
	var l struct {
		Metadata metav1.ListMeta `json:"metadata"`
		Items    []struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		w.t.Fatalf("list %s: %v: %s", tg, err, body)
	}
	r.Meta = l.Metadata
	for _, it := range l.Items {
		r.Names = append(r.Names, it.Metadata.Name)
	}
	return r
}

// listRV is target's current list resourceVersion.
func (w *world) listRV(tg target) string {
	w.t.Helper()
	l := w.list(tg, nil)
	if l.Code != http.StatusOK || l.Meta.ResourceVersion == "" {
		w.t.Fatalf("list %s: %d %s, resourceVersion %q", tg, l.Code, l.Reason, l.Meta.ResourceVersion)
	}
	return l.Meta.ResourceVersion
}

// event is a watch event as the suite compares it.
type event struct {
	Type       string
	Name       string
	RV         string
	InitialEnd bool
	Labels     map[string]string
	// Code and Reason of an ERROR event.
	Code   int32
	Reason metav1.StatusReason
}

// String is the event's shape: its type, the item's name, the
// initial-events-end annotation, an error's code and reason.
func (e event) String() string {
	switch {
	case e.Type == "BOOKMARK" && e.InitialEnd:
		return "BOOKMARK(initial-events-end)"
	case e.Type == "BOOKMARK":
		return "BOOKMARK"
	case e.Type == "ERROR":
		return fmt.Sprintf("ERROR(%d %s)", e.Code, e.Reason)
	}
	return e.Type + " " + e.Name
}

// stream is an open watch.
type stream struct {
	Code   int
	Reason metav1.StatusReason
	events chan event
	cancel context.CancelFunc
	// closed is closed when the server ends the stream.
	closed chan struct{}
}

// watch opens a watch of target with query q (watch=true is added).
func (w *world) watch(tg target, q url.Values) *stream {
	w.t.Helper()
	q2 := url.Values{}
	for k, v := range q {
		q2[k] = v
	}
	q2.Set("watch", "true")
	ctx, cancel := context.WithCancel(context.Background())
	w.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.url(tg, q2), nil)
	if err != nil {
		w.t.Fatal(err)
	}
	s := &stream{cancel: cancel, events: make(chan event, 1000), closed: make(chan struct{})}
	resp, err := w.http.Do(req)
	if err != nil {
		cancel()
		w.t.Fatalf("watch %s: %v", tg, err)
	}
	s.Code = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var st metav1.Status
		if err := json.Unmarshal(body, &st); err == nil {
			s.Reason = st.Reason
		}
		close(s.closed)
		cancel()
		return s
	}
	go func() {
		defer close(s.closed)
		defer resp.Body.Close()
		dec := json.NewDecoder(bufio.NewReader(resp.Body))
		for {
			var raw struct {
				Type   string          `json:"type"`
				Object json.RawMessage `json:"object"`
			}
			if err := dec.Decode(&raw); err != nil {
				return
			}
			e := event{Type: raw.Type}
			if raw.Type == "ERROR" {
				var st metav1.Status
				_ = json.Unmarshal(raw.Object, &st)
				e.Code, e.Reason = st.Code, st.Reason
			} else {
				var obj struct {
					Metadata metav1.ObjectMeta `json:"metadata"`
				}
				_ = json.Unmarshal(raw.Object, &obj)
				e.Name, e.RV, e.Labels = obj.Metadata.Name, obj.Metadata.ResourceVersion, obj.Metadata.Labels
				e.InitialEnd = obj.Metadata.Annotations[metav1.InitialEventsAnnotationKey] == "true"
			}
			select {
			case s.events <- e:
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}

// until collects events until done returns true for one of them, the
// stream ends, or timeout passes; it reports whether done was met.
func (s *stream) until(timeout time.Duration, done func(event) bool) ([]event, bool) {
	var out []event
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case e := <-s.events:
			out = append(out, e)
			if done(e) {
				return out, true
			}
		case <-s.closed:
			// Drain what was decoded before the end.
			for {
				select {
				case e := <-s.events:
					out = append(out, e)
					if done(e) {
						return out, true
					}
				default:
					return out, false
				}
			}
		case <-timer.C:
			return out, false
		}
	}
}

// isOpen reports whether the server still holds the stream open.
func (s *stream) isOpen() bool {
	select {
	case <-s.closed:
		return false
	default:
		return true
	}
}

// shapes renders events without periodic bookmarks (sent on the server's
// schedule, not the request's), and reports whether any bookmark came.
func shapes(events []event) (out []string, bookmarks bool) {
	for _, e := range events {
		if e.Type == "BOOKMARK" {
			bookmarks = true
			if !e.InitialEnd {
				continue
			}
		}
		out = append(out, e.String())
	}
	return out, bookmarks
}

func query(kv ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	return q
}
