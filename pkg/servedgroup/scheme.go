package servedgroup

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// GroupName is the API group of every view.
const GroupName = v1alpha1.GroupName

// SchemeGroupVersion is the served group version.
var SchemeGroupVersion = v1alpha1.SchemeGroupVersion

// NewScheme returns a scheme with the views of kinds registered in
// implicit.dev/v1alpha1. A view has its source's Go type, so its objects
// decode into the source type on the client. There is no internal version:
// views are never stored or converted, only served.
func NewScheme(served []kinds.Kind) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, k := range served {
		s.AddKnownTypeWithName(SchemeGroupVersion.WithKind(k.Kind), k.New())
		s.AddKnownTypeWithName(SchemeGroupVersion.WithKind(k.Kind+"List"), k.NewList())
	}
	// The answers beside the views: hierarchies, explanations, previews, rulesreviews.
	utilruntime.Must(v1alpha1.AddKnownTypes(s))
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	// List and get options arrive as meta v1; register them as
	// k8s.io/sample-apiserver does.
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	metav1.AddToGroupVersion(s, unversioned)
	s.AddUnversionedTypes(unversioned,
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{},
	)
	return s
}

// NewCodecs returns the codec factory of s.
func NewCodecs(s *runtime.Scheme) serializer.CodecFactory { return serializer.NewCodecFactory(s) }
