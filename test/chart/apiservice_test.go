package chart_test

import (
	"bytes"
	"encoding/base64"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestAPIService: the view group sorts below every CRD group (issue 14, item
// 2), and its caBundle is the CA of the serving certificate the chart makes,
// or cert-manager injects it.
func TestAPIService(t *testing.T) {
	t.Parallel()
	t.Run("helm certificates", func(t *testing.T) {
		t.Parallel()
		objs := mustTemplate(t)
		var svc struct {
			Spec struct {
				GroupPriorityMinimum int32  `json:"groupPriorityMinimum"`
				VersionPriority      int32  `json:"versionPriority"`
				CABundle             []byte `json:"caBundle"`
				Service              struct {
					Namespace string `json:"namespace"`
					Name      string `json:"name"`
				} `json:"service"`
			} `json:"spec"`
		}
		convert(t, objs.get("APIService", "v1alpha1.implicit.dev"), &svc)
		if svc.Spec.GroupPriorityMinimum != 100 || svc.Spec.VersionPriority != 15 {
			t.Errorf("groupPriorityMinimum %d versionPriority %d, want 100 and 15", svc.Spec.GroupPriorityMinimum, svc.Spec.VersionPriority)
		}
		if svc.Spec.Service.Namespace != namespace || svc.Spec.Service.Name != "implicit-apiserver" {
			t.Errorf("service %s/%s, want %s/implicit-apiserver", svc.Spec.Service.Namespace, svc.Spec.Service.Name, namespace)
		}
		var secret corev1.Secret
		convert(t, objs.get("Secret", "implicit-apiserver-serving-cert"), &secret)
		if len(secret.Data["tls.crt"]) == 0 || len(secret.Data["tls.key"]) == 0 {
			t.Fatalf("serving Secret without tls.crt or tls.key: %v", secret.Data)
		}
		if !bytes.Equal(svc.Spec.CABundle, secret.Data["ca.crt"]) || !bytes.HasPrefix(svc.Spec.CABundle, []byte("-----BEGIN CERTIFICATE-----")) {
			t.Errorf("APIService caBundle is not the serving Secret's ca.crt")
		}
		for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
			u := objs.get(kind, "implicit-apiserver")
			hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
			for _, h := range hooks {
				ca, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "caBundle")
				if raw, _ := base64.StdEncoding.DecodeString(ca); !bytes.Equal(raw, secret.Data["ca.crt"]) {
					t.Errorf("%s webhook %v: caBundle is not the serving Secret's ca.crt", kind, h.(map[string]any)["name"])
				}
			}
		}
	})
	t.Run("cert-manager", func(t *testing.T) {
		t.Parallel()
		objs := mustTemplate(t, "certificates.mode=cert-manager")
		want := namespace + "/implicit-apiserver-serving-cert"
		for _, o := range []*unstructured.Unstructured{objs.get("APIService", "v1alpha1.implicit.dev"),
			objs.get("ValidatingWebhookConfiguration", "implicit-apiserver"), objs.get("MutatingWebhookConfiguration", "implicit-apiserver")} {
			if got := o.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != want {
				t.Errorf("%s: inject-ca-from %q, want %q", o.GetKind(), got, want)
			}
		}
		if ca, found, _ := unstructured.NestedString(objs.get("APIService", "v1alpha1.implicit.dev").Object, "spec", "caBundle"); found {
			t.Errorf("APIService has a caBundle %q in cert-manager mode", ca)
		}
		if objs.get("Secret", "implicit-apiserver-serving-cert") != nil {
			t.Error("a serving Secret is rendered in cert-manager mode")
		}
		if objs.get("Certificate", "implicit-apiserver-serving-cert") == nil {
			t.Error("no Certificate implicit-apiserver-serving-cert in cert-manager mode")
		}
	})
}

// TestPriorityClassQuota: a system priority class outside kube-system comes
// with a ResourceQuota scoped to it, and never one without the other (issue
// 14, item 3).
func TestPriorityClassQuota(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, ns, class string
		set             []string
		wantQuota       bool
	}{
		{name: "default: system-cluster-critical", ns: namespace, class: "system-cluster-critical", wantQuota: true},
		{name: "system-node-critical", ns: namespace, class: "system-node-critical", set: []string{"priorityClassName=system-node-critical"}, wantQuota: true},
		{name: "unset", ns: namespace, set: []string{"priorityClassName="}},
		{name: "in kube-system", ns: "kube-system", class: "system-cluster-critical"},
		{name: "a class of one's own", ns: namespace, class: "platform-high", set: []string{"priorityClassName=platform-high"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs, err := template(t, tc.ns, tc.set...)
			if err != nil {
				t.Fatal(err)
			}
			var d appsv1.Deployment
			convert(t, objs.get("Deployment", "implicit-apiserver"), &d)
			if got := d.Spec.Template.Spec.PriorityClassName; got != tc.class {
				t.Errorf("pod priorityClassName %q, want %q", got, tc.class)
			}
			quotas := objs.ofKind("ResourceQuota")
			if !tc.wantQuota {
				if len(quotas) != 0 {
					t.Errorf("%d ResourceQuotas rendered, want none", len(quotas))
				}
				return
			}
			if len(quotas) != 1 {
				t.Fatalf("%d ResourceQuotas rendered, want 1", len(quotas))
			}
			var q corev1.ResourceQuota
			convert(t, quotas[0], &q)
			want := &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{{
				ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{tc.class}}}}
			if !reflect.DeepEqual(q.Spec.ScopeSelector, want) {
				t.Errorf("quota scope %+v, want %+v", q.Spec.ScopeSelector, want)
			}
			if q.Namespace != tc.ns {
				t.Errorf("quota in %q, want %q", q.Namespace, tc.ns)
			}
			if pods := q.Spec.Hard[corev1.ResourcePods]; pods.Value() < int64(*d.Spec.Replicas)+1 {
				t.Errorf("quota allows %s pods: fewer than the replicas and a rollout's surge pod", pods.String())
			}
		})
	}
}
