package offline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

// Requester is who makes an edit or a request: what the files can't say.
type Requester struct {
	User   string   `json:"user"`
	Groups []string `json:"groups,omitempty"`
}

// Admin is the requester of edits when a test names none: a member of
// system:masters, whom RBAC never refuses, so only the guards' own rules
// (locks, shadows, cycles, missing parents) refuse its edits. Tests that
// check permission-dependent guards (unlock, the parent's update, stage)
// name a requester, whose permissions are the files' RBAC objects'.
var Admin = Requester{User: "offline-admin", Groups: []string{"system:masters", "system:authenticated"}}

// ServerIdentity stands in for implicit-apiserver's own user, which files
// can't say: the guards know the server's identity live, so an edit of the
// expiry marks by anyone else is refused offline as live.
const ServerIdentity = "offline:implicit-apiserver"

// Operation is an edit's: CREATE, UPDATE or DELETE.
type Operation string

const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
	Delete Operation = "DELETE"
)

// Edit is one write a requester would send.
type Edit struct {
	// Operation; empty: UPDATE when the files hold the object, CREATE
	// otherwise.
	Operation Operation
	// Object is the object written, or for DELETE the object deleted (its
	// apiVersion, kind, namespace and name are enough).
	Object    *unstructured.Unstructured
	Requester Requester
}

