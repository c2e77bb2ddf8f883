package testfixture

import (
	"fmt"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// The mirror builders feed a watchmux.Mux as informers would, for the tests
// of the packages that answer questions from it (pkg/admission's guards,
// pkg/answers).

// GlobalNamespace is the tests' global namespace.
const GlobalNamespace = "implicit-global"

// Policy is the default tenant policy of DESIGN.md.
func Policy() merge.Policy {
	return merge.Policy{
		GlobalNamespace: GlobalNamespace,
		Excluded:        map[string]bool{"kube-system": true, "kube-public": true, "kube-node-lease": true},
	}
}

// Step is one change fed to a mux, as an informer handler would.
type Step func(m *watchmux.Mux)

// AddNamespace adds or updates ns.
func AddNamespace(ns *corev1.Namespace) Step {
	return func(m *watchmux.Mux) { m.OnNamespace(ns, false) }
}

// DeleteNamespace deletes the namespace name.
func DeleteNamespace(name string) Step {
	return func(m *watchmux.Mux) { m.OnNamespace(Namespace(name), true) }
}

// PutSource adds or updates a source object of resource.
func PutSource(resource string, obj runtime.Object) Step {
	return func(m *watchmux.Mux) { m.OnSource(resource, obj, false) }
}

// DeleteSource deletes a source object of resource.
func DeleteSource(resource string, obj runtime.Object) Step {
	return func(m *watchmux.Mux) { m.OnSource(resource, obj, true) }
}

// Hierarchy is the cluster most cases start from:
//
//	implicit-global   the global namespace (not a tenant)
//	kube-system       excluded (not a tenant)
//	legacy            labeled implicit.dev/inherit: "false" (not a tenant)
//	org               a root tenant
//	├── team-a
//	│   └── team-a-1
//	└── team-b
//	solo              a root tenant
func Hierarchy() []Step {
	return []Step{
		AddNamespace(Namespace(GlobalNamespace)),
		AddNamespace(Namespace("kube-system")),
		AddNamespace(Namespace("legacy", NoInherit)),
		AddNamespace(Namespace("org")),
		AddNamespace(Namespace("team-a", Parent("org"))),
		AddNamespace(Namespace("team-b", Parent("org"))),
		AddNamespace(Namespace("team-a-1", Parent("team-a"))),
		AddNamespace(Namespace("solo")),
	}
}

// Mirror returns a mux of resources with the test policy and no view
// objects (no watches), fed with steps, and synced when synced is set.
func Mirror(synced bool, steps []Step, resources ...string) *watchmux.Mux {
	m := watchmux.New(Policy(), resources, nil, watchmux.Options{})
	for _, s := range steps {
		s(m)
	}
	if synced {
		m.MarkSynced()
	}
	return m
}

// sourceRV numbers the test source objects' versions, as etcd would.
var sourceRV atomic.Uint64

// NextResourceVersion returns a source resourceVersion newer than every one
// given so far (for a test's update of a source object).
func NextResourceVersion() string { return strconv.FormatUint(sourceRV.Add(1), 10) }

// ObjectOpt decorates a test source object.
type ObjectOpt func(*metav1.ObjectMeta)

// Locked annotates a source object locked.
func Locked(m *metav1.ObjectMeta) { m.Annotations[v1alpha1.AnnotationLocked] = "true" }

// SourceMeta returns the metadata of a new source object, with a new
// resourceVersion.
func SourceMeta(namespace, name string, opts ...ObjectOpt) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Namespace:       namespace,
		Name:            name,
		UID:             types.UID("uid-" + namespace + "-" + name),
		ResourceVersion: NextResourceVersion(),
		Labels:          map[string]string{"app": name},
		Annotations:     map[string]string{},
	}
	for _, o := range opts {
		o(&m)
	}
	return m
}

// SourceRoleBinding returns a new RoleBinding source object, with a new
// resourceVersion.
func SourceRoleBinding(namespace, name string, opts ...ObjectOpt) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: SourceMeta(namespace, name, opts...),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: namespace + ":" + name}},
	}
}

// SourceRole returns a new Role source object, with a new resourceVersion.
func SourceRole(namespace, name string, opts ...ObjectOpt) *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: SourceMeta(namespace, name, opts...),
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}},
	}
}

// Views returns every namespace's view of resource, each item described by
// where it comes from (source, version, scope, overlays, conflicts) and
// keyed by namespace/name, and the resourceVersion they are at: two reads
// differ where a view changed.
func Views(t testing.TB, m *watchmux.Mux, resource string) (map[string]string, string) {
	t.Helper()
	out := map[string]string{}
	rv, err := m.Read(func(r watchmux.Reader) {
		for _, ns := range r.Namespaces() {
			for _, res := range r.Results(resource, ns, "") {
				src := "<no metadata>"
				if o, ok := res.Item.Object.(metav1.Object); ok {
					src = string(o.GetUID()) + "@" + o.GetResourceVersion()
				}
				out[ns+"/"+res.Item.Name] = fmt.Sprintf("%s/%s %s %s overlays[%s] conflict[%s]",
					res.Item.Namespace, res.Item.Name, res.Scope, src, res.OverlaySources(), res.Conflict())
			}
		}
	})
	if err != nil {
		t.Fatalf("reading the mux: %v", err)
	}
	return out, rv
}

// ChangedNamespaces returns the namespaces whose views differ between two
// Views, sorted.
func ChangedNamespaces(before, after map[string]string) []string {
	set := map[string]bool{}
	for k, v := range before {
		if after[k] != v {
			set[namespaceOf(k)] = true
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			set[namespaceOf(k)] = true
		}
	}
	out := make([]string, 0, len(set))
	for ns := range set {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

func namespaceOf(key string) string {
	for i := range key {
		if key[i] == '/' {
			return key[:i]
		}
	}
	return key
}
