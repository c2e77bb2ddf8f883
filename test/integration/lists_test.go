package integration

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/servedgroup"
)

// TestListsStream reads one -A view list every way a client does, through
// kube-apiserver: client-go's JSON list without a limit (streamed item by
// item), its pages of 2 (merged page by page), the protobuf list (encoded
// whole, as every list was before lists streamed), and kubectl's tables,
// paged and whole. Each must hold the same items in the order of their
// storage keys, as kube-apiserver orders its own RoleBindings (a namespace
// whose name continues another's with '-' comes first), with the
// same version.
func TestListsStream(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	namespaces := []string{"ls-a", "ls-a-b", "ls-b"}
	label := withLabel("lists45", "yes")
	for _, ns := range namespaces {
		createNamespace(t, kube, ns, nil, nil)
		createRoleBinding(t, kube, ns, "ls-local", "view", "team:"+ns, label)
	}
	createRoleBinding(t, kube, globalNS, "ls-global", "view", "org:viewers", label)
	sel := metav1.ListOptions{LabelSelector: "lists45=yes"}

	// What kube-apiserver orders: its own RoleBindings of the namespaces.
	native, err := kube.RbacV1().RoleBindings("").List(t.Context(), sel)
	if err != nil {
		t.Fatal(err)
	}
	var nativeOrder []string
	for _, rb := range native.Items {
		if rb.Namespace != globalNS {
			nativeOrder = append(nativeOrder, rb.Namespace)
		}
	}
	if want := []string{"ls-a-b", "ls-a", "ls-b"}; !slices.Equal(nativeOrder, want) {
		t.Fatalf("kube-apiserver lists RoleBindings of %v, want %v", nativeOrder, want)
	}

	var whole *unstructured.UnstructuredList
	eventually(t, "the views hold ls-local and ls-global in each namespace", func(ctx context.Context) error {
		l, err := dyn.Resource(viewRoleBindings).List(ctx, sel)
		if err != nil {
			return err
		}
		var mine []string
		for _, it := range l.Items {
			if strings.HasPrefix(it.GetNamespace(), "ls-") {
				mine = append(mine, it.GetNamespace()+"/"+it.GetName()+"="+it.GetLabels()["implicit.dev/scope"])
			}
		}
		want := []string{
			"ls-a-b/ls-global=global", "ls-a-b/ls-local=local",
			"ls-a/ls-global=global", "ls-a/ls-local=local",
			"ls-b/ls-global=global", "ls-b/ls-local=local",
		}
		if !slices.Equal(mine, want) {
			return fmt.Errorf("view items %v, want %v", mine, want)
		}
		whole = l
		return nil
	})

	// Every other way, at the same version: retried while the cluster
	// moves on (another version) between the reads.
	eventually(t, "pages, protobuf and kubectl tables read what the whole list does", func(ctx context.Context) error {
		l, err := dyn.Resource(viewRoleBindings).List(ctx, sel)
		if err != nil {
			return err
		}
		whole = l
		rv := l.GetResourceVersion()
		keys := keysOfList(l.Items)

		var paged []unstructured.Unstructured
		opts := metav1.ListOptions{LabelSelector: sel.LabelSelector, Limit: 2, ResourceVersion: rv}
		for {
			p, err := dyn.Resource(viewRoleBindings).List(ctx, opts)
			if err != nil {
				return fmt.Errorf("page after %d items: %w", len(paged), err)
			}
			if p.GetResourceVersion() != rv {
				return fmt.Errorf("a page at %s, the list at %s", p.GetResourceVersion(), rv)
			}
			paged = append(paged, p.Items...)
			if p.GetContinue() == "" {
				break
			}
			if len(p.Items) != 2 {
				return fmt.Errorf("a page of %d items with a continuation", len(p.Items))
			}
			opts = metav1.ListOptions{LabelSelector: sel.LabelSelector, Limit: 2, Continue: p.GetContinue()}
		}
		if !reflect.DeepEqual(paged, l.Items) {
			return fmt.Errorf("pages of 2 hold %v, the whole list %v", keysOfList(paged), keys)
		}

		pb, pbRV, err := protobufList(ctx, sel.LabelSelector)
		if err != nil {
			return err
		}
		if pbRV != rv {
			return fmt.Errorf("the protobuf list at %s, the JSON list at %s", pbRV, rv)
		}
		if len(pb) != len(l.Items) {
			return fmt.Errorf("protobuf: %d items, JSON: %d", len(pb), len(l.Items))
		}
		for i := range pb {
			got, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&pb[i])
			if err != nil {
				return err
			}
			want := l.Items[i].DeepCopy().Object
			delete(want, "apiVersion")
			delete(want, "kind")
			if !reflect.DeepEqual(got, want) {
				return fmt.Errorf("item %d: protobuf %v, JSON %v", i, got, want)
			}
		}

		for _, chunk := range []string{"2", "0"} {
			out, _, err := cp.Kubectl(ctx, "get", "rolebindings.implicit.dev", "-A", "-l", "lists45=yes", "--chunk-size="+chunk, "--no-headers")
			if err != nil {
				return err
			}
			var rows []string
			for line := range strings.Lines(out) {
				if f := strings.Fields(line); len(f) >= 2 {
					rows = append(rows, f[0]+"/"+f[1])
				}
			}
			if !slices.Equal(rows, keys) {
				return fmt.Errorf("kubectl get -A --chunk-size=%s: rows %v, the list %v", chunk, rows, keys)
			}
		}
		return nil
	})
	t.Logf("%d items at %s read alike", len(whole.Items), whole.GetResourceVersion())
}

func keysOfList(items []unstructured.Unstructured) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.GetNamespace() + "/" + it.GetName()
	}
	return out
}

// protobufList lists the role binding views of every namespace in
// protobuf, as a typed client of the served group does.
func protobufList(ctx context.Context, labelSelector string) ([]rbacv1.RoleBinding, string, error) {
	cfg := rest.CopyConfig(cp.AdminConfig())
	cfg.GroupVersion = &servedgroup.SchemeGroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = servedgroup.NewCodecs(servedgroup.NewScheme(kinds.BuiltIns())).WithoutConversion()
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf
	c, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, "", err
	}
	var l rbacv1.RoleBindingList
	res := c.Get().Resource("rolebindings").Param("labelSelector", labelSelector).Do(ctx)
	var ct string
	res.ContentType(&ct)
	if err := res.Into(&l); err != nil {
		return nil, "", err
	}
	if ct != runtime.ContentTypeProtobuf {
		return nil, "", fmt.Errorf("answered in %q, not protobuf", ct)
	}
	return l.Items, l.ResourceVersion, nil
}
