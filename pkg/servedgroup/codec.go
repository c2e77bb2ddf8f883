package servedgroup

import (
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// unstructuredSerializer is the group's negotiated serializer: the scheme's,
// except that lists of kinds served from unstructured objects are written as
// they are. The scheme's versioning encoder would convert an
// UnstructuredList item by item into registered types, and the kinds that
// appear at run time are registered nowhere; their items already carry the
// view's apiVersion and kind. (Single unstructured items pass the scheme's
// encoder unconverted already.)
type unstructuredSerializer struct {
	runtime.NegotiatedSerializer
}

// EncoderForVersion implements runtime.NegotiatedSerializer.
func (s unstructuredSerializer) EncoderForVersion(encoder runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	return unstructuredListEncoder{Encoder: s.NegotiatedSerializer.EncoderForVersion(encoder, gv), raw: encoder}
}

// unstructuredListEncoder writes UnstructuredLists with raw, everything else
// with the versioning Encoder.
type unstructuredListEncoder struct {
	runtime.Encoder
	raw runtime.Encoder
}

// Encode implements runtime.Encoder.
func (e unstructuredListEncoder) Encode(obj runtime.Object, w io.Writer) error {
	switch l := obj.(type) {
	case *unstructured.UnstructuredList:
		return e.raw.Encode(l, w)
	case *registry.StreamList:
		return e.encodeStream(l, w)
	}
	return e.Encoder.Encode(obj, w)
}
