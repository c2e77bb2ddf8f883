package registry

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	admissionregistrationinformers "k8s.io/client-go/informers/admissionregistration/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// policySyncTimeout bounds how long a policy review waits for the host's
// admission policies to be read the first time.
const policySyncTimeout = 30 * time.Second

// hostAdmissionPolicies reads the host's ValidatingAdmissionPolicies,
// MutatingAdmissionPolicies and their bindings (admissionregistration.k8s.io
// /v1) with informers of their own, started by the first policy review: a
// server nobody asks about policies never watches them. They stop with the
// server (stop).
type hostAdmissionPolicies struct {
	client kubernetes.Interface
	stop   <-chan struct{}

	once    sync.Once
	factory informers.SharedInformerFactory
	v       admissionregistrationinformers.Interface
	synced  []cache.InformerSynced
}

var _ AdmissionPolicies = &hostAdmissionPolicies{}

// NewHostAdmissionPolicies reads the host's admission policies and bindings
// through client, with informers started by the first policy review and
// stopped by stop.
func NewHostAdmissionPolicies(client kubernetes.Interface, stop <-chan struct{}) AdmissionPolicies {
	return &hostAdmissionPolicies{client: client, stop: stop}
}

// start starts the informers once.
func (a *hostAdmissionPolicies) start() {
	a.once.Do(func() {
		a.factory = informers.NewSharedInformerFactory(a.client, 0)
		a.v = a.factory.Admissionregistration().V1()
		a.synced = []cache.InformerSynced{
			a.v.ValidatingAdmissionPolicies().Informer().HasSynced,
			a.v.ValidatingAdmissionPolicyBindings().Informer().HasSynced,
			a.v.MutatingAdmissionPolicies().Informer().HasSynced,
			a.v.MutatingAdmissionPolicyBindings().Informer().HasSynced,
		}
		a.factory.Start(a.stop)
	})
}

// AdmissionPolicies implements AdmissionPolicies: it waits, the
// first time, for the informers to have read the host (at most
// policySyncTimeout, or until ctx ends).
func (a *hostAdmissionPolicies) AdmissionPolicies(ctx context.Context) (AdmissionPolicySet, error) {
	if a.client == nil {
		return AdmissionPolicySet{}, fmt.Errorf("no host client")
	}
	a.start()
	ctx, cancel := context.WithTimeout(ctx, policySyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), a.synced...) {
		return AdmissionPolicySet{}, fmt.Errorf("the host's admission policies and bindings are not read yet")
	}
	var set AdmissionPolicySet
	var err error
	if set.Validating, err = a.v.ValidatingAdmissionPolicies().Lister().List(labels.Everything()); err != nil {
		return set, err
	}
	if set.ValidatingBindings, err = a.v.ValidatingAdmissionPolicyBindings().Lister().List(labels.Everything()); err != nil {
		return set, err
	}
	if set.Mutating, err = a.v.MutatingAdmissionPolicies().Lister().List(labels.Everything()); err != nil {
		return set, err
	}
	set.MutatingBindings, err = a.v.MutatingAdmissionPolicyBindings().Lister().List(labels.Everything())
	return set, err
}
