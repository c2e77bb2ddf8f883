package apiserver

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// GroupName is the API group of every view.
const GroupName = "implicit.dev"

// SchemeGroupVersion is the served group version.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// NewScheme returns a scheme with the views of kinds registered in
// implicit.dev/v1alpha1 and its internal version. A view has its source's Go
// type, so its objects decode into the source type on the client.
func NewScheme(kinds []registry.Kind) *runtime.Scheme {
	s := runtime.NewScheme()
	internal := schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}
	for _, k := range kinds {
		for _, gv := range []schema.GroupVersion{SchemeGroupVersion, internal} {
			s.AddKnownTypeWithName(gv.WithKind(k.Kind), k.New())
			s.AddKnownTypeWithName(gv.WithKind(k.Kind+"List"), k.NewList())
		}
	}
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	s.AddUnversionedTypes(unversioned,
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{},
	)
	return s
}

// NewCodecs returns the codec factory of s.
func NewCodecs(s *runtime.Scheme) serializer.CodecFactory { return serializer.NewCodecFactory(s) }
