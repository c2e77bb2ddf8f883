package main

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// measureAuthz times SubjectAccessReviews created through kube-apiserver,
// which asks Node, RBAC, then implicit-apiserver's webhook: a user granted
// by native RBAC (a real RoleBinding in the native namespace; the webhook is
// not asked), the same user in a tenant where only the inherited global
// RoleBinding grants it (the webhook allows), and a user nothing grants (the
// webhook has no opinion). Each review names another ConfigMap, so neither
// kube-apiserver's webhook cache nor implicit-apiserver's answers.
func (b *bench) measureAuthz(ctx context.Context, res *nResult) error {
	cfg := rest.CopyConfig(b.cfg)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	user := "bench-user-" + globalName(1)
	tenant := b.tenants[len(b.tenants)/2]
	review := func(ctx context.Context, user, namespace, name string) (bool, time.Duration, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "get", Resource: "configmaps", Name: name},
		}}
		start := time.Now()
		out, err := c.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		d := time.Since(start)
		if err != nil {
			return false, d, err
		}
		return out.Status.Allowed, d, nil
	}
	cases := []struct {
		name, user, namespace string
		allowed               bool
		out                   *samples
	}{
		{"native RBAC grant (webhook not asked)", user, nativeNS, true, &res.Authz.Native},
		{"inherited grant (webhook allows)", user, tenant, true, &res.Authz.Inherited},
		{"no grant (webhook has no opinion)", "bench-nobody", tenant, false, &res.Authz.NoGrant},
	}
	for i, cs := range cases {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, _, err := review(ctx, cs.user, cs.namespace, "warmup")
			return err == nil && got == cs.allowed, nil
		})
		if err != nil {
			return fmt.Errorf("%s: the review never answered allowed=%v: %w", cs.name, cs.allowed, err)
		}
		for j := range b.o.authzRequests {
			got, d, err := review(ctx, cs.user, cs.namespace, fmt.Sprintf("cm-%d-%d", i, j))
			if err != nil {
				return err
			}
			if got != cs.allowed {
				return fmt.Errorf("%s: review %d answered allowed=%v", cs.name, j, got)
			}
			*cs.out = append(*cs.out, d)
		}
		fmt.Printf("  SubjectAccessReview, %s: %s\n", cs.name, *cs.out)
	}
	return nil
}
