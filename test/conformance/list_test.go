package conformance

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// listShape is a list response without what is each side's own (the
// version's value, the continue token's bytes).
func listShape(r listResult) string {
	if r.Code != http.StatusOK {
		return fmt.Sprintf("%d %s", r.Code, r.Reason)
	}
	rem := "nil"
	if r.Meta.RemainingItemCount != nil {
		rem = fmt.Sprint(*r.Meta.RemainingItemCount)
	}
	return fmt.Sprintf("200 [%s] rv=%t continue=%t remaining=%s", strings.Join(r.Names, ","), r.Meta.ResourceVersion != "", r.Meta.Continue != "", rem)
}

// TestListMatrix sends the same list to both sides and compares status,
// items and list metadata.
func TestListMatrix(t *testing.T) {
	t.Parallel()
	gold := map[string]string{"tier": "gold"}
	type side func(w *world, tg target) []string // query key/values for one side
	own := func(kv ...string) side {
		return func(w *world, tg target) []string {
			out := append([]string(nil), kv...)
			for i := 1; i < len(out); i += 2 {
				switch out[i] {
				case "<list>":
					out[i] = w.listRV(tg)
				case "<future>":
					out[i] = futureRV(w, tg)
				case "<expired>":
					out[i] = map[target]string{native: expiredNativeRV, view: expiredViewRV}[tg]
				}
			}
			return out
		}
	}
	tests := []struct {
		name string
		q    side
		// differs names why the view answers otherwise, and what it answers.
		differs, viewWants string
	}{
		{name: "rv unset", q: own()},
		{name: `rv "0"`, q: own("resourceVersion", "0")},
		{name: "a list's rv, no match", q: own("resourceVersion", "<list>")},
		{name: "a list's rv, NotOlderThan", q: own("resourceVersion", "<list>", "resourceVersionMatch", "NotOlderThan")},
		{name: "future rv, NotOlderThan", q: own("resourceVersion", "<future>", "resourceVersionMatch", "NotOlderThan")},
		{name: "future rv, Exact", q: own("resourceVersion", "<future>", "resourceVersionMatch", "Exact")},
		// The view's version is of its run before a restart: its vector is
		// older than the current one's, so the current view serves it, as
		// kube-apiserver serves its current state.
		{name: "expired rv, NotOlderThan", q: own("resourceVersion", "<expired>", "resourceVersionMatch", "NotOlderThan")},
		{name: "malformed rv", q: own("resourceVersion", "not-a-version")},
		{name: "Exact without rv", q: own("resourceVersionMatch", "Exact")},
		{name: `Exact with rv "0"`, q: own("resourceVersion", "0", "resourceVersionMatch", "Exact")},
		{name: "sendInitialEvents on a list", q: own("sendInitialEvents", "true")},
		{name: "limit 2", q: own("limit", "2")},
		{name: "limit 5 of 3", q: own("limit", "5")},
		{name: `limit with rv "0"`, q: own("limit", "2", "resourceVersion", "0")},
		{name: "limit with a list's rv", q: own("limit", "2", "resourceVersion", "<list>", "resourceVersionMatch", "NotOlderThan")},
		{name: "limit and a label selector", q: own("limit", "1", "labelSelector", "tier=gold")},
		{name: "malformed continue", q: own("limit", "1", "continue", "bm90IGEgdG9rZW4")},
		{name: "continue with an rv", q: own("limit", "1", "continue", "bm90IGEgdG9rZW4", "resourceVersion", "<list>")},
		{name: "by name", q: own("fieldSelector", "metadata.name=rb-b")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, []string{"rb-a", "rb-b", "rb-c"}, map[string]map[string]string{"rb-a": gold, "rb-c": gold})
			nat := listShape(w.list(native, query(tt.q(w, native)...)))
			vw := listShape(w.list(view, query(tt.q(w, view)...)))
			t.Logf("%s\n native: %s\n view:   %s", t.Name(), nat, vw)
			switch {
			case tt.differs != "":
				t.Logf("where views differ: %s", tt.differs)
				if vw != tt.viewWants {
					t.Errorf("view %s, want %s", vw, tt.viewWants)
				}
			case nat != vw:
				t.Errorf("the view answers differently:\n native %s\n view   %s", nat, vw)
			}
		})
	}
}

// TestListPagination walks both sides page by page, with a change between
// the first and the second page: both read the first page's snapshot.
func TestListPagination(t *testing.T) {
	t.Parallel()
	w := newWorld(t, []string{"rb-a", "rb-b", "rb-c"}, nil)
	walk := func(tg target, between func()) (pages []string, rvs []string) {
		l := w.list(tg, query("limit", "1"))
		for {
			pages = append(pages, listShape(l))
			rvs = append(rvs, l.Meta.ResourceVersion)
			if l.Code != http.StatusOK || l.Meta.Continue == "" {
				return pages, rvs
			}
			if between != nil {
				between()
				between = nil
			}
			l = w.list(tg, query("limit", "1", "continue", l.Meta.Continue))
		}
	}
	natPages, natRVs := walk(native, nil)
	// The same change seen by both: rb-aa sorts between the first and the
	// second page; neither walk may show it.
	w.create("rb-aa", nil)
	w.waitViewNames("rb-a", "rb-aa", "rb-b", "rb-c")
	w.delete("rb-aa")
	w.waitViewNames("rb-a", "rb-b", "rb-c")
	natPages2, _ := walk(native, func() { w.create("rb-ab", nil); w.waitViewNames("rb-a", "rb-ab", "rb-b", "rb-c") })
	w.delete("rb-ab")
	w.waitViewNames("rb-a", "rb-b", "rb-c")
	viewPages, viewRVs := walk(view, nil)
	viewPages2, _ := walk(view, func() { w.create("rb-ac", nil); w.waitViewNames("rb-a", "rb-ac", "rb-b", "rb-c") })
	t.Logf("native: %v\nview:   %v\nnative, changed between pages: %v\nview, changed between pages:   %v", natPages, viewPages, natPages2, viewPages2)
	if strings.Join(natPages, " | ") != strings.Join(viewPages, " | ") {
		t.Errorf("pages differ:\n native %v\n view   %v", natPages, viewPages)
	}
	if strings.Join(natPages2, " | ") != strings.Join(viewPages2, " | ") {
		t.Errorf("pages with a change between them differ:\n native %v\n view   %v", natPages2, viewPages2)
	}
	// Versions are each side's own: compare that every page carries the first's.
	for _, rvs := range [][]string{natRVs, viewRVs} {
		for _, rv := range rvs {
			if rv != rvs[0] {
				t.Errorf("page versions %v: every page carries the first page's version", rvs)
				break
			}
		}
	}
}
