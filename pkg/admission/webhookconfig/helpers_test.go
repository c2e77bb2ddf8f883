package webhookconfig_test

import (
	"testing"

	"go.uber.org/goleak"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestMain fails the package if any test leaves a goroutine behind:
// ConditionSync.Run must end with its context.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const global = "implicit-global"

// served are the default served source resources of DESIGN.md.
var served = []schema.GroupResource{
	{Group: rbacv1.GroupName, Resource: "rolebindings"},
	{Group: rbacv1.GroupName, Resource: "roles"},
	{Group: networkingv1.GroupName, Resource: "networkpolicies"},
}

// objOpt decorates a test source object; isLocked is internal/testfixture's
// Locked.
type objOpt = testfixture.ObjectOpt

var isLocked = testfixture.Locked

func annotated(k, v string) objOpt {
	return func(m *metav1.ObjectMeta) { m.Annotations[k] = v }
}

func labelled(k, v string) objOpt {
	return func(m *metav1.ObjectMeta) {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[k] = v
	}
}

// candidateFor makes a test object a candidate for stable, seen where
// selector matches.
func candidateFor(stable, selector string) objOpt {
	return func(m *metav1.ObjectMeta) {
		m.Annotations[v1alpha1.AnnotationCandidateFor] = stable
		m.Annotations[v1alpha1.AnnotationCanarySelector] = selector
	}
}

// The objects as kube-apiserver sends them to a webhook (testfixture).
var (
	objectMeta    = testfixture.AdmittedMeta
	roleBinding   = testfixture.AdmittedRoleBinding
	role          = testfixture.AdmittedRole
	networkPolicy = testfixture.AdmittedNetworkPolicy
)

// scale is the Scale kube-apiserver sends for a scale subresource request:
// the source's name and namespace, none of its annotations.
func scale(namespace, name string, replicas int32) *autoscalingv1.Scale {
	return &autoscalingv1.Scale{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v1", Kind: "Scale"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name)},
		Spec:       autoscalingv1.ScaleSpec{Replicas: replicas},
	}
}

// ns returns the test Namespace as kube-apiserver sends it to a webhook,
// with the parent label when parent is set.
func ns(name, parent string, opts ...nsOpt) *corev1.Namespace {
	if parent != "" {
		opts = append([]nsOpt{testfixture.Parent(parent)}, opts...)
	}
	n := testfixture.Namespace(name, opts...)
	n.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}
	if len(n.Annotations) == 0 {
		n.Annotations = nil
	}
	return n
}

// Namespace builders, shared with the other packages' tests.
type nsOpt = testfixture.NamespaceOpt

var (
	recorded  = testfixture.Recorded
	noInherit = testfixture.NoInherit
)

// parentUID records uid as the namespace's parent-uid.
func parentUID(uid types.UID) nsOpt { return testfixture.ParentUID(string(uid)) }
