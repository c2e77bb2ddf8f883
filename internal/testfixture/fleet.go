package testfixture

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
)

// MemberCluster is a registered member's MemberCluster as an informer or a
// dynamic client holds it, with status as the member reported it.
func MemberCluster(name string, labels map[string]string, status fleetv1alpha1.MemberClusterStatus) *unstructured.Unstructured {
	mc := fleetv1alpha1.MemberCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: fleetv1alpha1.GroupVersionKind.GroupVersion().String(), Kind: fleetv1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status:     status,
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&mc)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// Reported is a member's report written at t: namespaces tenants, and the
// hub sources it serves.
func Reported(t time.Time, namespaces int32, sources ...fleetv1alpha1.SourceReport) fleetv1alpha1.MemberClusterStatus {
	return fleetv1alpha1.MemberClusterStatus{ReportTime: &metav1.Time{Time: t}, Namespaces: namespaces, Sources: sources}
}
