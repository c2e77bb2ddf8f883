package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/utils/ptr"
)

// ReplicasServiceName names the Service RegisterAPIServiceEndpoints creates:
// not ServiceName, so that the two registrations are told apart in logs.
const ReplicasServiceName = "implicit-apiserver-replicas"

// endpointSliceManager is the endpointslice.kubernetes.io/managed-by of the
// EndpointSlice RegisterAPIServiceEndpoints writes: not the EndpointSlice
// controller's, which leaves slices of other managers alone.
const endpointSliceManager = "controlplane.test.implicit.dev"

// RegisterAPIServiceEndpoints puts aggregated servers that listen on port at
// each of addrs behind the aggregation layer, as a Deployment's replicas are
// in a cluster: the Namespace implicit-system, a Service
// implicit-apiserver-replicas of type ClusterIP without a selector (port 443,
// name https, target port), one EndpointSlice naming every address as a
// ready endpoint, and the APIService v1alpha1.implicit.dev. Objects that
// exist already are updated. It then waits, up to
// Options.APIServiceTimeout, until the APIService is Available.
//
// kube-apiserver reaches the servers through these endpoints only with
// --enable-aggregator-routing=true: it then picks a ready endpoint at random
// for every request. Without it, kube-apiserver dials the Service's cluster
// IP, which nothing routes on a control plane without nodes. EndpointSlices
// refuse loopback and link-local addresses: give each server an address of
// its own, e.g. in a network namespace (with ServingIPs and a bind address
// that kube-apiserver is reachable at from there).
func (cp *ControlPlane) RegisterAPIServiceEndpoints(ctx context.Context, port int, addrs ...net.IP) error {
	if len(addrs) == 0 {
		return errors.New("controlplane: RegisterAPIServiceEndpoints needs at least one address")
	}
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
	const svcPort = 443
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ServiceNamespace, Name: ReplicasServiceName},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP,
			Ports: []corev1.ServicePort{{
				Name:       "https",
				Protocol:   corev1.ProtocolTCP,
				Port:       svcPort,
				TargetPort: intstr.FromInt32(int32(port)),
			}},
		},
	}
	if err := applyService(ctx, kube, svc); err != nil {
		return err
	}
	if err := applyEndpointSlice(ctx, kube, endpointSlice(port, addrs)); err != nil {
		return err
	}
	if err := applyAPIService(ctx, agg, ReplicasServiceName, svcPort); err != nil {
		return err
	}
	cp.logf("APIService %s registered for %v, port %d", APIServiceName, addrs, port)
	return cp.WaitAPIServiceAvailable(ctx)
}

// endpointSlice is the one EndpointSlice of the Service
// ReplicasServiceName: every address ready, on port.
func endpointSlice(port int, addrs []net.IP) *discoveryv1.EndpointSlice {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ServiceNamespace,
			Name:      ReplicasServiceName,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: ReplicasServiceName,
				discoveryv1.LabelManagedBy:   endpointSliceManager,
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{
			Name:     ptr.To("https"),
			Protocol: ptr.To(corev1.ProtocolTCP),
			Port:     ptr.To(int32(port)),
		}},
	}
	for _, ip := range addrs {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{ip.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	return slice
}

// applyEndpointSlice creates slice, or replaces the endpoints and ports of
// the one that exists.
func applyEndpointSlice(ctx context.Context, kube kubernetes.Interface, slice *discoveryv1.EndpointSlice) error {
	slices := kube.DiscoveryV1().EndpointSlices(slice.Namespace)
	_, err := slices.Create(ctx, slice, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := slices.Get(ctx, slice.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Labels, cur.AddressType = slice.Labels, slice.AddressType
			cur.Endpoints, cur.Ports = slice.Endpoints, slice.Ports
			_, err = slices.Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("applying EndpointSlice %s/%s: %w", slice.Namespace, slice.Name, err)
	}
	return nil
}
