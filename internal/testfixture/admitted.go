package testfixture

import (
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// AdmittedMeta returns the metadata of an object a webhook is asked about:
// uid "uid-" and the name, annotations nil when opts set none.
func AdmittedMeta(namespace, name string, opts ...ObjectOpt) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{}}
	for _, o := range opts {
		o(&m)
	}
	if len(m.Annotations) == 0 {
		m.Annotations = nil
	}
	return m
}

// AdmittedRoleBinding returns the test RoleBinding as kube-apiserver sends
// it to a webhook.
func AdmittedRoleBinding(namespace, name string, opts ...ObjectOpt) *rbacv1.RoleBinding {
	rb := RoleBinding(AdmittedMeta(namespace, name, opts...))
	rb.TypeMeta = metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}
	return rb
}

// AdmittedRole returns a Role as kube-apiserver sends it to a webhook.
func AdmittedRole(namespace, name string, opts ...ObjectOpt) *rbacv1.Role {
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: AdmittedMeta(namespace, name, opts...),
	}
}

// AdmittedNetworkPolicy returns a NetworkPolicy as kube-apiserver sends it
// to a webhook.
func AdmittedNetworkPolicy(namespace, name string, opts ...ObjectOpt) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: AdmittedMeta(namespace, name, opts...),
	}
}
