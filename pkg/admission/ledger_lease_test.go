package admission_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// leaseServer is a fake clientset whose Leases keep kube-apiserver's
// optimistic concurrency: an update at another resourceVersion than the
// stored one is a Conflict, and every write advances the version.
type leaseServer struct {
	*fake.Clientset
	mu                sync.Mutex
	rv                int
	updates, conflict int
}

func newLeaseServer() *leaseServer {
	s := &leaseServer{Clientset: fake.NewClientset()}
	tracker := s.Tracker()
	gvr := coordinationv1.SchemeGroupVersion.WithResource("leases")
	s.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		l := a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		s.rv++
		l.ResourceVersion = strconv.Itoa(s.rv)
		if err := tracker.Create(gvr, l, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, l, nil
	})
	s.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		cur, err := tracker.Get(gvr, a.GetNamespace(), l.Name)
		if err != nil {
			return true, nil, err
		}
		s.updates++
		if cur.(*coordinationv1.Lease).ResourceVersion != l.ResourceVersion {
			s.conflict++
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), l.Name, errors.New("the object has been modified"))
		}
		s.rv++
		l.ResourceVersion = strconv.Itoa(s.rv)
		if err := tracker.Update(gvr, l, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, l, nil
	})
	return s
}

func (s *leaseServer) ledger(identity string) *admission.LeaseLedger {
	return &admission.LeaseLedger{Client: s.CoordinationV1().Leases("implicit-system"), Name: admission.DefaultLedgerLease, Identity: identity}
}

func (s *leaseServer) lease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	l, err := s.CoordinationV1().Leases("implicit-system").Get(context.Background(), admission.DefaultLedgerLease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// bulkyRecord is a record of n entries with random names: it does not
// compress, so its stored size grows with n.
func bulkyRecord(t *testing.T, n int, until time.Time) admission.Record {
	t.Helper()
	var rec admission.Record
	for range n {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		rec.Entries = append(rec.Entries, admission.Entry{Kind: "lock", Resource: "rolebindings", Namespace: "org", Name: hex.EncodeToString(b), Until: until})
	}
	return rec
}

// TestLeaseLedger: the record on the Lease as kube-apiserver keeps it.
func TestLeaseLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	until := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	one := admission.Record{Entries: []admission.Entry{{Kind: "lock", Resource: "rolebindings", Namespace: "org", Name: "rb", Until: until}}}

	t.Run("read creates the Lease; a write at the version read lands", func(t *testing.T) {
		t.Parallel()
		s := newLeaseServer()
		l := s.ledger("replica-a")
		rec, v, err := l.Read(ctx)
		if err != nil || len(rec.Entries) != 0 || v == "" {
			t.Fatalf("Read of a missing Lease = %+v, %q, %v; want an empty record and a version", rec, v, err)
		}
		v2, err := l.Write(ctx, v, one)
		if err != nil || v2 == v {
			t.Fatalf("Write at the version read = %q, %v; want a new version", v2, err)
		}
		got, v3, err := s.ledger("replica-b").Read(ctx)
		if err != nil || v3 != v2 || len(got.Entries) != 1 || got.Entries[0].Name != "rb" || !got.Entries[0].Until.Equal(until) {
			t.Fatalf("the other replica reads %+v at %q (%v), want the entry rb at %q", got, v3, err, v2)
		}
		if h := s.lease(t).Spec.HolderIdentity; h == nil || *h != "replica-a" {
			t.Errorf("holderIdentity %v, want replica-a", h)
		}
	})

	t.Run("a write at a stale version conflicts and changes nothing", func(t *testing.T) {
		t.Parallel()
		s := newLeaseServer()
		a, b := s.ledger("a"), s.ledger("b")
		_, v, err := a.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Write(ctx, v, one); err != nil {
			t.Fatal(err)
		}
		_, err = a.Write(ctx, v, admission.Record{})
		if !apierrors.IsConflict(err) {
			t.Fatalf("a write at the version b replaced: %v, want a Conflict", err)
		}
		if got, _, _ := a.Read(ctx); len(got.Entries) != 1 {
			t.Errorf("after the conflict the record holds %+v, want b's entry", got)
		}
	})

	t.Run("a record past the size bound is refused, not stored", func(t *testing.T) {
		t.Parallel()
		s := newLeaseServer()
		l := s.ledger("a")
		_, v, err := l.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Write(ctx, v, bulkyRecord(t, 6000, until)); err == nil || apierrors.IsConflict(err) || !strings.Contains(err.Error(), "more than") {
			t.Fatalf("Write of about 300 KiB = %v, want the size bound's refusal", err)
		}
		if s.updates != 0 {
			t.Errorf("%d updates sent, want none", s.updates)
		}
		if _, err := l.Write(ctx, v, bulkyRecord(t, 1000, until)); err != nil {
			t.Errorf("Write of about 50 KiB: %v", err)
		}
	})

	t.Run("an unreadable record is taken as empty", func(t *testing.T) {
		t.Parallel()
		s := newLeaseServer()
		_, err := s.CoordinationV1().Leases("implicit-system").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name: admission.DefaultLedgerLease, Annotations: map[string]string{"implicit.dev/guard-decisions": "not gzip"},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rec, v, err := s.ledger("a").Read(ctx)
		if err != nil || len(rec.Entries) != 0 || v == "" {
			t.Fatalf("Read = %+v, %q, %v; want an empty record at the Lease's version", rec, v, err)
		}
	})
}

