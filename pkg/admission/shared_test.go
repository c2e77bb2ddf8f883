package admission_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// memLedger is a Lease as kube-apiserver keeps it: a record written only
// at the version read (Conflict otherwise), stored as JSON.
type memLedger struct {
	mu                sync.Mutex
	version           int
	raw               []byte
	writes, conflicts int
}

func (l *memLedger) Read(context.Context) (admission.Record, string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var rec admission.Record
	if l.raw != nil {
		if err := json.Unmarshal(l.raw, &rec); err != nil {
			return rec, "", err
		}
	}
	return rec, strconv.Itoa(l.version), nil
}

func (l *memLedger) Write(_ context.Context, version string, rec admission.Record) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if version != strconv.Itoa(l.version) {
		l.conflicts++
		return "", apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, admission.DefaultLedgerLease, fmt.Errorf("the object has been modified"))
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return "", err
	}
	l.raw = raw
	l.version++
	l.writes++
	return strconv.Itoa(l.version), nil
}

// TestSharedRecord: two replicas, each with its own mirror that shows
// neither's writes yet. A candidate one replica admitted a moment ago makes
// the other refuse to lock its stable source, as one replica would; and
// when the other decided on a stale copy of the record, its write
// conflicts and it decides again with the candidate taken in.
func TestSharedRecord(t *testing.T) {
	t.Parallel()
	create, update := admissionv1.Create, admissionv1.Update
	orgAdmin := allowAll(unlock(rolebindings, "org", "rb"))
	nsList := []*corev1.Namespace{ns(global, ""), ns("org", ""), ns("team-a", "org", recorded)}
	candidate := func(name, stable string) *admissionv1.AdmissionRequest {
		return request(create, rolebindings, "org", name, nil, roleBinding("org", name, candidateFor(stable, "!"+v1alpha1.LabelStage)))
	}
	lockRB := request(update, rolebindings, "org", "rb", roleBinding("org", "rb"), roleBinding("org", "rb", isLocked))
	for _, tc := range []struct {
		name string
		// shared: the replicas take turns on one record.
		shared bool
		// staleFirst: replica A takes a turn before B's candidate, so
		// that its copy of the record is stale when it locks.
		staleFirst    bool
		wantLock      bool
		wantConflicts int
	}{
		{name: "each replica alone", wantLock: true},
		{name: "one record", shared: true},
		{name: "one record, A's copy stale", shared: true, staleFirst: true, wantConflicts: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := &memLedger{}
			replica := func() *admission.Guards {
				m := hierarchyMux(t, nsList, roleBinding("org", "rb"), roleBinding("org", "x"))
				cfg := admission.Config{Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{answers: orgAdmin}, Served: served, GlobalNamespaces: []string{global}}
				if tc.shared {
					cfg.Ledger = l
				}
				return admission.NewGuards(cfg)
			}
			a, b := replica(), replica()
			if tc.staleFirst {
				if resp, _ := review(t, a, webhookconfig.PathCandidates, candidate("x-next", "x")); resp == nil || !resp.Allowed {
					t.Fatalf("A refused a candidate of x: %+v", resp)
				}
			}
			if resp, _ := review(t, b, webhookconfig.PathCandidates, candidate("rb-next", "rb")); resp == nil || !resp.Allowed {
				t.Fatalf("B refused the candidate of rb: %+v", resp)
			}
			resp, _ := review(t, a, webhookconfig.PathLocks, lockRB)
			if resp == nil {
				t.Fatal("no answer")
			}
			if resp.Allowed != tc.wantLock {
				t.Errorf("A locking rb: allowed %v, want %v (%+v)", resp.Allowed, tc.wantLock, resp.Result)
			}
			if !tc.wantLock && (resp.Result == nil || !strings.Contains(resp.Result.Message, `open candidate "rb-next"`)) {
				t.Errorf("A's denial %+v does not name rb-next", resp.Result)
			}
			if l.conflicts != tc.wantConflicts {
				t.Errorf("%d conflicts, want %d", l.conflicts, tc.wantConflicts)
			}
		})
	}
}
