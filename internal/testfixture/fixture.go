package testfixture

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// NamespaceOpt decorates a test namespace.
type NamespaceOpt func(*corev1.Namespace)

// Parent labels the namespace with parent p.
func Parent(p string) NamespaceOpt {
	return func(ns *corev1.Namespace) { ns.Labels[v1alpha1.LabelParent] = p }
}

// Exclude annotates the namespace with the exclusions v.
func Exclude(v string) NamespaceOpt {
	return func(ns *corev1.Namespace) { ns.Annotations[v1alpha1.AnnotationExclude] = v }
}

// ParentUID annotates the namespace with the parent uid it recorded.
func ParentUID(uid string) NamespaceOpt {
	return func(ns *corev1.Namespace) { ns.Annotations[v1alpha1.AnnotationParentUID] = uid }
}

// Recorded annotates the namespace with the uid of the namespace its parent
// label names, as the parent-uid webhook records it.
func Recorded(ns *corev1.Namespace) {
	ns.Annotations[v1alpha1.AnnotationParentUID] = string(NamespaceUID(ns.Labels[v1alpha1.LabelParent]))
}

// NamespaceUID is the uid of the test namespace name.
func NamespaceUID(name string) types.UID { return types.UID("ns-" + name) }

// NoInherit labels the namespace implicit.dev/inherit: "false".
func NoInherit(ns *corev1.Namespace) { ns.Labels[v1alpha1.LabelInherit] = "false" }

// Namespace returns a new Namespace object: as with informers, every change
// is a new object, never an edit of one already handed out.
func Namespace(name string, opts ...NamespaceOpt) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		UID:         NamespaceUID(name),
		Labels:      map[string]string{corev1.LabelMetadataName: name},
		Annotations: map[string]string{},
	}}
	for _, o := range opts {
		o(ns)
	}
	return ns
}