// TestSharedRecordOnLease: two replicas' guards over mirrors that show
// neither's writes, taking turns on one Lease. A candidate admitted by one
// makes the other refuse to lock its stable source: at once when its copy
// of the record is current, after a conflict and a second decision when
// it is stale; for 30 s on the guards' clock, not after. A decision whose
// record would exceed the bound is unavailable (503), and the Lease keeps
// what it held.
func TestSharedRecordOnLease(t *testing.T) {
	t.Parallel()
	create, update := admissionv1.Create, admissionv1.Update
	nsList := []*corev1.Namespace{ns(global, ""), ns("org", ""), ns("team-a", "org", recorded)}
	orgAdmin := allowAll(unlock(rolebindings, "org", "rb"), unlock(rolebindings, "org", "x"))
	candidate := func(name, stable string) *admissionv1.AdmissionRequest {
		return request(create, rolebindings, "org", name, nil, roleBinding("org", name, candidateFor(stable, "!"+v1alpha1.LabelStage)))
	}
	lock := func(name string) *admissionv1.AdmissionRequest {
		return request(update, rolebindings, "org", name, roleBinding("org", name), roleBinding("org", name, isLocked))
	}
	setup := func(t *testing.T) (s *leaseServer, clk *testingclock.FakeClock, a, b *admission.Guards) {
		s = newLeaseServer()
		clk = testingclock.NewFakeClock(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
		replica := func(id string) *admission.Guards {
			m := hierarchyMux(t, nsList, roleBinding("org", "rb"), roleBinding("org", "x"), roleBinding("org", "y"))
			g := admission.NewGuards(admission.Config{Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{answers: orgAdmin}, Served: served, GlobalNamespaces: []string{global}, Clock: clk, Ledger: s.ledger(id)})
			return g
		}
		return s, clk, replica("a"), replica("b")
	}
	allowed := func(t *testing.T, g *admission.Guards, path string, req *admissionv1.AdmissionRequest) bool {
		t.Helper()
		resp, status := review(t, g, path, req)
		if resp == nil {
			t.Fatalf("no answer (status %d)", status)
		}
		return resp.Allowed
	}

	t.Run("stale copy: conflict, then decided again with the other's candidate", func(t *testing.T) {
		t.Parallel()
		s, _, a, b := setup(t)
		// A's turn first, so that its copy of the record is stale when
		// it locks.
		if !allowed(t, a, webhookconfig.PathCandidates, candidate("y-next", "y")) {
			t.Fatal("A refused a candidate of y")
		}
		if !allowed(t, b, webhookconfig.PathCandidates, candidate("rb-next", "rb")) {
			t.Fatal("B refused the candidate of rb")
		}
		before := s.conflict
		resp, _ := review(t, a, webhookconfig.PathLocks, lock("rb"))
		if resp == nil || resp.Allowed {
			t.Fatalf("A locked rb under B's open candidate: %+v", resp)
		}
		if resp.Result == nil || !strings.Contains(resp.Result.Message, `open candidate "rb-next"`) {
			t.Errorf("A's denial %+v does not name rb-next", resp.Result)
		}
		if got := s.conflict - before; got != 1 {
			t.Errorf("%d conflicts, want 1: A decided on its stale copy, wrote, conflicted and decided again", got)
		}
	})

	t.Run("entries expire after 30 s", func(t *testing.T) {
		t.Parallel()
		_, clk, a, b := setup(t)
		if !allowed(t, b, webhookconfig.PathCandidates, candidate("rb-next", "rb")) {
			t.Fatal("B refused the candidate of rb")
		}
		clk.Step(29 * time.Second)
		if allowed(t, a, webhookconfig.PathLocks, lock("rb")) {
			t.Fatal("A locked rb 29 s after B's candidate")
		}
		clk.Step(2 * time.Second)
		if !allowed(t, a, webhookconfig.PathLocks, lock("rb")) {
			t.Error("A still refuses to lock rb 31 s after B's candidate, which its mirror never showed")
		}
	})

	t.Run("a record past the bound: unavailable, the Lease unchanged", func(t *testing.T) {
		t.Parallel()
		s, clk, a, _ := setup(t)
		// The largest prefix of a pool of incompressible entries the
		// Lease takes: any decision that adds a few KiB exceeds it.
		pool := bulkyRecord(t, 6000, clk.Now().Add(20*time.Second))
		fits := func(n int) bool {
			l := newLeaseServer().ledger("probe")
			_, v, err := l.Read(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			_, err = l.Write(context.Background(), v, admission.Record{Entries: pool.Entries[:n]})
			return err == nil
		}
		lo, hi := 0, len(pool.Entries)
		if fits(hi) {
			t.Fatal("the pool fits the bound: make it larger")
		}
		for hi-lo > 1 {
			if mid := (lo + hi) / 2; fits(mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		l := s.ledger("filler")
		_, v, err := l.Read(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Write(context.Background(), v, admission.Record{Entries: pool.Entries[:lo]}); err != nil {
			t.Fatalf("filling the record with %d entries: %v", lo, err)
		}
		kept := s.lease(t).ResourceVersion
		noise := make([]byte, 4096)
		if _, err := rand.Read(noise); err != nil {
			t.Fatal(err)
		}
		bulky := func() *admissionv1.AdmissionRequest {
			old := roleBinding("org", "x")
			obj := roleBinding("org", "x", isLocked)
			a := obj.GetAnnotations()
			a["example.com/noise"] = hex.EncodeToString(noise)
			obj.SetAnnotations(a)
			return request(update, rolebindings, "org", "x", old, obj)
		}
		resp, status := review(t, a, webhookconfig.PathLocks, bulky())
		if status != http.StatusServiceUnavailable || resp != nil && resp.Allowed {
			t.Fatalf("a lock whose record exceeds the bound: status %d, %+v; want 503", status, resp)
		}
		if got := s.lease(t).ResourceVersion; got != kept {
			t.Errorf("the Lease moved from %s to %s", kept, got)
		}
		clk.Step(21 * time.Second)
		if resp, status := review(t, a, webhookconfig.PathLocks, bulky()); resp == nil || !resp.Allowed {
			t.Errorf("refused once the filler entries expired: status %d, %+v", status, resp)
		}
	})
}
