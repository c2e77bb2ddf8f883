package robustness

import (
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// keyOf is a view item's namespace/name.
func keyOf(u *unstructured.Unstructured) string { return u.GetNamespace() + "/" + u.GetName() }

// summary is what a client must agree on with a fresh list about one
// item: where it comes from (scope, source namespace and uid, the source's
// resourceVersion), and what a lock blocked or a candidate replaced.
func summary(u *unstructured.Unstructured) string {
	a, l := u.GetAnnotations(), u.GetLabels()
	s := fmt.Sprintf("%s:%s/%s@%s", l["implicit.dev/scope"], l["implicit.dev/source-namespace"], a["implicit.dev/source-uid"], a["implicit.dev/source-resource-version"])
	if c := a["implicit.dev/candidate"]; c != "" {
		s += " candidate=" + c
	}
	if c := a["implicit.dev/conflict"]; c != "" {
		s += " conflict"
	}
	return s
}

// streamStats counts what a client's watch streams broke.
type streamStats struct {
	events int
	// duplicateAdded: ADDED for an item the client held; unheld: MODIFIED
	// or DELETED for one it did not; outOfOrder: a version older than (or
	// concurrent with) the one before it in the stream, or an object's
	// event not newer than its last.
	duplicateAdded, unheld, outOfOrder int
	samples                            []string
}

func (s *streamStats) add(o streamStats) {
	s.events += o.events
	s.duplicateAdded += o.duplicateAdded
	s.unheld += o.unheld
	s.outOfOrder += o.outOfOrder
	s.samples = append(s.samples, o.samples...)
}

// eventLog follows what one client holds, by the raw events and lists it
// receives, and checks each event against it.
type eventLog struct {
	name string

	mu   sync.Mutex
	held map[string]string // key -> summary
	// last is the stream's latest version; byKey each object's.
	last  string
	byKey map[string]string
	// lastAt is when the client received last.
	lastAt time.Time
	stats  streamStats
}

func newEventLog(name string) *eventLog {
	return &eventLog{name: name, held: map[string]string{}, byKey: map[string]string{}}
}

// listed replaces what the client holds by a list's items at version.
func (l *eventLog) listed(items []unstructured.Unstructured, version string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = make(map[string]string, len(items))
	for i := range items {
		l.held[keyOf(&items[i])] = summary(&items[i])
	}
	l.byKey = map[string]string{}
	l.last, l.lastAt = version, time.Now()
}

// initialEvents starts a watch-list: the client holds what its events
// bring.
func (l *eventLog) initialEvents() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = map[string]string{}
	l.byKey = map[string]string{}
	l.last = ""
}

// resumed starts a watch from version: its events must be newer.
func (l *eventLog) resumed(version string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = version
}

// event checks and applies one watch event; it returns the event's
// version ("" for an ERROR).
func (l *eventLog) event(ev watch.Event) string {
	if ev.Type == watch.Error {
		return ""
	}
	obj, ok := ev.Object.(*unstructured.Unstructured)
	if !ok {
		return ""
	}
	version := obj.GetResourceVersion()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last != "" {
		if o := rv.CompareStrings(l.last, version); o != rv.Older && o != rv.Same {
			l.failLocked(&l.stats.outOfOrder, "%s %s %s after %s in its stream: %s", ev.Type, keyOf(obj), version, l.last, o)
		}
	}
	l.last, l.lastAt = version, time.Now()
	if ev.Type == watch.Bookmark {
		if obj.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
			// The end of a watch-list's initial events: what it holds is
			// a list at version; order restarts from there.
			l.byKey = map[string]string{}
		}
		return version
	}
	l.stats.events++
	key := keyOf(obj)
	if prev, ok := l.byKey[key]; ok && rv.CompareStrings(prev, version) != rv.Older {
		l.failLocked(&l.stats.outOfOrder, "%s %s %s after its event %s", ev.Type, key, version, prev)
	}
	l.byKey[key] = version
	_, had := l.held[key]
	switch ev.Type {
	case watch.Added:
		if had {
			l.failLocked(&l.stats.duplicateAdded, "ADDED %s %s, which it holds (%s)", key, version, l.held[key])
		}
		l.held[key] = summary(obj)
	case watch.Modified:
		if !had {
			l.failLocked(&l.stats.unheld, "MODIFIED %s %s, which it does not hold", key, version)
		}
		l.held[key] = summary(obj)
	case watch.Deleted:
		if !had {
			l.failLocked(&l.stats.unheld, "DELETED %s %s, which it does not hold", key, version)
		}
		delete(l.held, key)
	}
	return version
}

func (l *eventLog) failLocked(counter *int, format string, args ...any) {
	*counter++
	if len(l.stats.samples) < 10 {
		l.stats.samples = append(l.stats.samples, l.name+": "+fmt.Sprintf(format, args...))
	}
}

// holding is a copy of what the client holds.
func (l *eventLog) holding() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.held)
}

// lastVersion is the client's latest version and when it got it.
func (l *eventLog) lastVersion() (string, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last, l.lastAt
}

func (l *eventLog) snapshot() streamStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats
	s.samples = append([]string(nil), s.samples...)
	return s
}

// inScope reports whether key (namespace/name) is in a client's scope
// (a namespace, or "" for every namespace).
func inScope(scope, key string) bool {
	return scope == "" || strings.HasPrefix(key, scope+"/")
}
