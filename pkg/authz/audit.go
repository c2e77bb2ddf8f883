package authz

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// The audit's bounds, per candidate.
const (
	// AuditTopKeys is the number of namespace × subject × verb × resource
	// keys (with their direction) counted one by one; the differences of
	// the other keys are counted together (others).
	AuditTopKeys = 32
	// AuditSamples is the number of the latest differences kept in full.
	AuditSamples = 20
	// auditPruneInterval is how often the records of candidates that are
	// gone (promoted, aborted) are dropped, besides at every report: a
	// read of the mirror per candidate held, every few seconds.
	auditPruneInterval = 5 * time.Second
	// maxSampleGroups is the number of a sample's groups kept by name.
	maxSampleGroups = 5
)

// Direction is how a candidate's answer differs from the answer given.
type Direction string

const (
	// WouldDeny: allowed today, the candidate would not allow it.
	WouldDeny Direction = "WouldDeny"
	// WouldAllow: no opinion today (denied, unless an authorizer after the
	// webhook allows it), the candidate would allow it.
	WouldAllow Direction = "WouldAllow"
)

// ReasonCandidateWouldDeny is the reason of the Warning Event recorded on a
// candidate RoleBinding when it would deny a request allowed today.
const ReasonCandidateWouldDeny = "CandidateWouldDeny"

// AuditReport is what this replica has recorded of the candidates of one
// stable RoleBinding. Each replica answers its own share of the webhook's
// requests, and records only those.
type AuditReport struct {
	// Replica is this replica's host name (the pod's name).
	Replica string
	// Started is when this replica started recording.
	Started time.Time
	// Candidates are the candidates for the stable name, sorted by name.
	Candidates []CandidateAudit
}

// CandidateAudit is one candidate's audit on this replica.
type CandidateAudit struct {
	Candidate CandidateRef
	// Stable is the name of the binding the candidate stands in for.
	Stable string
	// Problem says why the candidate is not audited ("" when it is).
	Problem string
	// Since is when this replica judged its first request for the
	// candidate; zero if none yet.
	Since time.Time
	// Judged counts the requests decided a second time with the candidate.
	Judged int64
	// WouldDeny and WouldAllow count the differences.
	WouldDeny, WouldAllow int64
	// Keys are the counted keys, most differences first. A key's Count
	// holds the differences counted while it was tracked: a key with more
	// than a 1/AuditTopKeys share of the differences is always tracked
	// (Space-Saving), the count of one evicted and taken back later starts
	// over, and what it had goes to the others.
	Keys []AuditKey
	// OthersWouldDeny and OthersWouldAllow count the differences not in Keys.
	OthersWouldDeny, OthersWouldAllow int64
	// Samples are the latest differences, oldest first.
	Samples []AuditSample
}

// AuditKey counts the differences of one namespace, subject, verb and
// resource in one direction.
type AuditKey struct {
	Namespace, User, Verb, Resource string
	Direction                       Direction
	Count                           int64
}

// AuditSample is one difference as it was seen.
type AuditSample struct {
	Time      time.Time
	Namespace string
	User      string
	// Groups are the requester's groups, summarized: system:authenticated
	// left out, the first few by name, then "(+N more)".
	Groups    []string
	Verb      string
	Resource  string
	Name      string
	Direction Direction
	// Given is the reason of the answer given ("" for no opinion), and
	// Candidate the reason the candidate's answer would have.
	Given, Candidate string
}

// audit keeps the differences per candidate, bounded, in memory. It is
// safe for concurrent use: mu guards the map of records, each record has
// its own lock, so requests about different candidates don't wait for each
// other.
type audit struct {
	clock   clock.WithTicker
	replica string
	started time.Time

	mu       sync.RWMutex
	records  map[CandidateRef]*auditRecord
	recorder record.EventRecorder // mu
}

func newAudit(c clock.WithTicker) *audit {
	host, _ := os.Hostname()
	return &audit{clock: c, replica: host, started: c.Now(), records: map[CandidateRef]*auditRecord{}}
}

// auditRecord is one candidate's differences.
type auditRecord struct {
	stable string

	mu                            sync.Mutex
	since                         time.Time
	judged, wouldDeny, wouldAllow int64
	keys                          map[auditKey]*keyCount
	samples                       []AuditSample // a ring of AuditSamples
	next                          int           // the ring's oldest, once full
}

type auditKey struct {
	namespace, user, verb, resource string
	direction                       Direction
}

// keyCount is a Space-Saving counter: count includes err, the count of the
// key it evicted, which this one may or may not have had.
type keyCount struct{ count, err int64 }

