package offline

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/cmd/server"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// Options are the server's flags that decide what the files mean: the
// global namespace, the namespaces never tenants, how deep lineages go.
type Options struct {
	// GlobalNamespace is --global-namespace (default implicit-global).
	GlobalNamespace string
	// ExcludeNamespaces is --exclude-namespaces (default kube-system,
	// kube-public, kube-node-lease).
	ExcludeNamespaces []string
	// MaxDepth is --max-depth (0: no limit).
	MaxDepth int
	// Now is the reference time: the expiry marks the server would have
	// written by then are written (markExpired). Zero: the current time.
	Now time.Time
}

func (o *Options) defaults() {
	if o.GlobalNamespace == "" {
		o.GlobalNamespace = "implicit-global"
	}
	if o.ExcludeNamespaces == nil {
		o.ExcludeNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
}

// builtInNamespaces exist in every cluster, declared or not.
var builtInNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// World is what the server's mirror would hold had the files been applied
// to an empty cluster: a watchmux.Mux fed with the files' namespaces and
// sources, the view objects pkg/views builds from it, the authorization
// webhook's authorizer over it, and the ClusterRoles and
// ClusterRoleBindings of the files. Every answer is the server's code's.
type World struct {
	opts   Options
	policy merge.Policy
	kinds  []kinds.Kind
	// byKind maps a source's group and kind to its served kind.
	byKind map[schema.GroupKind]kinds.Kind
	// merges are each kind's merge options, by resource: its strategy and
	// the overlayer of its schema (schemas.go).
	merges     map[string]merge.Options
	mux        *watchmux.Mux
	objects    *views.Objects
	authorizer *authz.Authorizer
	// namespaces are the namespaces as the mirror holds them (parent uids
	// recorded, as the parent-uid webhook would have).
	namespaces map[string]*corev1.Namespace
	// files are the objects as the files state them, by key.
	files map[Key]*unstructured.Unstructured
	// Tests are the ImplicitTest documents found.
	Tests []Object
	// rv numbers the objects fed to the mirror, as resourceVersions.
	rv int
}

// Key names an object of the files.
type Key struct {
	Group, Kind, Namespace, Name string
}

func (k Key) String() string {
	gk := k.Kind
	if k.Group != "" {
		gk += "." + k.Group
	}
	if k.Namespace == "" {
		return gk + "/" + k.Name
	}
	return gk + " " + k.Namespace + "/" + k.Name
}

// KeyOf is the key of u.
func KeyOf(u *unstructured.Unstructured) Key {
	gvk := u.GroupVersionKind()
	return Key{Group: gvk.Group, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

// Files are the kinds of objects Build reads beside the served sources.
const (
	kindNamespace     = "Namespace"
	kindConfiguration = "ImplicitConfiguration"
	// KindTest is the kind of a test document (tests.go).
	KindTest = "ImplicitTest"
)

// Build makes the world of objs. Namespaced objects without a namespace are
// in "default", as kubectl apply would put them with the default context.
func Build(objs []Object, o Options) (*World, error) {
	o.defaults()
	w := &World{opts: o, namespaces: map[string]*corev1.Namespace{}, files: map[Key]*unstructured.Unstructured{}}
	var errs []error
	var crds []*unstructured.Unstructured
	var configured *server.Configuration
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		switch {
		case gvk.Kind == KindTest:
			w.Tests = append(w.Tests, obj)
			continue
		case gvk.Kind == kindConfiguration:
			if configured != nil {
				errs = append(errs, fmt.Errorf("%s: a second ImplicitConfiguration: one directory, one configuration", obj.From))
				continue
			}
			raw, err := yaml.Marshal(obj.Object)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", obj.From, err))
				continue
			}
			c, err := server.ParseConfiguration(raw, obj.From)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			configured = &c
			continue
		case gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition":
			crds = append(crds, obj.Unstructured)
		}
		k := KeyOf(obj.Unstructured)
		if prev, ok := w.files[k]; ok && prev != nil {
			errs = append(errs, fmt.Errorf("%s: %s is defined twice", obj.From, k))
			continue
		}
		w.files[k] = obj.Unstructured
	}
	if configured != nil {
		w.kinds = configured.Kinds
	} else {
		w.kinds = kinds.BuiltIns()
	}
	if err := w.resolveKinds(crds); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	w.policy = policyOf(o, w.kinds)
	if err := w.feed(); err != nil {
		return nil, err
	}
	return w, nil
}

// policyOf is the tenant policy the server's options make
// (pkg/cmd/server's Options.policy): --exclude-namespaces and every kind's
// own global namespace are never tenants.
func policyOf(o Options, ks []kinds.Kind) merge.Policy {
	excluded := map[string]bool{}
	for _, ns := range o.ExcludeNamespaces {
		excluded[ns] = true
	}
	for _, k := range ks {
		if k.GlobalNamespace != "" && k.GlobalNamespace != o.GlobalNamespace {
			excluded[k.GlobalNamespace] = true
		}
	}
	return merge.Policy{GlobalNamespace: o.GlobalNamespace, Excluded: excluded, MaxDepth: o.MaxDepth}
}

// resolveKinds completes configured kinds that are not built in with their
// names from the CustomResourceDefinitions of the files (what the kind
// controller reads from the host's discovery), and gives every kind its
// merge options: its strategy and an overlayer of its schema, as the
// server's kind controller does (schemas.go).
func (w *World) resolveKinds(crds []*unstructured.Unstructured) error {
	var errs []error
	w.byKind = map[schema.GroupKind]kinds.Kind{}
	w.merges = map[string]merge.Options{}
	for i, k := range w.kinds {
		if k.Typed() {
			w.byKind[schema.GroupKind{Group: k.Source.Group, Kind: k.Kind}] = k
			ov, err := builtInOverlayer(k)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			w.merges[k.Resource()] = merge.Options{Strategy: k.Strategy, Overlayer: ov}
			continue
		}
		var found bool
		for _, crd := range crds {
			group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
			plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
			if group != k.Source.Group || plural != k.Source.Resource {
				continue
			}
			kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
			singular, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "singular")
			if singular == "" {
				singular = kind
			}
			models, model, err := crdModels(crd, k)
			if err != nil {
				errs = append(errs, fmt.Errorf("kind %s: %w", k.Source, err))
				found = true
				continue
			}
			ov, err := merge.NewOverlayer(models, model)
			if err != nil {
				errs = append(errs, fmt.Errorf("kind %s: %w", k.Source, err))
				found = true
				continue
			}
			k = k.WithHostNames(kinds.HostNames{Kind: kind, Singular: singular, Model: model}, v1alpha1.SchemeGroupVersion)
			w.kinds[i] = k
			w.byKind[schema.GroupKind{Group: k.Source.Group, Kind: kind}] = k
			w.merges[k.Resource()] = merge.Options{Strategy: k.Strategy, Overlayer: ov}
			found = true
		}
		if !found {
			errs = append(errs, fmt.Errorf("kind %s is configured, but no CustomResourceDefinition in the files defines it", k.Source))
		}
	}
	return errors.Join(errs...)
}

