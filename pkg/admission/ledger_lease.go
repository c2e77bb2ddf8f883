package admission

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// DefaultLedgerLease is the Lease, in the server's own namespace, that the
// replicas' guards take turns on.
const DefaultLedgerLease = "implicit-apiserver-guards"

// annotationRecord holds the Record on the Lease: JSON, gzipped, base64.
const annotationRecord = "implicit.dev/guard-decisions"

// maxRecordBytes bounds the record as stored: within the 256 KiB
// kube-apiserver allows a Lease's annotations. A decision that would write
// more is unavailable (the webhook's failure policy applies) until entries
// expire.
const maxRecordBytes = 200 << 10

// LeaseLedger is a Ledger on a Lease: the record is an annotation, a write
// an update with the resourceVersion read (kube-apiserver answers Conflict
// when another write came first). Nothing renews it: the Lease's holder
// fields only say which replica wrote last, and when.
type LeaseLedger struct {
	Client coordinationclient.LeaseInterface
	Name   string
	// Identity names this replica in spec.holderIdentity.
	Identity string
}

var _ Ledger = &LeaseLedger{}

// Read implements Ledger; the Lease is created when missing.
func (l *LeaseLedger) Read(ctx context.Context) (Record, string, error) {
	lease, err := l.Client.Get(ctx, l.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease, err = l.Client.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.Name}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			lease, err = l.Client.Get(ctx, l.Name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return Record{}, "", err
	}
	rec, err := decodeRecord(lease.Annotations[annotationRecord])
	if err != nil {
		// A record nobody can read is taken as empty: what it held only
		// ever added refusals, for at most assumeFor.
		rec = Record{}
	}
	return rec, lease.ResourceVersion, nil
}

func encodeRecord(rec Record) (string, error) {
	raw, err := json.Marshal(rec)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(raw); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b.Bytes()), nil
}

func decodeRecord(s string) (Record, error) {
	var rec Record
	if s == "" {
		return rec, nil
	}
	gz, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return rec, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return rec, err
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return rec, err
	}
	return rec, json.Unmarshal(raw, &rec)
}

// Write implements Ledger.
func (l *LeaseLedger) Write(ctx context.Context, version string, rec Record) (string, error) {
	raw, err := encodeRecord(rec)
	if err != nil {
		return "", err
	}
	if len(raw) > maxRecordBytes {
		return "", fmt.Errorf("the record of the %d decisions admitted in the last %s holds %d bytes, more than %d: try again later", len(rec.Entries), assumeFor, len(raw), maxRecordBytes)
	}
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.Name, ResourceVersion: version, Annotations: map[string]string{annotationRecord: raw}},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &now},
	}
	if l.Identity != "" {
		lease.Spec.HolderIdentity = ptr.To(l.Identity)
	}
	out, err := l.Client.Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		return "", err
	}
	return out.ResourceVersion, nil
}

// Follow tells onChange of every version of the Lease it watches, until ctx
// ends: a replica's copy of the record then follows the other replica's
// writes, so that a turn after the other's costs one write, not a conflict,
// a read and a write. The copy is only a guess: every write is still made
// under the version it read.
func (l *LeaseLedger) Follow(ctx context.Context, onChange func(Record, string)) {
	selector := fields.OneTermEqualSelector("metadata.name", l.Name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return l.Client.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return l.Client.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &coordinationv1.Lease{}, 0, cache.Indexers{})
	seen := func(obj any) {
		lease, ok := obj.(*coordinationv1.Lease)
		if !ok {
			return
		}
		if rec, err := decodeRecord(lease.Annotations[annotationRecord]); err == nil {
			onChange(rec, lease.ResourceVersion)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }}); err != nil {
		return
	}
	go inf.RunWithContext(ctx)
}
