package admission

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
)

// Replicas decide as one would: a guarded decision that another replica's
// decision could change takes a turn on one shared record (a Ledger: a Lease
// in the server's namespace, updated with a resourceVersion precondition).
// A turn reads the record (the copy from this replica's last turn, unless a
// conflict said it is stale), takes in what every replica's guards
// remember (the namespace changes, locks, candidates and objects admitted a
// moment ago), decides against the mirror and with all of that applied, as
// one replica always did with its own memory, and, when it allows, writes
// the record back with its own admitted change added, under the version it
// read. A replica that decided in the meantime made that write conflict:
// the decision is made again with the other's change taken in. So allowed
// decisions are totally ordered by the record's versions, and each is
// judged with every decision before it applied, whichever replica made it.
//
// Refusals and dry runs write nothing (they change nothing another decision
// reads); an uncontended allowed decision costs one write (the record read
// at the last turn is current).

// Ledger is the record the replicas' guards take turns on.
type Ledger interface {
	// Read returns the record and its version.
	Read(ctx context.Context) (Record, string, error)
	// Write replaces the record if it is still at version, and returns
	// the new version; a Conflict (apierrors.IsConflict) if another
	// write came first.
	Write(ctx context.Context, version string, rec Record) (string, error)
}

// Record is what the guards of every replica admitted a moment ago that the
// mirrors may not show yet; each entry lasts until its Until.
type Record struct {
	Entries []Entry `json:"entries,omitempty"`
}

// Entry kinds.
const (
	entryNamespace = "namespace" // a namespace change (Meta, Old)
	entryLock      = "lock"      // a source admitted locked (Object)
	entryCandidate = "candidate" // a candidate (Candidate) for the stable source Name
	entryAdopted   = "adopted"   // an object of its namespace's own (Object)
)

// Entry is one admitted change.
type Entry struct {
	Kind      string                 `json:"kind"`
	Resource  string                 `json:"resource,omitempty"`
	Namespace string                 `json:"namespace,omitempty"`
	Name      string                 `json:"name"`
	Meta      *whatif.NamespaceMeta  `json:"meta,omitempty"`
	Old       *whatif.NamespaceMeta  `json:"old,omitempty"`
	Older     []whatif.NamespaceMeta `json:"older,omitempty"`
	Object    map[string]any         `json:"object,omitempty"`
	// Writes are, for a lock, the writes it was admitted for that the
	// recording replica's mirror has not shown settled (none: not known,
	// the lock lasts until Until).
	Writes    []LockWrite `json:"writes,omitempty"`
	Candidate string      `json:"candidate,omitempty"`
	Locked    bool        `json:"locked,omitempty"`
	Until     time.Time   `json:"until"`
}

// LockWrite is one write a lock was admitted for: the uid of its object
// ("" when not known: it never settles), and Created for a creation, else
// Over, the resourceVersion of the object it was admitted over. The
// replica's memory keeps them as the record does.
type LockWrite struct {
	UID     types.UID `json:"uid,omitempty"`
	Created bool      `json:"created,omitempty"`
	Over    string    `json:"over,omitempty"`
}

func (e Entry) key() [4]string { return [4]string{e.Kind, e.Resource, e.Namespace, e.Name} }

// maxTurns bounds how often one decision is made again because other
// decisions came first.
const maxTurns = 8

// sharedTurns is the replica's side of the ledger: the record as its last
// turn read or wrote it.
type sharedTurns struct {
	ledger  Ledger
	mu      sync.Mutex
	rec     Record
	version string
	known   bool
}

// FollowLedger keeps this replica's copy of the shared record current with
// the other replicas' writes, until ctx ends, when the ledger can be
// watched (LeaseLedger).
func (g *Guards) FollowLedger(ctx context.Context) {
	s := g.sharedTurns()
	if s == nil {
		return
	}
	if f, ok := s.ledger.(interface {
		Follow(context.Context, func(Record, string))
	}); ok {
		f.Follow(ctx, s.keep)
	}
}

func (g *Guards) sharedTurns() *sharedTurns {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.shared
}

// current returns the record and its version: the copy of the last turn,
// or read again when fresh (a write conflicted) or never read.
func (s *sharedTurns) current(ctx context.Context, fresh bool) (Record, string, error) {
	s.mu.Lock()
	if s.known && !fresh {
		defer s.mu.Unlock()
		return s.rec, s.version, nil
	}
	s.mu.Unlock()
	rec, version, err := s.ledger.Read(ctx)
	if err != nil {
		return Record{}, "", err
	}
	s.keep(rec, version)
	return rec, version, nil
}

func (s *sharedTurns) keep(rec Record, version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec, s.version, s.known = rec, version, true
}

// inSharedTurn decides with decide in a turn on the shared record.
func (g *Guards) inSharedTurn(decide func(context.Context, *admissionv1.AdmissionRequest) decision) func(context.Context, *admissionv1.AdmissionRequest) decision {
	return func(ctx context.Context, req *admissionv1.AdmissionRequest) decision {
		s := g.sharedTurns()
		if s == nil {
			return decide(ctx, req)
		}
		fresh := false
		for range maxTurns {
			rec, version, err := s.current(ctx, fresh)
			if err != nil {
				return unavailable(fmt.Errorf("reading the guards' shared record: %w", err))
			}
			g.takeIn(rec)
			d := decide(ctx, req)
			if !d.allowed || req.DryRun != nil && *req.DryRun {
				return d
			}
			next := mergeRecords(g.now(), rec, g.memory())
			newVersion, err := s.ledger.Write(ctx, version, next)
			if err == nil {
				s.keep(next, newVersion)
				return d
			}
			if !apierrors.IsConflict(err) {
				return unavailable(fmt.Errorf("recording the decision in the guards' shared record: %w", err))
			}
			fresh = true
		}
		return unavailable(errors.New("other replicas' decisions kept coming first; try again"))
	}
}

func (g *Guards) now() time.Time {
	g.hierarchy.mu.Lock()
	defer g.hierarchy.mu.Unlock()
	return g.hierarchy.clock.Now()
}

// mergeRecords is a's and b's entries that have not expired at now, the
// later of two of one key.
func mergeRecords(now time.Time, a, b Record) Record {
	byKey := map[[4]string]Entry{}
	for _, r := range []Record{a, b} {
		for _, e := range r.Entries {
			if now.After(e.Until) {
				continue
			}
			if cur, ok := byKey[e.key()]; !ok || e.Until.After(cur.Until) {
				byKey[e.key()] = e
			}
		}
	}
	out := Record{Entries: make([]Entry, 0, len(byKey))}
	for _, e := range byKey {
		out.Entries = append(out.Entries, e)
	}
	sort.Slice(out.Entries, func(i, j int) bool {
		ki, kj := out.Entries[i].key(), out.Entries[j].key()
		for n := range ki {
			if ki[n] != kj[n] {
				return ki[n] < kj[n]
			}
		}
		return false
	})
	return out
}
