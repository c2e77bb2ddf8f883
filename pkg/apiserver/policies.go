package apiserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/informers"
	admissionregistrationinformers "k8s.io/client-go/informers/admissionregistration/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// policySyncTimeout bounds how long a policy review waits for the host's
// admission policies to be read the first time.
const policySyncTimeout = 30 * time.Second

// admissionPolicies reads the host's ValidatingAdmissionPolicies,
// MutatingAdmissionPolicies and their bindings (admissionregistration.k8s.io
// /v1) with informers of their own, started by the first policy review: a
// server nobody asks about policies never watches them. They stop with the
// server (stop).
type admissionPolicies struct {
	client kubernetes.Interface
	stop   <-chan struct{}

	once    sync.Once
	factory informers.SharedInformerFactory
	v       admissionregistrationinformers.Interface
	synced  []cache.InformerSynced
}

var _ registry.AdmissionPolicies = &admissionPolicies{}

func newAdmissionPolicies(client kubernetes.Interface, stop <-chan struct{}) *admissionPolicies {
	return &admissionPolicies{client: client, stop: stop}
}

// start starts the informers once.
func (a *admissionPolicies) start() {
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

// AdmissionPolicies implements registry.AdmissionPolicies: it waits, the
// first time, for the informers to have read the host (at most
// policySyncTimeout, or until ctx ends).
func (a *admissionPolicies) AdmissionPolicies(ctx context.Context) (registry.AdmissionPolicySet, error) {
	if a.client == nil {
		return registry.AdmissionPolicySet{}, fmt.Errorf("no host client")
	}
	a.start()
	ctx, cancel := context.WithTimeout(ctx, policySyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), a.synced...) {
		return registry.AdmissionPolicySet{}, fmt.Errorf("the host's admission policies and bindings are not read yet")
	}
	var set registry.AdmissionPolicySet
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

// admissionPolicies returns the host's admission policies, read with
// informers that stop with the server.
func (c CompletedConfig) admissionPolicies(gs *genericapiserver.GenericAPIServer) (*admissionPolicies, error) {
	stop := make(chan struct{})
	err := gs.AddPostStartHook("implicit-admission-policies", func(ctx genericapiserver.PostStartHookContext) error {
		go func() {
			<-ctx.Done()
			close(stop)
		}()
		return nil
	})
	return newAdmissionPolicies(c.ExtraConfig.Client, stop), err
}
