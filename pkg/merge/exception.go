package merge

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// Exception is one exception a namespace declares (its
// implicit.dev/exceptions annotation) with what the namespace's other
// annotations say of it. Its state is read from annotations only, never
// from a clock: an exception past its end is in effect until the server
// marks it expired, so every view, answer and replica switches at the
// revision of that mark.
type Exception struct {
	v1alpha1.ExceptionSpec
	// Digest names this version of the spec (ExceptionDigest).
	Digest string
	// Approval is the approval of this version; nil if none (or one of an
	// earlier version: an edit makes an exception requested again).
	Approval *v1alpha1.ExceptionApproval
	// Expired is set once the server marked this version expired.
	Expired bool
}

// Ends is the exception's end, zero if it has none.
func (e Exception) Ends() time.Time {
	if e.ExpiresAt == nil {
		return time.Time{}
	}
	return e.ExpiresAt.Time
}

// ExceptionDigest names one version of an exception: any edit of its spec
// gives another, so an approval (which names the digest it approved) is of
// that version only.
func ExceptionDigest(s v1alpha1.ExceptionSpec) string {
	b, _ := json.Marshal(s) // a struct of strings and a time: never fails
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// ParseExceptions parses an implicit.dev/exceptions value. A value that is
// not a JSON list of exceptions is an error (the guards refuse it; a
// namespace that holds one anyway declares no exception).
func ParseExceptions(value string) ([]v1alpha1.ExceptionSpec, error) {
	var out []v1alpha1.ExceptionSpec
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("%s must be a JSON list of exceptions ({\"name\", \"exclude\", \"reason\", \"requestedBy\", \"expiresAt\"}): %v", v1alpha1.AnnotationExceptions, err)
	}
	return out, nil
}

// ParseExceptionApprovals parses an implicit.dev/exception-approvals value.
func ParseExceptionApprovals(value string) (map[string]v1alpha1.ExceptionApproval, error) {
	out := map[string]v1alpha1.ExceptionApproval{}
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("%s must be a JSON object of approvals by exception name ({\"by\", \"at\", \"digest\", \"sources\"}): %v", v1alpha1.AnnotationExceptionApprovals, err)
	}
	return out, nil
}

// ParseExceptionsExpired parses an implicit.dev/exceptions-expired value:
// exception name to the digest of the version that expired.
func ParseExceptionsExpired(value string) (map[string]string, error) {
	out := map[string]string{}
	if err := json.Unmarshal([]byte(value), &out); err != nil {
		return nil, fmt.Errorf("%s must be a JSON object of exception name to digest: %v", v1alpha1.AnnotationExceptionsExpired, err)
	}
	return out, nil
}

// ValidateException returns what is wrong with one exception as written,
// before any rule of the sources it names: its name, its entries, its
// reason. Each problem is a sentence naming the field.
func ValidateException(s v1alpha1.ExceptionSpec) []string {
	var out []string
	if msgs := validation.IsDNS1123Label(s.Name); len(msgs) > 0 {
		out = append(out, fmt.Sprintf("name %q: %s", s.Name, strings.Join(msgs, ", ")))
	}
	if len(s.Exclude) == 0 {
		out = append(out, fmt.Sprintf("exception %q: exclude must list at least one <resource>/<name> or <resource>/*", s.Name))
	}
	for _, entry := range s.Exclude {
		if _, errs := ParseExclusions(entry); len(errs) > 0 {
			out = append(out, fmt.Sprintf("exception %q: %v", s.Name, errs[0]))
		} else if strings.Contains(entry, ",") {
			out = append(out, fmt.Sprintf("exception %q: %q: one <resource>/<name> per exclude entry", s.Name, entry))
		}
	}
	if strings.TrimSpace(s.Reason) == "" {
		out = append(out, fmt.Sprintf("exception %q: reason is required: say why (a ticket, a sentence)", s.Name))
	}
	if s.RequestedBy == "" {
		out = append(out, fmt.Sprintf("exception %q: requestedBy is required: the user writing it", s.Name))
	}
	return out
}

