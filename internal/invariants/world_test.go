package invariants

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// The world is what etcd holds: namespaces and source objects (copies
// included), each with the actor whose admitted write put it there.

const (
	global       = "implicit-global"
	rolebindings = "rolebindings"
	roles        = "roles"
	netpols      = "networkpolicies"
	// server is implicit-apiserver's own identity, the writer of copies.
	server = "system:serviceaccount:implicit-system:implicit-apiserver"
)

var (
	resources = []string{rolebindings, roles, netpols}
	grOf      = map[string]schema.GroupResource{
		rolebindings: {Group: rbacv1.GroupName, Resource: rolebindings},
		roles:        {Group: rbacv1.GroupName, Resource: roles},
		netpols:      {Group: networkingv1.GroupName, Resource: netpols},
	}
	served = []schema.GroupResource{grOf[rolebindings], grOf[roles], grOf[netpols]}
	// epoch is the creation time of the first namespace.
	epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// key names a source object.
type key struct{ resource, namespace, name string }

func (k key) String() string { return k.resource + " " + k.namespace + "/" + k.name }

// stored is an object in etcd and who wrote it last.
type stored struct {
	obj    runtime.Object
	writer string
	// stableLocked: the object is a candidate whose stable source was
	// already locked when it was written.
	stableLocked bool
}

type world struct {
	rv, uids   int
	namespaces map[string]*corev1.Namespace
	creator    map[string]string
	objs       map[key]*stored
	// deletions are the namespaces held in Terminating, by name.
	deletions map[string]deletion
}

// deletion is a namespace's deletion held in Terminating: who began it,
// the namespaces below it then, and the locked layers of their views then
// (its first DELETE was judged on them).
type deletion struct {
	by      string
	subtree map[string]bool
	locked  map[viewedLayer]bool
}

// viewedLayer is a locked source in a namespace's view.
type viewedLayer struct {
	viewer string
	src    key
}

func newWorld() *world {
	return &world{namespaces: map[string]*corev1.Namespace{}, creator: map[string]string{}, objs: map[key]*stored{},
		deletions: map[string]deletion{}}
}

// below lists the namespaces whose parent labels lead up to name.
func (w *world) below(name string) map[string]bool {
	out := map[string]bool{}
	for n := range w.namespaces {
		seen := map[string]bool{n: true}
		for cur := w.namespaces[n].Labels[v1alpha1.LabelParent]; cur != "" && !seen[cur]; {
			if cur == name {
				out[n] = true
				break
			}
			seen[cur] = true
			p, ok := w.namespaces[cur]
			if !ok {
				break
			}
			cur = p.Labels[v1alpha1.LabelParent]
		}
	}
	return out
}

func (w *world) nextRV() string { w.rv++; return strconv.Itoa(w.rv) }

func (w *world) nextUID(prefix string) types.UID {
	w.uids++
	return types.UID(fmt.Sprintf("%s-%d", prefix, w.uids))
}

// namespaceNames are the existing namespaces, sorted.
func (w *world) namespaceNames() []string {
	out := make([]string, 0, len(w.namespaces))
	for n := range w.namespaces {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// keys are the stored objects of resource (every resource when ""), sorted.
func (w *world) keys(resource string) []key {
	var out []key
	for k := range w.objs {
		if resource == "" || k.resource == resource {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Get implements admission.NamespaceGetter: the guards read parents from
// kube-apiserver, which never lags.
func (w *world) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Namespace, error) {
	ns, ok := w.namespaces[name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
	return ns.DeepCopy(), nil
}

func metaOf(o runtime.Object) metav1.Object {
	m, err := metaAccessor(o)
	if err != nil {
		panic(err)
	}
	return m
}

func metaAccessor(o runtime.Object) (metav1.Object, error) {
	m, ok := o.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", o)
	}
	return m, nil
}

// Contents of the sources: small pools, so that names and contents collide.

// clusterRoles are the host cluster's, the same for the oracle and pkg/authz.
var clusterRoles = []*rbacv1.ClusterRole{
	{ObjectMeta: metav1.ObjectMeta{Name: "view", ResourceVersion: "1"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods", "configmaps"}},
	}},
	{ObjectMeta: metav1.ObjectMeta{Name: "edit", ResourceVersion: "1"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"*"}, APIGroups: []string{""}, Resources: []string{"pods", "secrets", "pods/log"}},
	}},
	{ObjectMeta: metav1.ObjectMeta{Name: "admin", ResourceVersion: "1"}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{"*"}, APIGroups: []string{""}, Resources: []string{"pods", "secrets"}},
		{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"resourcequotas"}},
		{Verbs: []string{"create", "update", "delete"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{rolebindings, roles}},
	}},
}

// roleRules are the rules a Role may hold; the last ones test RBAC's edges.
var roleRules = [][]rbacv1.PolicyRule{
	{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}},
	{{Verbs: []string{"update", "get"}, APIGroups: []string{""}, Resources: []string{"resourcequotas"}}},
	{{Verbs: []string{"unlock"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{rolebindings}, ResourceNames: []string{"g-lock"}}},
	{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
	{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{""}}},
	{{Verbs: []string{"stage"}, APIGroups: []string{""}, Resources: []string{"namespaces"}}},
	{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"*/log"}}},
}