// SetEventRecorder records the Warning Events on candidates with rec.
func (a *Authorizer) SetEventRecorder(rec record.EventRecorder) {
	a.audit.mu.Lock()
	defer a.audit.mu.Unlock()
	a.audit.recorder = rec
}

// RunAudit drops the records of candidates that are gone, every
// auditPruneInterval until ctx is done.
func (a *Authorizer) RunAudit(ctx context.Context) {
	t := a.audit.clock.NewTicker(auditPruneInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			if err := a.pruneAudit(); err != nil && !watchmux.IsNotSynced(err) {
				klog.ErrorS(err, "Dropping the audit records of candidates that are gone")
			}
		}
	}
}

// pruneAudit drops the records of the candidates the mirror no longer
// holds, by uid: a candidate deleted and created again is a new one.
func (a *Authorizer) pruneAudit() error {
	au := a.audit
	au.mu.RLock()
	refs := make([]CandidateRef, 0, len(au.records))
	for ref := range au.records {
		refs = append(refs, ref)
	}
	au.mu.RUnlock()
	if len(refs) == 0 {
		return nil
	}
	var gone []CandidateRef
	if _, err := a.views.Read(func(r watchmux.Reader) {
		for _, ref := range refs {
			it, ok := r.Source(resourceRoleBindings, ref.Namespace, ref.Name)
			if !ok || it.UID != ref.UID || it.Cluster != ref.Cluster || it.Candidate == nil {
				gone = append(gone, ref)
			}
		}
	}); err != nil {
		return err
	}
	au.mu.Lock()
	defer au.mu.Unlock()
	for _, ref := range gone {
		delete(au.records, ref)
	}
	candidateAudits.Set(float64(len(au.records)))
	return nil
}

// observe records the shadows of one request answered given.
func (au *audit) observe(attrs Attributes, given Decision, shadows []shadowDecision) {
	if len(shadows) == 0 {
		return
	}
	now := au.clock.Now()
	for _, s := range shadows {
		rec, recorder := au.record(s.target, now)
		if s.d.Allowed == given.Allowed {
			rec.judge()
			continue
		}
		dir, label := WouldAllow, "would_allow"
		if given.Allowed {
			dir, label = WouldDeny, "would_deny"
		}
		differences.WithLabelValues(resourceRoleBindings, label).Inc()
		sample := AuditSample{
			Time: now, Namespace: attrs.Namespace, User: attrs.User, Groups: summarizeGroups(attrs.Groups),
			Verb: attrs.Verb, Resource: resourceString(attrs), Name: attrs.Name, Direction: dir,
			Given: given.Reason, Candidate: s.d.Reason,
		}
		newKey, counts := rec.differ(now, sample)
		if newKey && dir == WouldDeny && recorder != nil && s.target.candidate.Cluster == "" {
			// A new key: the first difference of this namespace, subject,
			// verb and resource (or the first since it was evicted). The
			// recorder's correlator aggregates similar Events and rate
			// limits them per object.
			//
			// Whoever reads Events in the candidate's namespace reads
			// this (view does), so it carries only what any of them may
			// know: counts, the verb and resource. Who asked, their groups
			// and where stay behind the CandidateAudit's permission (list
			// on RoleBindings in every namespace), as the review keeps
			// them.
			c := s.target.candidate
			recorder.Event(&corev1.ObjectReference{
				Kind: "RoleBinding", APIVersion: rbacv1.SchemeGroupVersion.String(),
				Namespace: c.Namespace, Name: c.Name, UID: c.UID,
			}, corev1.EventTypeWarning, ReasonCandidateWouldDeny, wouldDenyMessage(s.target.stable, c.Namespace, attrs.Verb, sample.Resource, counts))
		}
	}
}

// auditCounts are a candidate's counts on this replica when a difference
// was recorded.
type auditCounts struct{ judged, wouldDeny int64 }

// wouldDenyMessage is the message of a CandidateWouldDeny Event: what any
// reader of Events in the candidate's namespace may know, and where the
// rest is.
func wouldDenyMessage(stable, namespace, verb, resource string, c auditCounts) string {
	return fmt.Sprintf("Audit: this candidate for RoleBinding %q would deny %s %s, allowed today; on this replica %d of the %d requests judged so far would be denied; who and where: kubectl implicit rollout status rolebinding %s -n %s",
		stable, verb, resource, c.wouldDeny, c.judged, stable, namespace)
}