// Verdict is what the guards answer an edit.
type Verdict struct {
	Allowed bool `json:"allowed"`
	// Guard is the path of the guard that refused, e.g. /admission/locks,
	// or KubeAPIServer for kube-apiserver's own validation (an immutable
	// field changed).
	Guard string `json:"guard,omitempty"`
	// Reason is its message.
	Reason   string   `json:"reason,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// KubeAPIServer is a Verdict's Guard when kube-apiserver's own validation
// refuses the edit before any guard is asked.
const KubeAPIServer = "kube-apiserver"

// mutating and validating are the guards an edit passes through, in
// kube-apiserver's order: mutating webhooks first.
var (
	namespaceGuards = []string{webhookconfig.PathParentUID, webhookconfig.PathParents, webhookconfig.PathStages}
	deletionGuards  = []string{webhookconfig.PathNamespaceDeletions}
	sourceGuards    = []string{webhookconfig.PathLocks, webhookconfig.PathShadows, webhookconfig.PathMaterialized, webhookconfig.PathCandidates, webhookconfig.PathFanout}
)

// Judge asks the server's admission guards (pkg/admission, over the
// what-if index of this world's mirror) what they answer e: each guard
// whose webhook's rules match e gets the AdmissionReview kube-apiserver
// would send it, through its own HTTP handler, mutating ones first, their
// patches applied. Match conditions only spare the guards requests they
// allow, so every matching guard is asked. The guards are made afresh for
// each edit: what one admitted is not assumed for the next.
func (w *World) Judge(ctx context.Context, e Edit) (Verdict, error) {
	if e.Object == nil {
		return Verdict{}, fmt.Errorf("an edit needs an object")
	}
	key := KeyOf(e.Object)
	if key.Namespace == "" && w.namespaced(key) {
		e.Object = e.Object.DeepCopy()
		e.Object.SetNamespace("default")
		key = KeyOf(e.Object)
	}
	old := w.current(key)
	op := e.Operation
	if op == "" {
		op = Create
		if old != nil {
			op = Update
		}
	}
	if e.Requester.User == "" {
		e.Requester = Admin
	}
	req := &admissionv1.AdmissionRequest{
		UID:       types.UID("offline"),
		Kind:      metav1.GroupVersionKind(e.Object.GroupVersionKind()),
		Name:      key.Name,
		Namespace: key.Namespace,
		Operation: admissionv1.Operation(op),
		UserInfo:  authenticationv1.UserInfo{Username: e.Requester.User, Groups: e.Requester.Groups},
	}
	var paths []string
	switch {
	case key.Group == "" && key.Kind == kindNamespace:
		req.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "namespaces"}
		req.Namespace = key.Name
		paths = namespaceGuards
		if op == Delete {
			paths = deletionGuards
		}
	default:
		k, ok := w.byKind[schema.GroupKind{Group: key.Group, Kind: key.Kind}]
		if !ok {
			return Verdict{Allowed: true, Reason: "no guard watches " + key.Kind}, nil
		}
		req.Resource = metav1.GroupVersionResource(k.Source)
		paths = sourceGuards
	}
	switch op {
	case Create:
		if old != nil {
			return Verdict{}, fmt.Errorf("CREATE %s: it exists already (in the files)", key)
		}
	case Update, Delete:
		if old == nil {
			return Verdict{}, fmt.Errorf("%s %s: not in the files", op, key)
		}
	default:
		return Verdict{}, fmt.Errorf("operation %q: want CREATE, UPDATE or DELETE", op)
	}
	obj := e.Object.DeepCopy()
	keepExpiryMarks(old, obj)
	if old != nil {
		obj.SetUID(old.GetUID())
		obj.SetResourceVersion(old.GetResourceVersion())
		raw, err := old.MarshalJSON()
		if err != nil {
			return Verdict{}, err
		}
		req.OldObject = runtime.RawExtension{Raw: raw}
	}
	if op != Delete {
		raw, err := obj.MarshalJSON()
		if err != nil {
			return Verdict{}, err
		}
		req.Object = runtime.RawExtension{Raw: raw}
	}
	if op == Update {
		// kube-apiserver's own validation, before any webhook: a field
		// immutable on the kind (a RoleBinding's roleRef) can't change.
		gr := schema.GroupResource{Group: req.Resource.Group, Resource: req.Resource.Resource}
		field, changed, err := admission.ImmutableFieldChanged(gr, old.Object, obj.Object)
		if err != nil {
			return Verdict{}, fmt.Errorf("%s: comparing immutable fields: %w", key, err)
		}
		if changed {
			return Verdict{Allowed: false, Guard: KubeAPIServer, Reason: fmt.Sprintf("%s %s/%s: %s is immutable: kube-apiserver refuses to change it (field is immutable) before any guard is asked; delete the object and create it again",
				key.Kind, key.Namespace, key.Name, field)}, nil
		}
	}
	guards := admission.NewGuards(admission.Config{
		Mirror: admission.MirrorOf(whatif.New(w.mux)), Authorizer: w.permissions(), Served: w.served(),
		GlobalNamespaces: w.globalNamespaces(), Namespaces: namespaceGetter{w}, Materialized: w.materialized(),
		MirrorWait: -1, ServerIdentity: ServerIdentity,
	})
	var v Verdict
	v.Allowed = true
	for _, p := range paths {
		resp, err := review(ctx, guards.Handler(p), req)
		if err != nil {
			return Verdict{}, fmt.Errorf("guard %s: %w", p, err)
		}
		v.Warnings = append(v.Warnings, resp.Warnings...)
		if !resp.Allowed {
			msg := ""
			if resp.Result != nil {
				msg = resp.Result.Message
			}
			return Verdict{Allowed: false, Guard: p, Reason: msg, Warnings: v.Warnings}, nil
		}
		if len(resp.Patch) > 0 && req.Object.Raw != nil {
			if err := applyPatch(req, resp.Patch); err != nil {
				return Verdict{}, fmt.Errorf("guard %s's patch: %w", p, err)
			}
		}
	}
	return v, nil
}

// keepExpiryMarks carries the server's expiry marks (markExpired) of the
// namespace old into obj, its update, when obj does not state them: files
// never hold them, and kubectl apply, Argo CD and Flux leave an annotation
// they never set as the cluster has it. An update that states them is
// judged as it is.
func keepExpiryMarks(old, obj *unstructured.Unstructured) {
	if old == nil || old.GetAPIVersion() != "v1" || old.GetKind() != kindNamespace {
		return
	}
	v, ok := old.GetAnnotations()[v1alpha1.AnnotationExceptionsExpired]
	if !ok {
		return
	}
	a := obj.GetAnnotations()
	if _, set := a[v1alpha1.AnnotationExceptionsExpired]; set {
		return
	}
	if a == nil {
		a = map[string]string{}
	}
	a[v1alpha1.AnnotationExceptionsExpired] = v
	obj.SetAnnotations(a)
}

// review sends req to a guard's handler as kube-apiserver would.
func review(ctx context.Context, h http.Handler, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	if err != nil {
		return nil, err
	}
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("%d: %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		return nil, err
	}
	if out.Response == nil {
		return nil, fmt.Errorf("no response")
	}
	return out.Response, nil
}

// applyPatch applies a mutating guard's JSON patch to req's object.
func applyPatch(req *admissionv1.AdmissionRequest, patch []byte) error {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return err
	}
	raw, err := p.Apply(req.Object.Raw)
	if err != nil {
		return err
	}
	req.Object = runtime.RawExtension{Raw: raw}
	return nil
}

// current is the object of key as the cluster would hold it: a namespace
// as the mirror holds it, a source with its stand-in uid and version.
func (w *World) current(key Key) *unstructured.Unstructured {
	if key.Group == "" && key.Kind == kindNamespace {
		ns, ok := w.namespaces[key.Name]
		if !ok {
			return nil
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ns)
		if err != nil {
			return nil
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetAPIVersion("v1")
		u.SetKind(kindNamespace)
		return u
	}
	u, ok := w.files[key]
	if !ok {
		return nil
	}
	u = u.DeepCopy()
	u.SetUID(sourceUID(key))
	u.SetResourceVersion("1")
	return u
}

func (w *World) served() []schema.GroupResource {
	out := make([]schema.GroupResource, 0, len(w.kinds))
	for _, k := range w.kinds {
		out = append(out, k.Source.GroupResource())
	}
	return out
}

func (w *World) globalNamespaces() []string {
	out := []string{w.opts.GlobalNamespace}
	for _, k := range w.kinds {
		if k.GlobalNamespace != "" && !slices.Contains(out, k.GlobalNamespace) {
			out = append(out, k.GlobalNamespace)
		}
	}
	return out
}

func (w *World) materialized() []string {
	var out []string
	for _, k := range w.kinds {
		if k.Materialized() {
			out = append(out, k.Resource())
		}
	}
	return out
}

// namespaceGetter reads the world's namespaces as the guards read the
// host's (admission.NamespaceGetter).
type namespaceGetter struct{ w *World }

func (g namespaceGetter) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.Namespace, error) {
	ns, ok := g.w.namespaces[name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
	return ns.DeepCopy(), nil
}

// permissions answers the guards' SubjectAccessReviews as kube-apiserver
// would with the files' RBAC: system:masters may do anything; otherwise
// RBAC (authz.Authorizer.AllowsByRBAC, the files' ClusterRoleBindings and
// RoleBindings), then the authorization webhook (Authorize: inherited
// RoleBindings).
type permissions struct{ a *authz.Authorizer }

func (w *World) permissions() permissions { return permissions{w.authorizer} }

// Allowed implements admission.Authorizer.
func (p permissions) Allowed(_ context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	d, err := p.decide(Requester{User: user.Username, Groups: user.Groups}, attrs)
	return d.Allowed, d.Reason, err
}

// Access is the answer to "may requester do this?".
type Access struct {
	Allowed bool `json:"allowed"`
	// Reason says what allowed it: "system:masters", "RBAC" or the
	// inherited binding the authorization webhook names.
	Reason string `json:"reason,omitempty"`
}

func (p permissions) decide(r Requester, attrs authorizationv1.ResourceAttributes) (Access, error) {
	if slices.Contains(r.Groups, "system:masters") {
		return Access{Allowed: true, Reason: "system:masters"}, nil
	}
	a := authz.Attributes{
		User: r.User, Groups: r.Groups, Namespace: attrs.Namespace, Verb: attrs.Verb,
		APIGroup: attrs.Group, Resource: attrs.Resource, Subresource: attrs.Subresource, Name: attrs.Name,
	}
	ok, err := p.a.AllowsByRBAC(a)
	if err != nil || ok {
		return Access{Allowed: ok, Reason: "RBAC"}, err
	}
	d, err := p.a.Authorize(a)
	if err != nil {
		return Access{}, err
	}
	return Access{Allowed: d.Allowed, Reason: d.Reason}, nil
}

// May answers whether r may do attrs, as kube-apiserver would decide it
// with the files' RBAC and the authorization webhook's inherited answer.
func (w *World) May(r Requester, attrs authorizationv1.ResourceAttributes) (Access, error) {
	return w.permissions().decide(r, attrs)
}