// feed builds the mirror: namespaces first (those the files name, the
// built-in ones, the global namespaces and every namespace a source is
// in), then every source, then marks it synced, as the server's informers
// would.
func (w *World) feed() error {
	w.objects = views.NewObjects(kinds.NewObjects(kinds.Typed(w.kinds)), 0)
	w.mux = watchmux.New(w.policy, kinds.Resources(kinds.Typed(w.kinds)), w.objects, watchmux.Options{})
	for _, k := range w.kinds {
		if k.GlobalNamespace != "" {
			w.mux.SetGlobalNamespace(k.Resource(), k.GlobalNamespace)
		}
		if k.Typed() {
			w.mux.SetMergeOptions(k.Resource(), w.merges[k.Resource()])
			continue
		}
		if err := w.mux.AddResource(k.Resource(), w.merges[k.Resource()]); err != nil {
			return err
		}
		w.objects.Add(k.Resource(), k.New)
	}
	var errs []error
	names := append(slices.Clone(builtInNamespaces), w.opts.GlobalNamespace)
	for _, k := range w.kinds {
		if k.GlobalNamespace != "" {
			names = append(names, k.GlobalNamespace)
		}
	}
	for _, key := range w.keys() {
		if key.Group == "" && key.Kind == kindNamespace {
			ns, err := namespaceOf(w.files[key])
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", key, err))
				continue
			}
			w.namespaces[ns.Name] = ns
			continue
		}
		if key.Namespace == "" && w.namespaced(key) {
			u := w.files[key]
			delete(w.files, key)
			u.SetNamespace("default")
			if _, dup := w.files[KeyOf(u)]; dup {
				errs = append(errs, fmt.Errorf("%s is defined twice (once without a namespace)", KeyOf(u)))
			}
			w.files[KeyOf(u)] = u
		}
	}
	for _, key := range w.keys() {
		if key.Namespace != "" {
			names = append(names, key.Namespace)
		}
	}
	for _, n := range names {
		if _, ok := w.namespaces[n]; !ok {
			w.namespaces[n] = &corev1.Namespace{}
			w.namespaces[n].Name = n
		}
	}
	for _, ns := range w.namespaces {
		ns.UID = namespaceUID(ns.Name)
		ns.ResourceVersion = "1"
	}
	for _, ns := range w.namespaces {
		recordParentUID(ns, w.namespaces)
		if err := markExpired(ns, w.opts.Now); err != nil {
			errs = append(errs, fmt.Errorf("namespace %s: %w", ns.Name, err))
		}
		w.mux.OnNamespace(ns, false)
	}
	w.rv = 1
	var clusterRoles, clusterRoleBindings []runtime.Object
	for _, key := range w.keys() {
		u := w.files[key]
		if key.Group == rbacv1.GroupName && (key.Kind == "ClusterRole" || key.Kind == "ClusterRoleBinding") {
			obj, err := typed(u)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", key, err))
				continue
			}
			if key.Kind == "ClusterRole" {
				clusterRoles = append(clusterRoles, obj)
			} else {
				clusterRoleBindings = append(clusterRoleBindings, obj)
			}
			continue
		}
		k, ok := w.byKind[schema.GroupKind{Group: key.Group, Kind: key.Kind}]
		if !ok {
			continue
		}
		w.rv++
		obj, err := w.sourceObject(k, u, strconv.Itoa(w.rv))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			continue
		}
		w.mux.OnSource(k.Resource(), obj, false)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, k := range w.kinds {
		if !k.Typed() {
			w.mux.MarkResourceSynced(k.Resource())
		}
	}
	w.mux.MarkSynced()
	a, err := authz.New(w.mux, informerOf(&rbacv1.ClusterRole{}, clusterRoles), informerOf(&rbacv1.ClusterRoleBinding{}, clusterRoleBindings), 0)
	if err != nil {
		return err
	}
	w.authorizer = a
	return nil
}

