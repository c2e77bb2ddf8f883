package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
)

// CABundle returns the PEM certificates the aggregated server serves with
// (it self-signs into its --cert-dir): what a webhook client config must
// trust to call it on 127.0.0.1.
func (a *AggregatedServer) CABundle() ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(a.certDir, "apiserver.crt"))
	if err != nil {
		return nil, fmt.Errorf("reading %s's serving certificate: %w", a.name, err)
	}
	return b, nil
}

// WebhookClientConfig returns the client config of the webhook at path on
// the aggregated server: its loopback URL and its CA bundle.
func (a *AggregatedServer) WebhookClientConfig(path string) (admissionregistrationv1.WebhookClientConfig, error) {
	ca, err := a.CABundle()
	if err != nil {
		return admissionregistrationv1.WebhookClientConfig{}, err
	}
	url := a.URL() + path
	return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca}, nil
}

// ApplyValidatingWebhookConfiguration creates cfg, or replaces the existing
// one of its name with it.
func (cp *ControlPlane) ApplyValidatingWebhookConfiguration(ctx context.Context, cfg *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	kube, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		return err
	}
	return createOrReplace(ctx, kube.AdmissionregistrationV1().ValidatingWebhookConfigurations(), cfg, "ValidatingWebhookConfiguration")
}

// objectClient is what createOrReplace needs of a typed client.
type objectClient[T metav1.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// createOrReplace creates obj, or replaces the existing object of its name
// with it; kind names it in errors.
func createOrReplace[T metav1.Object](ctx context.Context, client objectClient[T], obj T, kind string) error {
	_, err := client.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := client.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		obj.SetResourceVersion(cur.GetResourceVersion())
		_, err = client.Update(ctx, obj, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("applying %s %s: %w", kind, obj.GetName(), err)
	}
	return nil
}

// GuardsConfiguration is the name of the Validating- and
// MutatingWebhookConfiguration RegisterGuards writes; pass it to implicit-apiserver as
// --webhook-configuration. It differs from artifacts/base's, so the
// artifacts can be applied with --dry-run=server beside it.
const GuardsConfiguration = "implicit-apiserver-local"

// RegisterGuards registers implicit-apiserver's admission guards for the
// served source resources, called on the aggregated server's loopback URL:
// the mutating parent-uid and own-copy webhooks (RegisterParentUID) and the
// validating guards.
// implicit-apiserver then keeps the source-dependent match conditions
// current.
func (cp *ControlPlane) RegisterGuards(ctx context.Context, a *AggregatedServer, served []schema.GroupResource) error {
	if err := cp.RegisterParentUID(ctx, a); err != nil {
		return err
	}
	var cerr error
	cfg := webhookconfig.Configuration(GuardsConfiguration, served, func(path string) admissionregistrationv1.WebhookClientConfig {
		cc, err := a.WebhookClientConfig(path)
		if err != nil {
			cerr = err
		}
		return cc
	})
	if cerr != nil {
		return cerr
	}
	return cp.ApplyValidatingWebhookConfiguration(ctx, cfg)
}

// RegisterParentUID registers implicit-apiserver's mutating webhooks alone
// (MutatingWebhookConfiguration GuardsConfiguration): every parent label
// admitted from now on records its parent's uid, and every write to a
// materialized copy by anyone but the server makes it its writer's own.
// They refuse nothing, so they can come before objects the validating
// guards would.
func (cp *ControlPlane) RegisterParentUID(ctx context.Context, a *AggregatedServer) error {
	var cerr error
	cfg := webhookconfig.MutatingConfiguration(GuardsConfiguration, func(path string) admissionregistrationv1.WebhookClientConfig {
		cc, err := a.WebhookClientConfig(path)
		if err != nil {
			cerr = err
		}
		return cc
	})
	if cerr != nil {
		return cerr
	}
	return cp.ApplyMutatingWebhookConfiguration(ctx, cfg)
}

// ApplyMutatingWebhookConfiguration creates cfg, or replaces the existing
// one of its name with it.
func (cp *ControlPlane) ApplyMutatingWebhookConfiguration(ctx context.Context, cfg *admissionregistrationv1.MutatingWebhookConfiguration) error {
	kube, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		return err
	}
	return createOrReplace(ctx, kube.AdmissionregistrationV1().MutatingWebhookConfigurations(), cfg, "MutatingWebhookConfiguration")
}
