package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// sgGlobal is the global namespace of networkpolicies for this test's
// server, which materializes them and answers guards of its own.
const sgGlobal = "sg-global"

const sgConfig = `apiVersion: config.implicit.dev/v1alpha1
kind: ImplicitConfiguration
resources:
- {group: rbac.authorization.k8s.io, version: v1, resource: rolebindings}
- {group: rbac.authorization.k8s.io, version: v1, resource: roles}
- {group: networking.k8s.io, version: v1, resource: networkpolicies, globalNamespace: ` + sgGlobal + `, delivery: Materialize}
`

// TestLockedMaterializedStandIn is issue 24's fifth hole through
// kube-apiserver: with NetworkPolicies materialized, sg-mine is created opted
// out (implicit.dev/inherit: "false") and given an allow-all NetworkPolicy
// named like the locked global sg-deny; opting it back in would make the
// locked item its view's while the real object the CNI enforces stays the
// tenant's. The opt-in is refused, naming the object, even for
// cluster-admin; once the object is gone it is admitted. The guards that
// judge are those of a server that materializes the kind (as in
// production, where one server does both): a second webhook configuration
// sends the requests to it, beside the suite's.
func TestLockedMaterializedStandIn(t *testing.T) {
	kube, _ := admin(t)
	ctx := t.Context()
	adm := gdAdmin(t)

	createNamespace(t, kube, sgGlobal, nil, nil)
	createNamespace(t, kube, "sg-mine", map[string]string{v1alpha1.LabelInherit: "false"}, nil)
	t.Cleanup(func() { deleteAllCopies(t, kube) })

	config := filepath.Join(t.TempDir(), "standin.yaml")
	if err := os.WriteFile(config, []byte(sgConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(cp.WorkDir(), "implicit-apiserver-sa.kubeconfig")
	t.Log("starting implicit-standin: networkpolicies delivered as copies, answering guards of its own")
	// Not t.Context(): that ends before the cleanups, and the cleanups'
	// writes still reach this server's guards until its webhook
	// configuration is gone.
	serverCtx, stopServer := context.WithCancel(context.Background())
	t.Cleanup(stopServer)
	s, err := cp.StartAggregated(serverCtx, controlplane.AggregatedServerOptions{
		Binary: os.Getenv(binaryEnv), Name: "implicit-standin",
		Args: append(append([]string{"-v=2", "--webhook-configuration=", "--config=" + config}, cp.WebhookServerArgs()...),
			identityArgs(kubeconfig)...),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("implicit-standin log tail:\n%s", s.LogTail(40))
		}
		_ = s.Stop()
	})
	var cerr error
	guards := webhookconfig.Configuration("implicit-standin-guards", []schema.GroupResource{{Group: "networking.k8s.io", Resource: "networkpolicies"}},
		func(path string) admissionregistrationv1.WebhookClientConfig {
			cc, err := s.WebhookClientConfig(path)
			if err != nil {
				cerr = err
			}
			return cc
		})
	if cerr != nil {
		t.Fatal(cerr)
	}
	if err := cp.ApplyValidatingWebhookConfiguration(ctx, guards); err != nil {
		t.Fatal(err)
	}
	// Before the server stops: its guards fail closed. Objects of the test
	// go first (their cleanups run before this one).
	t.Cleanup(func() {
		err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), guards.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s: %v", guards.Name, err)
		}
	})

	t.Log("the locked global sg-deny; sg-mine, opted out, holds an allow-all sg-deny of its own")
	locked := policy(sgGlobal, "sg-deny", "")
	locked.Annotations = map[string]string{v1alpha1.AnnotationLocked: "true"}
	if _, err := kube.NetworkingV1().NetworkPolicies(sgGlobal).Create(ctx, locked, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.NetworkingV1().NetworkPolicies(sgGlobal).Delete(context.Background(), "sg-deny", metav1.DeleteOptions{})
	})
	createPolicy(t, kube, "sg-mine", "sg-deny", "anything")

	t.Log("opting sg-mine in is refused while it holds the object, for cluster-admin too")
	optIn := []string{"label", "namespace", "sg-mine", v1alpha1.LabelInherit + "-"}
	want := "networkpolicies.networking.k8s.io sg-global/sg-deny (objects of that name in sg-mine)"
	eventually(t, "the opt-in of sg-mine is refused naming sg-mine/sg-deny (the server's mirror holds both)", func(context.Context) error {
		r := adm.run(append(optIn, "--dry-run=server")...)
		if r.err == nil {
			return errorf("admitted")
		}
		if !strings.Contains(r.stderr, want) {
			return errorf("refused otherwise: %s", gdErrorLine(r.stderr))
		}
		return nil
	})
	adm.refused([]string{`admission webhook "parents.implicit.dev" denied the request`, want, "delete or rename them first"}, optIn...)

	t.Log("the object is deleted: now the opt-in is admitted, and the view's sg-deny is the real object (a copy)")
	if err := kube.NetworkingV1().NetworkPolicies("sg-mine").Delete(ctx, "sg-deny", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the opt-in of sg-mine is admitted once its sg-deny is gone", func(context.Context) error {
		if r := adm.run(append(optIn, "--dry-run=server")...); r.err != nil {
			return errorf("%s", gdErrorLine(r.stderr))
		}
		return nil
	})
	adm.ok(optIn...)
	eventually(t, "sg-mine holds a copy of the locked sg-deny", func(ctx context.Context) error {
		np, err := kube.NetworkingV1().NetworkPolicies("sg-mine").Get(ctx, "sg-deny", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !v1alpha1.IsMaterialized(np.Labels) {
			return errorf("sg-mine/sg-deny is not a copy: %v", np.Labels)
		}
		return nil
	})
}
