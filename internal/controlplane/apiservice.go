package controlplane

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
)

// The names RegisterAPIService uses, as artifacts/ does in a cluster.
const (
	// APIGroup and APIVersion are the API implicit-apiserver serves.
	APIGroup   = "implicit.dev"
	APIVersion = "v1alpha1"
	// APIServiceName is the APIService that routes APIGroup/APIVersion.
	APIServiceName = APIVersion + "." + APIGroup
	// ServiceNamespace and ServiceName name the Service the APIService
	// points at. The name differs from artifacts/base's Service (a
	// ClusterIP one), so the artifacts can be applied with --dry-run=server
	// beside a local registration without the two Services colliding.
	ServiceNamespace = "implicit-system"
	ServiceName      = "implicit-apiserver-local"
)

// RegisterAPIService puts the aggregated server listening on port on
// 127.0.0.1 behind the aggregation layer: the Namespace implicit-system, a
// Service implicit-apiserver-local of type ExternalName (localhost:<port>) and the
// APIService v1alpha1.implicit.dev. Objects that exist already are updated,
// so it may be called again, e.g. for a server on another port. It then
// waits, up to Options.APIServiceTimeout, until the APIService is Available.
func (cp *ControlPlane) RegisterAPIService(ctx context.Context, port int) error {
	cfg := cp.AdminConfig()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building client: %w", err)
	}
	agg, err := aggregator.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building aggregator client: %w", err)
	}

	if err := ensureServiceNamespace(ctx, kube); err != nil {
		return err
	}

	// kube-aggregator resolves an ExternalName Service to
	// https://<externalName>:<APIService port> and dials it from
	// kube-apiserver: here, the aggregated server on this machine.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ServiceNamespace, Name: ServiceName},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports: []corev1.ServicePort{{
				Name:       "https",
				Protocol:   corev1.ProtocolTCP,
				Port:       int32(port),
				TargetPort: intstr.FromInt32(int32(port)),
			}},
		},
	}
	if err := applyService(ctx, kube, svc); err != nil {
		return err
	}
	if err := applyAPIService(ctx, agg, ServiceName, int32(port)); err != nil {
		return err
	}
	cp.logf("APIService %s registered for 127.0.0.1:%d", APIServiceName, port)
	return cp.WaitAPIServiceAvailable(ctx)
}

// WaitAPIServiceAvailable waits, up to Options.APIServiceTimeout, until the
// APIService v1alpha1.implicit.dev has the condition Available=True, e.g.
// after an aggregated server restarted. The error carries the condition's
// reason and message.
func (cp *ControlPlane) WaitAPIServiceAvailable(ctx context.Context) error {
	agg, err := aggregator.NewForConfig(cp.AdminConfig())
	if err != nil {
		return fmt.Errorf("building aggregator client: %w", err)
	}
	timeout := cp.opts.APIServiceTimeout
	last := "APIService not read yet"
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		svc, err := agg.ApiregistrationV1().APIServices().Get(ctx, APIServiceName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range svc.Status.Conditions {
			if c.Type != apiregistrationv1.Available {
				continue
			}
			last = fmt.Sprintf("Available=%s, reason %s: %s", c.Status, c.Reason, c.Message)
			return c.Status == apiregistrationv1.ConditionTrue, nil
		}
		last = "no Available condition yet"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s not available after %s: %s (%w)", APIServiceName, timeout, last, err)
	}
	cp.logf("APIService %s is Available", APIServiceName)
	return nil
}

// WaitDiscovery waits, up to Options.APIServiceTimeout, until a fresh
// discovery client finds implicit.dev's resources. Available is not yet
// what kubectl sees: kube-aggregator adds the group to its aggregated
// discovery on its next refresh, and until then a kubectl with an empty
// cache answers "the server doesn't have a resource type" (test/conformance
// met it on a busy machine). Call it after the APIService is Available, for
// a server that serves the group (not a stand-in).
//
// It waits discoveryRefresh longer than Options.APIServiceTimeout: the
// APIService's static endpoint here has no readiness gate, so the
// aggregator may fetch a restarted server's discovery in the moment between
// its listening and its serving the group (a pod's readiness keeps it out of
// the endpoints then), and keeps that document until its next refresh, a
// minute later (test/conformance met it: the group came back 60.0 s after,
// as the wait of one minute ended).
func (cp *ControlPlane) WaitDiscovery(ctx context.Context) error {
	timeout := cp.opts.APIServiceTimeout + discoveryRefresh
	last := "not in discovery yet"
	dc, err := discovery.NewDiscoveryClientForConfig(cp.AdminConfig())
	if err != nil {
		return fmt.Errorf("building discovery client: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		// Other groups' failures (ErrGroupDiscoveryFailed) do not matter.
		_, lists, err := dc.ServerGroupsAndResources()
		for _, l := range lists {
			if l != nil && strings.HasPrefix(l.GroupVersion, APIGroup+"/") && len(l.APIResources) > 0 {
				return true, nil
			}
		}
		if err != nil {
			last = err.Error()
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s: group %s not in discovery after %s: %s (%w)", APIServiceName, APIGroup, timeout, last, err)
	}
	return nil
}

// discoveryRefresh is how often kube-aggregator fetches an APIService's
// discovery document again, whatever it holds.
const discoveryRefresh = time.Minute

// ensureServiceNamespace creates the Namespace ServiceNamespace unless it
// exists. As in artifacts/base, the server's own namespace is no tenant:
// nothing org-wide reaches it through inheritance.
func ensureServiceNamespace(ctx context.Context, kube kubernetes.Interface) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ServiceNamespace, Labels: map[string]string{"implicit.dev/inherit": "false"}}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ServiceNamespace, err)
	}
	return nil
}

// applyService creates svc, or sets the spec of the Service that exists.
func applyService(ctx context.Context, kube kubernetes.Interface, svc *corev1.Service) error {
	services := kube.CoreV1().Services(svc.Namespace)
	_, err := services.Create(ctx, svc, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := services.Get(ctx, svc.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			spec := *svc.Spec.DeepCopy()
			if spec.Type != corev1.ServiceTypeExternalName && spec.ClusterIP == "" {
				// Allocated by kube-apiserver, and immutable: keep it.
				spec.ClusterIP, spec.ClusterIPs = cur.Spec.ClusterIP, cur.Spec.ClusterIPs
			}
			cur.Spec = spec
			_, err = services.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("applying service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

// applyAPIService creates or updates the APIService v1alpha1.implicit.dev
// so that it routes to port of the Service ServiceNamespace/serviceName.
func applyAPIService(ctx context.Context, agg aggregator.Interface, serviceName string, port int32) error {
	apiService := &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: APIServiceName},
		Spec: apiregistrationv1.APIServiceSpec{
			Service: &apiregistrationv1.ServiceReference{
				Namespace: ServiceNamespace,
				Name:      serviceName,
				Port:      &port,
			},
			Group:   APIGroup,
			Version: APIVersion,
			// The aggregated server self-signs its serving certificate at
			// start-up, so there is no CA to pin. Skipping verification is
			// acceptable only because the server runs on this machine, in a
			// throw-away dev or test control plane; artifacts/ sets caBundle
			// for real clusters.
			InsecureSkipTLSVerify: true,
			GroupPriorityMinimum:  100,
			VersionPriority:       15,
		},
	}
	apiServices := agg.ApiregistrationV1().APIServices()
	_, err := apiServices.Create(ctx, apiService, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := apiServices.Get(ctx, APIServiceName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec = apiService.Spec
			_, err = apiServices.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("applying APIService %s: %w", APIServiceName, err)
	}
	return nil
}
