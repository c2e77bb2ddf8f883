package registry_test

import (
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// TestHostAdmissionPolicies: the host's policies and bindings are read by
// informers the first review starts and stop stops; without a client, a
// review is answered with an error.
func TestHostAdmissionPolicies(t *testing.T) {
	t.Parallel()
	client := fake.NewClientset(
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "vap"}},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "vapb"}},
		&admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "map"}},
	)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	set, err := registry.NewHostAdmissionPolicies(client, stop).AdmissionPolicies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Validating) != 1 || set.Validating[0].Name != "vap" || len(set.ValidatingBindings) != 1 ||
		len(set.Mutating) != 1 || len(set.MutatingBindings) != 0 {
		t.Errorf("AdmissionPolicies = %+v, want the host's one validating policy, its binding and one mutating policy", set)
	}
	if _, err := registry.NewHostAdmissionPolicies(nil, stop).AdmissionPolicies(ctx); err == nil {
		t.Error("AdmissionPolicies without a host client: no error")
	}
}
