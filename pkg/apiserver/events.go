package apiserver

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// newRecorder records Events on host objects (namespaces with hierarchy
// problems) until ctx is cancelled.
func newRecorder(ctx context.Context, client kubernetes.Interface) record.EventRecorder {
	b := record.NewBroadcaster(record.WithContext(ctx))
	go func() {
		<-ctx.Done()
		b.Shutdown()
	}()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "implicit-apiserver"})
}
