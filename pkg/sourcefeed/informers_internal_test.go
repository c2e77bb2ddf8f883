package sourcefeed

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestTrackInformers checks that the factory's shared informers are the
// tracked ones, for every reader: the factory returns them for their types
// (its Informer() wraps them, a new wrapper each call).
func TestTrackInformers(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	tr := TrackInformers(factory, client, "", DefaultProgress)
	shared := func(obj runtime.Object) cache.SharedIndexInformer {
		return factory.InformerFor(obj, func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer {
			t.Fatalf("%T: no informer was registered", obj)
			return nil
		})
	}
	if tr.Namespaces == nil || tr.Namespaces.Informer != shared(&corev1.Namespace{}) {
		t.Error("the namespaces' shared informer is not the tracked one")
	}
	if len(tr.Kinds) != len(trackedKinds) {
		t.Errorf("%d kinds tracked, want %d", len(tr.Kinds), len(trackedKinds))
	}
	for _, k := range trackedKinds {
		if s, ok := tr.Kinds[k.gvr]; !ok || s.Informer != shared(k.example) {
			t.Errorf("%s: the shared informer is not the tracked one", k.gvr)
		}
	}
}
