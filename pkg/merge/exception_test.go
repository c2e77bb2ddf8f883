package merge_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// exceptionNS is a namespace declaring specs, approved and expired as given
// (each a name to the version approved or expired: true for the current).
func exceptionNS(t *testing.T, specs []v1alpha1.ExceptionSpec, approvals map[string]v1alpha1.ExceptionApproval, expired map[string]string) *merge.Namespace {
	t.Helper()
	ann := map[string]string{}
	put := func(key string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		ann[key] = string(b)
	}
	put(v1alpha1.AnnotationExceptions, specs)
	if approvals != nil {
		put(v1alpha1.AnnotationExceptionApprovals, approvals)
	}
	if expired != nil {
		put(v1alpha1.AnnotationExceptionsExpired, expired)
	}
	return &merge.Namespace{Name: "team-a", Annotations: ann}
}

func TestExceptionsInViews(t *testing.T) {
	t.Parallel()
	end := metav1.NewTime(time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC))
	ci := v1alpha1.ExceptionSpec{Name: "ci", Exclude: []string{"rolebindings/ci-bot"}, Reason: "TICKET-1", RequestedBy: "alice", ExpiresAt: &end}
	open := v1alpha1.ExceptionSpec{Name: "open", Exclude: []string{"rolebindings/ci-bot"}, Reason: "TICKET-2", RequestedBy: "alice"}
	approve := func(s v1alpha1.ExceptionSpec, sources ...string) map[string]v1alpha1.ExceptionApproval {
		return map[string]v1alpha1.ExceptionApproval{s.Name: {By: "bob", Digest: merge.ExceptionDigest(s), Sources: sources}}
	}
	plain := merge.Item{Namespace: "implicit-global", Name: "ci-bot"}
	needsApproval := merge.Item{Namespace: "implicit-global", Name: "ci-bot", Exceptions: merge.ExceptionRules{Approval: true}}
	needsEnd := merge.Item{Namespace: "implicit-global", Name: "ci-bot", Exceptions: merge.ExceptionRules{MaxDuration: 720 * time.Hour}}
	locked := merge.Item{Namespace: "implicit-global", Name: "ci-bot", Locked: true}
	edited := ci
	edited.Reason = "TICKET-1, longer"

	tests := []struct {
		name   string
		ns     *merge.Namespace
		global merge.Item
		// kept: the item stays in the view; why, a substring of its conflict.
		kept bool
		why  string
	}{
		{name: "an exception excepts a plain source", ns: exceptionNS(t, []v1alpha1.ExceptionSpec{open}, nil, nil), global: plain},
		{name: "the annotation excepts a plain source", ns: &merge.Namespace{Name: "team-a", Annotations: map[string]string{v1alpha1.AnnotationExclude: "rolebindings/ci-bot"}}, global: plain},
		{name: "expired: in effect nowhere", ns: exceptionNS(t, []v1alpha1.ExceptionSpec{ci}, nil, map[string]string{"ci": merge.ExceptionDigest(ci)}), global: plain, kept: true},
		{name: "past its end but not marked expired: still in effect (no clock)", ns: exceptionNS(t, []v1alpha1.ExceptionSpec{ci}, nil, nil), global: plain},
		{name: "an earlier version expired: this one is in effect", ns: exceptionNS(t, []v1alpha1.ExceptionSpec{edited}, nil, map[string]string{"ci": merge.ExceptionDigest(ci)}), global: plain},
		{name: "approval required, none", ns: exceptionNS(t, []v1alpha1.ExceptionSpec{ci}, nil, nil), global: needsApproval, kept: true, why: "not approved for implicit-global"},
		{name: "approval required, approved for the source's namespace", ns: exceptionNS(t, []v1alpha1.ExceptionSpec{ci}, approve(ci, "implicit-global"), nil), global: needsApproval},
		{name: "approval required, approved for another namespace only", ns: exceptionNS(t, []v1alpha1.ExceptionSpec{ci}, approve(ci, "org-platform"), nil), global: needsApproval, kept: true, why: "not approved"},
		{name: "approval of an earlier version: requested again", ns: exceptionNS(t, []v1alpha1.ExceptionSpec{edited}, approve(ci, "implicit-global"), nil), global: needsApproval, kept: true, why: "not approved"},
		{name: "approval required: the annotation never excepts", ns: &merge.Namespace{Name: "team-a", Annotations: map[string]string{v1alpha1.AnnotationExclude: "rolebindings/*"}}, global: needsApproval, kept: true, why: "requires an approved exception"},
		{name: "an end required: an exception without one does not except", ns: exceptionNS(t, []v1alpha1.ExceptionSpec{open}, nil, nil), global: needsEnd, kept: true, why: "with an end"},
		{name: "an end required: an exception with one excepts", ns: exceptionNS(t, []v1alpha1.ExceptionSpec{ci}, nil, nil), global: needsEnd},
		{name: "locked: never, approved or not", ns: exceptionNS(t, []v1alpha1.ExceptionSpec{ci}, approve(ci, "implicit-global"), nil), global: locked, kept: true, why: "is locked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			levels := []merge.Level{
				{Scope: merge.ScopeGlobal, Namespace: "implicit-global", Items: []merge.Item{tt.global}},
				{Scope: merge.ScopeLocal, Namespace: "team-a", Exclusions: merge.ExclusionsOf(tt.ns)},
			}
			got := merge.Merge("rolebindings", levels)
			if kept := len(got) == 1; kept != tt.kept {
				t.Fatalf("kept = %v, want %v (view %+v)", kept, tt.kept, got)
			}
			if tt.why != "" && !strings.Contains(strings.Join(got[0].Conflicts, "; "), tt.why) {
				t.Errorf("conflicts %q, want one saying %q", got[0].Conflicts, tt.why)
			}
			// The explanation says the same as the view.
			e := merge.Explain("rolebindings", "ci-bot", levels, merge.Options{})
			if (e.Result != nil) != tt.kept {
				t.Errorf("Explain: in view = %v, want %v", e.Result != nil, tt.kept)
			}
		})
	}
}