// namespaced reports whether the object of key is namespaced: a source
// of a served kind, or a Role or RoleBinding.
func (w *World) namespaced(key Key) bool {
	if _, ok := w.byKind[schema.GroupKind{Group: key.Group, Kind: key.Kind}]; ok {
		return true
	}
	return key.Group == rbacv1.GroupName && (key.Kind == "Role" || key.Kind == "RoleBinding")
}

// keys are the files' keys, sorted.
func (w *World) keys() []Key {
	out := make([]Key, 0, len(w.files))
	for k := range w.files {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b Key) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// sourceObject is u as the server's informer of k delivers it: a Go type
// for a typed kind, unstructured otherwise, with a uid and a
// resourceVersion (files carry neither).
func (w *World) sourceObject(k kinds.Kind, u *unstructured.Unstructured, rv string) (runtime.Object, error) {
	u = u.DeepCopy()
	u.SetUID(sourceUID(KeyOf(u)))
	u.SetResourceVersion(rv)
	if !k.Typed() {
		return u, nil
	}
	return typed(u)
}

// typed converts u to its Go type, with an empty TypeMeta as informers
// deliver typed objects.
func typed(u *unstructured.Unstructured) (runtime.Object, error) {
	obj, err := scheme.Scheme.New(u.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, obj, true); err != nil {
		return nil, err
	}
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return obj, nil
}

// namespaceOf is u as a Namespace. Files carry no uids: the
// implicit.dev/parent-uid a file may hold (exported from a cluster) is
// dropped, and recordParentUID records the uid of the namespace named.
func namespaceOf(u *unstructured.Unstructured) (*corev1.Namespace, error) {
	var ns corev1.Namespace
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &ns, true); err != nil {
		return nil, err
	}
	delete(ns.Annotations, v1alpha1.AnnotationParentUID)
	return &ns, nil
}

