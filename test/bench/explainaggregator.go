package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

// The aggregator's side of -explain (explain.go): what kube-apiserver's
// discovery and OpenAPI say of implicit.dev, and a touch of its APIService.

// touchAPIService annotates the APIService: kube-aggregator refetches its
// discovery at once (docs/operations.md).
func (b *bench) touchAPIService(ctx context.Context) {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench.implicit.dev/touched":%q}}}`, time.Now().Format(time.RFC3339Nano))
	gvr := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	if _, err := b.dyn.Resource(gvr).Patch(ctx, controlplane.APIServiceName, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		fmt.Printf("touching the APIService: %v\n", err)
	}
}

// aggregatedDiscoveryHas reports whether kube-apiserver's aggregated
// discovery, as kubectl asks for it, lists resource in implicit.dev.
func (b *bench) aggregatedDiscoveryHas(ctx context.Context, resource string) bool {
	raw, err := b.kube.Discovery().RESTClient().Get().AbsPath("/apis").
		SetHeader("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList").DoRaw(ctx)
	if err != nil {
		return false
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
			Versions []struct {
				Resources []struct {
					Resource string `json:"resource"`
				} `json:"resources"`
			} `json:"versions"`
		} `json:"items"`
	}
	if json.Unmarshal(raw, &list) != nil {
		return false
	}
	for _, g := range list.Items {
		if g.Metadata.Name != "implicit.dev" {
			continue
		}
		for _, v := range g.Versions {
			for _, res := range v.Resources {
				if res.Resource == resource {
					return true
				}
			}
		}
	}
	return false
}

// openAPIHash is the URL, with its hash, that kube-apiserver's /openapi/v3
// names for implicit.dev/v1alpha1.
func (b *bench) openAPIHash(ctx context.Context) (string, error) {
	raw, err := b.kube.Discovery().RESTClient().Get().AbsPath("/openapi/v3").SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		return "", err
	}
	var root struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &root); err != nil {
		return "", err
	}
	url := root.Paths["apis/implicit.dev/v1alpha1"].ServerRelativeURL
	if url == "" {
		return "", fmt.Errorf("no apis/implicit.dev/v1alpha1 in /openapi/v3")
	}
	return url, nil
}