func TestExceptionsOf(t *testing.T) {
	t.Parallel()
	good := v1alpha1.ExceptionSpec{Name: "ci", Exclude: []string{"rolebindings/ci-bot"}, Reason: "r", RequestedBy: "alice"}
	noReason := v1alpha1.ExceptionSpec{Name: "x", Exclude: []string{"rolebindings/a"}, RequestedBy: "alice"}
	dup := good
	dup.Reason = "second of the name"
	ns := exceptionNS(t, []v1alpha1.ExceptionSpec{good, noReason, dup}, nil, nil)
	got := merge.ExceptionsOf(ns)
	if len(got) != 1 || got[0].Name != "ci" || got[0].Reason != "r" {
		t.Fatalf("ExceptionsOf = %+v, want the first well-formed ci only", got)
	}
	if merge.ExceptionDigest(good) == merge.ExceptionDigest(dup) {
		t.Error("two versions share a digest")
	}
	bad := &merge.Namespace{Name: "n", Annotations: map[string]string{v1alpha1.AnnotationExceptions: `{"name":"not a list"}`}}
	if got := merge.ExceptionsOf(bad); got != nil {
		t.Errorf("malformed annotation: %+v, want none", got)
	}
	if _, err := merge.ParseExceptions(`[{"name":"a","exclude":["roles/x"],"reason":"r","requestedBy":"u","approvedBy":"me"}]`); err == nil {
		t.Error("an unknown field (approvedBy) parsed; want an error: approvals live in their own annotation")
	}
	for _, p := range merge.ValidateException(v1alpha1.ExceptionSpec{Name: "Bad_Name", Exclude: []string{"rolebindings/a,roles/b"}}) {
		t.Log(p)
	}
	if n := len(merge.ValidateException(v1alpha1.ExceptionSpec{Name: "Bad_Name", Exclude: []string{"rolebindings/a,roles/b"}})); n != 4 {
		t.Errorf("ValidateException found %d problems, want 4 (name, entry, reason, requester)", n)
	}
}

func TestExceptionRulesOf(t *testing.T) {
	t.Parallel()
	r := merge.ExceptionRulesOf(map[string]string{v1alpha1.AnnotationExceptionApproval: "required", v1alpha1.AnnotationExceptionMaxDuration: "720h"})
	if !r.Approval || r.MaxDuration != 720*time.Hour || !r.NeedsEnd() {
		t.Errorf("rules %+v", r)
	}
	if r := merge.ExceptionRulesOf(map[string]string{v1alpha1.AnnotationExceptionMaxDuration: "soon"}); !r.NeedsEnd() {
		t.Error("an unparsable max duration must still require an end")
	}
	if r := merge.ExceptionRulesOf(nil); r.Approval || r.NeedsEnd() {
		t.Errorf("no annotations: %+v", r)
	}
}

// TestExpiredBy: the exceptions due for a mark at now are those with an
// end at or before now whose current version is not marked yet.
func TestExpiredBy(t *testing.T) {
	t.Parallel()
	end := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	spec := func(name string, ends *time.Time) v1alpha1.ExceptionSpec {
		s := v1alpha1.ExceptionSpec{Name: name, Exclude: []string{"rolebindings/" + name}, Reason: "r", RequestedBy: "olivia"}
		if ends != nil {
			at := metav1.NewTime(*ends)
			s.ExpiresAt = &at
		}
		return s
	}
	later := end.Add(time.Hour)
	marked := spec("marked", &end)
	edited := spec("edited", &end)
	specs := []v1alpha1.ExceptionSpec{spec("ends", &end), spec("later", &later), spec("never", nil), marked, edited}
	ns := exceptionNS(t, specs, nil, map[string]string{"marked": merge.ExceptionDigest(marked), "edited": "an-earlier-version"})
	for _, tt := range []struct {
		now  time.Time
		want string
	}{
		{now: end.Add(-time.Second), want: ""},
		{now: end, want: "edited,ends"},
		{now: later, want: "edited,ends,later"},
	} {
		var got []string
		for _, e := range merge.ExpiredBy(ns, tt.now) {
			if e.Digest != merge.ExceptionDigest(e.ExceptionSpec) {
				t.Errorf("%s: digest %s, want its spec's", e.Name, e.Digest)
			}
			got = append(got, e.Name)
		}
		if strings.Join(got, ",") != tt.want {
			t.Errorf("ExpiredBy(%s) = %v, want %s", tt.now, got, tt.want)
		}
	}
}