// recordParentUID records, as the parent-uid webhook does when the label
// is admitted, the uid of the parent ns names, when it exists.
func recordParentUID(ns *corev1.Namespace, all map[string]*corev1.Namespace) {
	parent, ok := all[ns.Labels[v1alpha1.LabelParent]]
	if !ok || ns.Labels[v1alpha1.LabelParent] == "" {
		return
	}
	if ns.Annotations == nil {
		ns.Annotations = map[string]string{}
	}
	ns.Annotations[v1alpha1.AnnotationParentUID] = string(parent.UID)
}

// markExpired writes on ns the expiry marks the server would have written
// by now: each exception whose end has passed and whose version is not
// marked gets its mark (name to digest) in implicit.dev/exceptions-expired,
// as the server's writer does at the end. Files can't say the mark was
// written: a cluster has it from the end on.
func markExpired(ns *corev1.Namespace, now time.Time) error {
	due := merge.ExpiredBy(merge.NamespaceOf(ns), now)
	if len(due) == 0 {
		return nil
	}
	marks := map[string]string{}
	if v, ok := ns.Annotations[v1alpha1.AnnotationExceptionsExpired]; ok {
		cur, err := merge.ParseExceptionsExpired(v)
		if err != nil {
			return err
		}
		marks = cur
	}
	for _, e := range due {
		marks[e.Name] = e.Digest
	}
	b, err := json.Marshal(marks) // keys sorted, as the server writes them
	if err != nil {
		return err
	}
	ns.Annotations[v1alpha1.AnnotationExceptionsExpired] = string(b)
	return nil
}

// namespaceUID and sourceUID stand in for the uids a cluster would give.
func namespaceUID(name string) types.UID { return types.UID("offline-namespace-" + name) }

func sourceUID(k Key) types.UID {
	return types.UID("offline-" + k.Group + "-" + k.Kind + "-" + k.Namespace + "-" + k.Name)
}

// informerOf is an informer never started whose cache holds objs: what
// the authorizer's listers read.
func informerOf(example runtime.Object, objs []runtime.Object) cache.SharedIndexInformer {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, example, 0, cache.Indexers{})
	for _, o := range objs {
		_ = inf.GetIndexer().Add(o)
	}
	return inf
}

// Now is the reference time of the expiry marks (Options.Now).
func (w *World) Now() time.Time { return w.opts.Now }

// Kinds are the served kinds.
func (w *World) Kinds() []kinds.Kind { return w.kinds }

// KindOf returns the served kind of resource.
func (w *World) KindOf(resource string) (kinds.Kind, bool) {
	for _, k := range w.kinds {
		if k.Resource() == resource {
			return k, true
		}
	}
	return kinds.Kind{}, false
}

// Namespaces lists the namespaces, sorted.
func (w *World) Namespaces() []string {
	out := make([]string, 0, len(w.namespaces))
	for n := range w.namespaces {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// File returns the object of the files under k.
func (w *World) File(k Key) (*unstructured.Unstructured, bool) {
	u, ok := w.files[k]
	return u, ok
}

// FileKeys are the keys of every object of the files, sorted.
func (w *World) FileKeys() []Key { return w.keys() }
