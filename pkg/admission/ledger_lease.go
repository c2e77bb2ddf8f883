package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"
)

// DefaultLedgerLease is the Lease, in the server's own namespace, that the
// replicas' guards take turns on.
const DefaultLedgerLease = "implicit-apiserver-guards"

// annotationRecord holds the Record on the Lease, as JSON.
const annotationRecord = "implicit.dev/guard-decisions"

// maxRecordBytes bounds the record: within the 256 KiB kube-apiserver allows
// a Lease's annotations. A decision that would write more is unavailable
// (the webhook's failure policy applies) until entries expire.
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
	var rec Record
	if raw := lease.Annotations[annotationRecord]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &rec); err != nil {
			// A record nobody can read is taken as empty: what it held
			// only ever added refusals, for at most assumeFor.
			rec = Record{}
		}
	}
	return rec, lease.ResourceVersion, nil
}

// Write implements Ledger.
func (l *LeaseLedger) Write(ctx context.Context, version string, rec Record) (string, error) {
	raw, err := json.Marshal(rec)
	if err != nil {
		return "", err
	}
	if len(raw) > maxRecordBytes {
		return "", fmt.Errorf("the record of the decisions admitted in the last %s holds %d bytes, more than %d: try again later", assumeFor, len(raw), maxRecordBytes)
	}
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.Name, ResourceVersion: version, Annotations: map[string]string{annotationRecord: string(raw)}},
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