var roleRefs = []rbacv1.RoleRef{
	{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
	{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
	{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "quota-admin"},
	{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "r"},
}

var subjectSets = [][]rbacv1.Subject{
	{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "tenants"}},
	{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
	{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"}},
	{{Kind: rbacv1.ServiceAccountKind, Name: "default"}},
	{{Kind: rbacv1.ServiceAccountKind, Namespace: "p", Name: "robot"}, {Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
}

// Names of the sources: a few per kind, so that shadows and candidates meet.
var sourceNames = map[string][]string{
	rolebindings: {"g-lock", "rb", "rb-next", "x"},
	roles:        {"quota-admin", "r"},
	netpols:      {"deny", "allow", "np-next"},
}

// contents is how many content variants a source of resource has.
func contents(resource string) int {
	switch resource {
	case rolebindings:
		return len(roleRefs) * len(subjectSets)
	case roles:
		return len(roleRules)
	default:
		return 3
	}
}

// newSource returns a source object of resource with content variant v.
func newSource(resource, namespace, name string, v int) runtime.Object {
	m := metav1.ObjectMeta{Namespace: namespace, Name: name}
	switch resource {
	case rolebindings:
		o := &rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}, ObjectMeta: m}
		setContent(o, v)
		return o
	case roles:
		o := &rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"}, ObjectMeta: m}
		setContent(o, v)
		return o
	default:
		o := &networkingv1.NetworkPolicy{TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}, ObjectMeta: m}
		setContent(o, v)
		return o
	}
}

// setContent sets the content variant v of a source object.
func setContent(o runtime.Object, v int) {
	switch o := o.(type) {
	case *rbacv1.RoleBinding:
		o.RoleRef = roleRefs[v%len(roleRefs)]
		o.Subjects = append([]rbacv1.Subject(nil), subjectSets[(v/len(roleRefs))%len(subjectSets)]...)
	case *rbacv1.Role:
		o.Rules = append([]rbacv1.PolicyRule(nil), roleRules[v%len(roleRules)]...)
	case *networkingv1.NetworkPolicy:
		switch v % 3 {
		case 0: // deny all ingress
			o.Spec = networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}
		case 1: // allow all ingress
			o.Spec = networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}
		default: // allow from the org's namespaces
			o.Spec = networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"org": "p"}},
				}}}},
			}
		}
	}
}

func newNamespace(name string) *corev1.Namespace {
	return &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelMetadataName: name}},
	}
}

// Actors and the host cluster's RBAC: the oracle of who may do what, which
// the guards ask with SubjectAccessReviews.

type actor struct {
	name   string
	groups []string
	// all: admin of every namespace, the global one included, and may
	// update, create and delete namespaces (an org admin).
	all bool
	// unlockAll: unlock on every source; unlockOwn: in the namespaces the
	// actor is admin of.
	unlockAll, unlockOwn bool
	stage                bool
	// createNS: may create namespaces, and becomes their admin.
	createNS bool
	// admin are the namespaces the actor is admin of (and may update).
	admin map[string]bool
}

func newActors() map[string]*actor {
	set := func(names ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	as := []*actor{
		{name: "alice", groups: []string{"tenants"}, createNS: true, admin: set("a", "b", "c", "e")},
		{name: "bob", groups: []string{"tenants"}, admin: set("d")},
		{name: "carol", groups: []string{"tenants"}, unlockOwn: true, admin: set("c")},
		{name: "org", groups: []string{"org-admins"}, all: true, unlockAll: true, stage: true, createNS: true},
		{name: "ops", groups: []string{"org-admins"}, all: true, stage: true, createNS: true},
		{name: "org2", groups: []string{"org-admins"}, all: true, unlockAll: true},
	}
	out := map[string]*actor{}
	for _, a := range as {
		out[a.name] = a
	}
	return out
}

// actorNames are the actors, in a fixed order for the generator.
var actorNames = []string{"alice", "bob", "carol", "org", "ops", "org2"}

func (a *actor) isAdmin(namespace string) bool { return a.all || a.admin[namespace] }

func (a *actor) user() authenticationv1.UserInfo {
	return authenticationv1.UserInfo{Username: a.name, UID: "uid-" + a.name, Groups: append([]string{"system:authenticated"}, a.groups...)}
}

// rbacOracle is the host cluster's RBAC for the actors.
type rbacOracle struct {
	actors map[string]*actor
	w      *world
}

// Allowed implements admission.Authorizer.
func (o *rbacOracle) Allowed(_ context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	return o.may(user.Username, attrs), "", nil
}

// may reports whether user may do attrs.
func (o *rbacOracle) may(user string, attrs authorizationv1.ResourceAttributes) bool {
	a, ok := o.actors[user]
	if !ok {
		return false
	}
	switch {
	case attrs.Verb == "unlock":
		return a.unlockAll || a.unlockOwn && a.isAdmin(attrs.Namespace)
	case attrs.Verb == "stage":
		return a.stage && attrs.Resource == "namespaces"
	case attrs.Resource == "namespaces" && attrs.Group == "":
		name := attrs.Name
		if name == "" {
			name = attrs.Namespace
		}
		switch attrs.Verb {
		case "create":
			return a.createNS
		case "delete":
			return a.all || o.w.creator[name] == a.name
		default:
			return a.isAdmin(name)
		}
	}
	return a.isAdmin(attrs.Namespace)
}

// unlocks reports whether user may unlock the source k.
func (o *rbacOracle) unlocks(user string, k key) bool {
	if user == server {
		return false
	}
	return o.may(user, authorizationv1.ResourceAttributes{Verb: "unlock", Group: grOf[k.resource].Group, Resource: k.resource, Namespace: k.namespace, Name: k.name})
}

// annotations of a source or namespace, never nil.
func annotationsOf(m metav1.Object) map[string]string {
	a := m.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	return a
}

func labelsOf(m metav1.Object) map[string]string {
	l := m.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	return l
}

func isCopy(o runtime.Object) bool { return o != nil && v1alpha1.IsMaterialized(metaOf(o).GetLabels()) }