// ExceptionsOf returns the exceptions ns declares, with their approvals
// and expiry marks, sorted by name. A malformed annotation declares none;
// of two exceptions of one name, the first counts.
func ExceptionsOf(ns *Namespace) []Exception {
	if ns == nil {
		return nil
	}
	v, ok := ns.Annotations[v1alpha1.AnnotationExceptions]
	if !ok {
		return nil
	}
	specs, err := ParseExceptions(v)
	if err != nil {
		return nil
	}
	var approvals map[string]v1alpha1.ExceptionApproval
	if a, ok := ns.Annotations[v1alpha1.AnnotationExceptionApprovals]; ok {
		approvals, _ = ParseExceptionApprovals(a)
	}
	var expired map[string]string
	if e, ok := ns.Annotations[v1alpha1.AnnotationExceptionsExpired]; ok {
		expired, _ = ParseExceptionsExpired(e)
	}
	seen := map[string]bool{}
	out := make([]Exception, 0, len(specs))
	for _, s := range specs {
		if seen[s.Name] || len(ValidateException(s)) > 0 {
			continue
		}
		seen[s.Name] = true
		e := Exception{ExceptionSpec: s, Digest: ExceptionDigest(s)}
		if a, ok := approvals[s.Name]; ok && a.Digest == e.Digest {
			e.Approval = &a
		}
		e.Expired = expired[s.Name] == e.Digest
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ExceptionRules are what a source says of the exceptions of its items
// (its annotations implicit.dev/exception-approval and
// implicit.dev/exception-max-duration).
type ExceptionRules struct {
	// Approval: only an approved exception excepts the item.
	Approval bool
	// MaxDuration, when set, requires an exception with an end at most that
	// long after it is written (the guards judge the bound; views require
	// an end).
	MaxDuration time.Duration
}

// ExceptionRulesOf reads a source's exception rules from its annotations.
// A max duration that does not parse, or is not positive, requires an end
// with no bound beyond it (the guards refuse writing one).
func ExceptionRulesOf(annotations map[string]string) ExceptionRules {
	r := ExceptionRules{Approval: annotations[v1alpha1.AnnotationExceptionApproval] == "required"}
	if v, ok := annotations[v1alpha1.AnnotationExceptionMaxDuration]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			d = -1
		}
		r.MaxDuration = d
	}
	return r
}

// NeedsEnd reports whether the item's exceptions must have an end.
func (r ExceptionRules) NeedsEnd() bool { return r.MaxDuration != 0 }

// SourceKey names where an item's source lives, as an approval's Sources
// name it: its namespace, "<cluster>/<namespace>" for a hub's.
func SourceKey(it Item) string {
	if it.Cluster != "" {
		return it.Cluster + "/" + it.Namespace
	}
	return it.Namespace
}

// Excepts reports whether the exclusion, which matches it, may remove the
// item it, and if not, why: a source requiring approval is excepted only by
// an exception approved for its namespace, one requiring an end only by an
// exception with one. Locks are MergeWith's to judge.
func (e Exclusion) Excepts(it Item) (bool, string) {
	switch {
	case it.Exceptions.Approval && !slices.Contains(e.Approved, SourceKey(it)):
		if e.Exception == "" {
			return false, "its source requires an approved exception (" + v1alpha1.AnnotationExceptions + ")"
		}
		return false, fmt.Sprintf("its source requires an approved exception, and exception %s is not approved for %s", e.Exception, SourceKey(it))
	case it.Exceptions.NeedsEnd() && e.Ends.IsZero():
		return false, "its source requires an exception with an end (" + v1alpha1.AnnotationExceptions + " with expiresAt)"
	}
	return true, ""
}

// exceptionExclusions are the exclusions of the exceptions in effect: not
// expired. One whose sources require approval is judged item by item
// (Excepts).
func exceptionExclusions(ns *Namespace) []Exclusion {
	var out []Exclusion
	for _, e := range ExceptionsOf(ns) {
		if e.Expired {
			continue
		}
		var approved []string
		if e.Approval != nil {
			approved = e.Approval.Sources
		}
		for _, entry := range e.Exclude {
			ex, errs := ParseExclusions(entry)
			if len(errs) > 0 || len(ex) != 1 {
				continue
			}
			ex[0].Exception, ex[0].Ends, ex[0].Approved = e.Name, e.Ends(), approved
			out = append(out, ex[0])
		}
	}
	return out
}

// ExclusionAnnotations are the namespace annotations that decide what it
// excludes: a change of any of them changes its views and its subtree's.
var ExclusionAnnotations = []string{
	v1alpha1.AnnotationExclude, v1alpha1.AnnotationExceptions,
	v1alpha1.AnnotationExceptionApprovals, v1alpha1.AnnotationExceptionsExpired,
}

// DeclaresExclusions reports whether annotations hold any exclusion
// annotation (whether or not it excludes anything now).
func DeclaresExclusions(annotations map[string]string) bool {
	for _, k := range ExclusionAnnotations {
		if _, ok := annotations[k]; ok {
			return true
		}
	}
	return false
}

// ExclusionsChanged reports whether any exclusion annotation differs.
func ExclusionsChanged(old, next map[string]string) bool {
	for _, k := range ExclusionAnnotations {
		a, hadA := old[k]
		b, hadB := next[k]
		if a != b || hadA != hadB {
			return true
		}
	}
	return false
}

// ExpiredBy returns the exceptions of ns whose end has passed at now (an
// end at now included) and whose version is not marked expired yet: the
// ones the server's expiry writer marks at now, each with the Digest its
// mark records.
func ExpiredBy(ns *Namespace, now time.Time) []Exception {
	var out []Exception
	for _, e := range ExceptionsOf(ns) {
		if e.Expired || e.ExpiresAt == nil || e.Ends().After(now) {
			continue
		}
		out = append(out, e)
	}
	return out
}