// record returns t's record, created at now if there is none, and the
// event recorder.
func (au *audit) record(t auditTarget, now time.Time) (*auditRecord, record.EventRecorder) {
	au.mu.RLock()
	rec, ok := au.records[t.candidate]
	recorder := au.recorder
	au.mu.RUnlock()
	if ok {
		return rec, recorder
	}
	au.mu.Lock()
	defer au.mu.Unlock()
	if rec, ok := au.records[t.candidate]; ok {
		return rec, au.recorder
	}
	rec = &auditRecord{stable: t.stable, since: now, keys: map[auditKey]*keyCount{}}
	au.records[t.candidate] = rec
	candidateAudits.Set(float64(len(au.records)))
	return rec, au.recorder
}

func (rec *auditRecord) judge() {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.judged++
}

// differ counts one difference; newKey when its key was not tracked. The
// counts are the record's after it.
func (rec *auditRecord) differ(now time.Time, s AuditSample) (newKey bool, counts auditCounts) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.judged++
	if s.Direction == WouldDeny {
		rec.wouldDeny++
	} else {
		rec.wouldAllow++
	}
	counts = auditCounts{judged: rec.judged, wouldDeny: rec.wouldDeny}
	if len(rec.samples) < AuditSamples {
		rec.samples = append(rec.samples, s)
	} else {
		rec.samples[rec.next] = s
		rec.next = (rec.next + 1) % AuditSamples
	}
	k := auditKey{namespace: s.Namespace, user: s.User, verb: s.Verb, resource: s.Resource, direction: s.Direction}
	if e, ok := rec.keys[k]; ok {
		e.count++
		return false, counts
	}
	if len(rec.keys) < AuditTopKeys {
		rec.keys[k] = &keyCount{count: 1}
		return true, counts
	}
	// Space-Saving: the new key takes the place of the smallest, and its
	// count, as an overestimate (err).
	var minK auditKey
	var minC *keyCount
	for kk, e := range rec.keys {
		if minC == nil || e.count < minC.count || (e.count == minC.count && keyLess(kk, minK)) {
			minK, minC = kk, e
		}
	}
	delete(rec.keys, minK)
	rec.keys[k] = &keyCount{count: minC.count + 1, err: minC.count}
	return true, counts
}

func keyLess(a, b auditKey) bool {
	return cmp.Or(strings.Compare(a.namespace, b.namespace), strings.Compare(a.user, b.user),
		strings.Compare(a.verb, b.verb), strings.Compare(a.resource, b.resource),
		strings.Compare(string(a.direction), string(b.direction))) < 0
}

// report copies rec into out.
func (rec *auditRecord) report(out *CandidateAudit) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out.Since, out.Judged, out.WouldDeny, out.WouldAllow = rec.since, rec.judged, rec.wouldDeny, rec.wouldAllow
	out.OthersWouldDeny, out.OthersWouldAllow = rec.wouldDeny, rec.wouldAllow
	for k, e := range rec.keys {
		n := e.count - e.err
		out.Keys = append(out.Keys, AuditKey{Namespace: k.namespace, User: k.user, Verb: k.verb, Resource: k.resource, Direction: k.direction, Count: n})
		if k.direction == WouldDeny {
			out.OthersWouldDeny -= n
		} else {
			out.OthersWouldAllow -= n
		}
	}
	slices.SortFunc(out.Keys, func(a, b AuditKey) int {
		if a.Count != b.Count {
			return cmp.Compare(b.Count, a.Count)
		}
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.User, b.User),
			strings.Compare(a.Verb, b.Verb), strings.Compare(a.Resource, b.Resource), strings.Compare(string(a.Direction), string(b.Direction)))
	})
	out.Samples = append(slices.Clone(rec.samples[rec.next:]), rec.samples[:rec.next]...)
}

// summarizeGroups is groups without system:authenticated, the first
// maxSampleGroups by name, then how many more.
func summarizeGroups(groups []string) []string {
	out := make([]string, 0, min(len(groups), maxSampleGroups+1))
	for _, g := range groups {
		if g != "system:authenticated" {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	if n := len(out) - maxSampleGroups; n > 0 {
		out = append(out[:maxSampleGroups], fmt.Sprintf("(+%d more)", n))
	}
	return out
}

// resourceString is the request's resource as kubectl names it:
// resource[.group][/subresource].
func resourceString(a Attributes) string {
	s := a.Resource
	if a.APIGroup != "" {
		s += "." + a.APIGroup
	}
	if a.Subresource != "" {
		s += "/" + a.Subresource
	}
	return s
}
