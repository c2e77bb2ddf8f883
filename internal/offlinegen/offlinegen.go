// Package offlinegen generates random hierarchies as manifests: namespaces
// with parents and exclusions, RoleBindings and NetworkPolicies (some
// locked, some overlays) in the global namespace and the tenants, and random edits of
// them. The integration test of pkg/offline applies them to a live server
// and to the offline evaluation alike; the offline benchmark writes large
// ones. It builds on nothing of the product but the label names.
package offlinegen

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// Config sizes a world.
type Config struct {
	// Namespaces are the tenants, Sources the sources spread over them and
	// the global namespace.
	Namespaces, Sources int
	// Names is the pool of source names: a small pool makes shadows,
	// locks and exclusions meet.
	Names int
	// Prefix starts every namespace's and source's name, so that worlds
	// of one cluster don't meet.
	Prefix string
	// GlobalNamespace holds the global sources.
	GlobalNamespace string
}

// World is a generated set of manifests.
type World struct {
	Config
	Namespaces []*unstructured.Unstructured
	Sources    []*unstructured.Unstructured
}

// Generate makes a world with r: a forest of tenants (each a child of an
// earlier one or a root), a third of them excluding a name, and sources
// with names from the pool, one in eight locked.
func Generate(r *rand.Rand, c Config) World {
	if c.Names == 0 {
		c.Names = 8
	}
	if c.GlobalNamespace == "" {
		c.GlobalNamespace = "implicit-global"
	}
	w := World{Config: c}
	for i := 0; i < c.Namespaces; i++ {
		ns := object("v1", "Namespace", "", w.namespace(i))
		if i > 0 && r.Intn(4) != 0 {
			ns.SetLabels(map[string]string{v1alpha1.LabelParent: w.namespace(r.Intn(i))})
		}
		if r.Intn(3) == 0 {
			ns.SetAnnotations(map[string]string{v1alpha1.AnnotationExclude: w.resource(r) + "/" + w.name(r)})
		}
		w.Namespaces = append(w.Namespaces, ns)
	}
	seen := map[string]bool{}
	for len(w.Sources) < c.Sources {
		ns := c.GlobalNamespace
		if c.Namespaces > 0 && r.Intn(3) != 0 {
			ns = w.namespace(r.Intn(c.Namespaces))
		}
		s := w.Source(r, ns, w.resource(r), w.name(r))
		key := s.GetKind() + "/" + ns + "/" + s.GetName()
		if seen[key] {
			if c.Sources > c.Names*(c.Namespaces+1)*2 {
				s.SetName(fmt.Sprintf("%s-%d", s.GetName(), len(w.Sources)))
			} else {
				continue
			}
			key = s.GetKind() + "/" + ns + "/" + s.GetName()
		}
		seen[key] = true
		w.Sources = append(w.Sources, s)
	}
	return w
}

func (w World) namespace(i int) string { return fmt.Sprintf("%sns-%d", w.Prefix, i) }

func (w World) name(r *rand.Rand) string { return fmt.Sprintf("%sitem-%d", w.Prefix, r.Intn(w.Names)) }

func (w World) resource(r *rand.Rand) string {
	if r.Intn(2) == 0 {
		return "rolebindings"
	}
	return "networkpolicies"
}

// Source is a source of resource named name in namespace, locked one time
// in eight, asking for an overlay (implicit.dev/merge: overlay) one time in
// five, with content that varies.
func (w World) Source(r *rand.Rand, namespace, resource, name string) *unstructured.Unstructured {
	var u *unstructured.Unstructured
	if resource == "rolebindings" {
		u = object("rbac.authorization.k8s.io/v1", "RoleBinding", namespace, name)
		u.Object["roleRef"] = map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": []string{"view", "edit", "admin"}[r.Intn(3)]}
		u.Object["subjects"] = []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": fmt.Sprintf("group-%d", r.Intn(5))}}
	} else {
		u = object("networking.k8s.io/v1", "NetworkPolicy", namespace, name)
		u.Object["spec"] = map[string]any{
			"podSelector": map[string]any{"matchLabels": map[string]any{"app": fmt.Sprintf("app-%d", r.Intn(5))}},
			"policyTypes": []any{"Ingress"},
		}
	}
	annotations := map[string]string{}
	if r.Intn(8) == 0 {
		annotations[v1alpha1.AnnotationLocked] = "true"
	}
	if r.Intn(5) == 0 {
		// An overlay of the inherited item of its name: the merged view
		// shows both layers' labels, and the overlay's spec fields.
		annotations[v1alpha1.AnnotationMerge] = "overlay"
		u.SetLabels(map[string]string{"overlay-" + namespace: "true"})
	}
	if len(annotations) > 0 {
		u.SetAnnotations(annotations)
	}
	return u
}

// Edit returns a random edit of w: a source created or changed (perhaps a
// shadow of a locked item), a source deleted, a namespace's parent changed
// (perhaps a cycle or a missing parent), or an exclusion added. delete
// reports a deletion. The edit is not applied to w.
func (w World) Edit(r *rand.Rand) (obj *unstructured.Unstructured, deleted bool) {
	op := r.Intn(5)
	if op == 2 && len(w.Sources) == 0 {
		op = 3
	}
	switch op {
	case 0, 1:
		ns := w.namespace(r.Intn(w.Config.Namespaces))
		if r.Intn(4) == 0 {
			ns = w.GlobalNamespace
		}
		return w.Source(r, ns, w.resource(r), w.name(r)), false
	case 2:
		return w.Sources[r.Intn(len(w.Sources))].DeepCopy(), true
	case 3:
		ns := w.Namespaces[r.Intn(len(w.Namespaces))].DeepCopy()
		parent := w.namespace(r.Intn(w.Config.Namespaces))
		if r.Intn(4) == 0 {
			parent = w.Prefix + "missing"
		}
		labels := ns.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[v1alpha1.LabelParent] = parent
		ns.SetLabels(labels)
		return ns, false
	default:
		ns := w.Namespaces[r.Intn(len(w.Namespaces))].DeepCopy()
		ns.SetAnnotations(map[string]string{v1alpha1.AnnotationExclude: w.resource(r) + "/" + w.name(r)})
		return ns, false
	}
}

// Objects are the world's namespaces, then its sources.
func (w World) Objects() []*unstructured.Unstructured {
	return append(append([]*unstructured.Unstructured{}, w.Namespaces...), w.Sources...)
}

// WriteDir writes the world into dir as multi-document YAML files of at
// most perFile objects each.
func (w World) WriteDir(dir string, perFile int) error {
	objs := w.Objects()
	for i := 0; i*perFile < len(objs); i++ {
		end := min((i+1)*perFile, len(objs))
		if err := WriteFile(filepath.Join(dir, fmt.Sprintf("objects-%04d.yaml", i)), objs[i*perFile:end]...); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes objs as one multi-document YAML file.
func WriteFile(path string, objs ...*unstructured.Unstructured) error {
	var b strings.Builder
	for _, o := range objs {
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

func object(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}}}
	if namespace != "" {
		u.SetNamespace(namespace)
	}
	return u
}
