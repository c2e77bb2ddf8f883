package invariants

import (
	"math/rand/v2"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// run plays op as kube-apiserver would serve it, then lets the materializer
// catch up, and checks the invariants. It reports whether a write was
// stored.
func (h *harness) run(o op) bool {
	h.step++
	h.clock.SetTime(h.clock.Now().Add(time.Second))
	h.deliver()
	h.transcript = nil
	h.current, h.memoryBroken = o, false
	h.badBefore, h.badNow = h.badNow, map[string]bool{}
	before := h.snapshot()
	judged := o
	if d, held := h.w.deletions[o.name]; held && (o.kind == opNSFinish || o.kind == opNSContent) {
		// What the end of a deletion takes, its beginning was judged
		// on: its author's.
		judged.actor = d.by
		h.finishing = &d
	} else if d, held := h.w.deletions[o.namespace]; held && o.kind == opDelete {
		// Deleting what is in a namespace being deleted is let through
		// for anyone, as the namespace controller's DELETE of it
		// (docs/security.md, "Held in Terminating"): what it takes from
		// other views, its deletion's beginning was judged on.
		judged.actor = d.by
		h.finishing = &d
	}
	stored := h.serve(o)
	if d, held := h.w.deletions[o.name]; held && o.kind == opNSDelete && stored {
		d.locked = map[viewedLayer]bool{}
		for k, layers := range before {
			for _, l := range layers {
				d.locked[viewedLayer{k.viewer, l.src}] = true
			}
		}
		h.w.deletions[o.name] = d
	}
	h.materialize()
	if stored {
		h.checkLocks(judged, before)
	}
	h.finishing = nil
	h.checkApproved()
	h.checkExceptions()
	h.checkMaterialized()
	if h.sampleGrants {
		h.checkGrants(rand.New(rand.NewPCG(o.order, 7)))
	} else {
		h.checkGrants(nil)
	}
	h.checkDelegation()
	return stored
}

// serve authorizes, admits and stores o.
func (h *harness) serve(o op) bool {
	switch o.kind {
	case opNSFinish:
		return h.finish(o)
	case opNSContent:
		return h.contentDelete(o)
	}
	a := h.actors[o.actor]
	r, ok := h.build(a, o)
	if !ok {
		return false
	}
	verb := map[admissionv1.Operation]string{admissionv1.Create: "create", admissionv1.Update: "update", admissionv1.Delete: "delete"}[r.op]
	attrs := authorizationv1.ResourceAttributes{Verb: verb, Group: r.gvr.Group, Resource: r.gvr.Resource, Namespace: r.namespace, Name: r.name}
	if r.gvr.Resource == "namespaces" {
		attrs.Namespace = ""
	}
	if !h.oracle.may(a.name, attrs) {
		h.logf("  forbidden by RBAC")
		return false
	}
	rng := rand.New(rand.NewPCG(o.order, uint64(h.step)))
	wrote := false
	for attempt := 0; attempt <= o.repeat; attempt++ {
		if attempt > 0 {
			// A retry is built again from what the client read: the
			// same intent against the world as it is now.
			if r, ok = h.build(a, o); !ok {
				return wrote
			}
		}
		h.fillUID(r)
		obj, allowed := h.admit(r, rng, attempt)
		if !allowed || r.dryRun {
			if !allowed {
				h.logf("  => refused")
			} else {
				h.logf("  => admitted, dry run: nothing stored")
			}
			continue
		}
		if h.persist(a, o, r, obj) {
			wrote = true
		}
	}
	return wrote
}

// fillUID sets the uid of r's object as kube-apiserver does before its
// validating webhooks: a new one for a creation, the stored object's for an
// update.
func (h *harness) fillUID(r request) {
	if r.obj == nil {
		return
	}
	m := metaOf(r.obj)
	switch {
	case m.GetUID() != "":
	case r.op == admissionv1.Create && r.gvr.Resource == "namespaces":
		m.SetUID(h.w.nextUID("ns-" + m.GetName()))
	case r.op == admissionv1.Create:
		m.SetUID(h.w.nextUID("uid-" + m.GetNamespace() + "-" + m.GetName()))
	case r.old != nil:
		m.SetUID(metaOf(r.old).GetUID())
	}
}

// build turns o into a request against the world as it is, or false when
// kube-apiserver would answer before admission (not found, or a namespace
// that does not exist or is being deleted).
func (h *harness) build(a *actor, o op) (request, bool) {
	r := request{actor: a, dryRun: o.dryRun}
	switch o.kind {
	case opNSCreate, opNSUpdate, opNSDelete:
		r.gvr, r.name = gvrOf("namespaces"), o.name
		cur, exists := h.w.namespaces[o.name]
		switch o.kind {
		case opNSCreate:
			if exists { // AlreadyExists comes after admission
				r.old = nil
			}
			n := newNamespace(o.name)
			applyNSEdit(n, o.ns)
			r.op, r.obj = admissionv1.Create, n
		case opNSUpdate:
			if !exists {
				h.logf("  namespace %s not found", o.name)
				return r, false
			}
			n := cur.DeepCopy()
			applyNSEdit(n, o.ns)
			r.op, r.old, r.obj = admissionv1.Update, cur.DeepCopy(), n
		case opNSDelete:
			if !exists || cur.DeletionTimestamp != nil {
				h.logf("  namespace %s not found or already terminating", o.name)
				return r, false
			}
			r.op, r.old = admissionv1.Delete, cur.DeepCopy()
		}
		return r, true
	}
	k := key{o.resource, o.namespace, o.name}
	r.gvr, r.namespace, r.name = gvrOf(o.resource), o.namespace, o.name
	cur, exists := h.w.objs[k]
	switch o.kind {
	case opCreate:
		ns, ok := h.w.namespaces[o.namespace]
		if !ok || ns.DeletionTimestamp != nil {
			h.logf("  namespace %s not found or terminating (NamespaceLifecycle)", o.namespace)
			return r, false
		}
		obj := newSource(o.resource, o.namespace, o.name, o.src.content)
		applySrcEdit(obj, o.src)
		r.op, r.obj = admissionv1.Create, obj
	case opUpdate, opCopyWrite:
		if !exists {
			h.logf("  %s not found", k)
			return r, false
		}
		obj := cur.obj.DeepCopyObject()
		applySrcEdit(obj, o.src)
		if o.kind == opCopyWrite && o.src.dropCopyLabel {
			l := labelsOf(metaOf(obj))
			delete(l, v1alpha1.LabelMaterialized)
			metaOf(obj).SetLabels(l)
		}
		r.op, r.old, r.obj = admissionv1.Update, cur.obj.DeepCopyObject(), obj
	case opDelete:
		if !exists {
			h.logf("  %s not found", k)
			return r, false
		}
		r.op, r.old = admissionv1.Delete, cur.obj.DeepCopyObject()
	}
	return r, true
}

func applyNSEdit(n *corev1.Namespace, e nsEdit) {
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	switch e.parent {
	case set:
		n.Labels[v1alpha1.LabelParent] = e.parentN
	case clear:
		delete(n.Labels, v1alpha1.LabelParent)
	}
	switch e.inherit {
	case set:
		n.Labels[v1alpha1.LabelInherit] = "false"
	case clear:
		delete(n.Labels, v1alpha1.LabelInherit)
	}
	switch e.stage {
	case set:
		n.Labels[v1alpha1.LabelStage] = e.stageV
	case clear:
		delete(n.Labels, v1alpha1.LabelStage)
	}
	a := annotationsOf(n)
	switch e.exclude {
	case set:
		a[v1alpha1.AnnotationExclude] = e.exclV
	case clear:
		delete(a, v1alpha1.AnnotationExclude)
	}
	if len(a) == 0 {
		a = nil
	}
	n.Annotations = a
	applyExceptionEdit(n, e.excep)
}

func applySrcEdit(obj runtime.Object, e srcEdit) {
	if e.content >= 0 {
		setContent(obj, e.content)
	}
	m := metaOf(obj)
	a := annotationsOf(m)
	flag := func(t tri, k, v string) {
		switch t {
		case set:
			a[k] = v
		case clear:
			delete(a, k)
		}
	}
	flag(e.lock, v1alpha1.AnnotationLocked, "true")
	flag(e.overlay, v1alpha1.AnnotationMerge, "overlay")
	flag(e.approval, v1alpha1.AnnotationExceptionApproval, "required")
	flag(e.candidate, v1alpha1.AnnotationCandidateFor, e.candFor)
	flag(e.candidate, v1alpha1.AnnotationCanarySelector, e.selector)
	if len(a) == 0 {
		a = nil
	}
	m.SetAnnotations(a)
}

// persist stores an admitted write, as etcd would: a creation of what
// exists fails (after admission, as in kube-apiserver). A namespace's
// deletion is played to its end at once: marked terminating, emptied by
// the namespace controller, removed.
func (h *harness) persist(a *actor, o op, r request, obj runtime.Object) bool {
	switch r.op {
	case admissionv1.Create:
		if r.gvr.Resource == "namespaces" {
			if _, ok := h.w.namespaces[r.name]; ok {
				h.logf("  => AlreadyExists (after admission)")
				return false
			}
			h.storeLag(a.name, nil, obj, o.lags())
			if !a.all {
				a.admin[r.name] = true
			}
			h.logf("  => stored")
			return true
		}
		if _, ok := h.w.objs[key{o.resource, r.namespace, r.name}]; ok {
			h.logf("  => AlreadyExists (after admission)")
			return false
		}
		h.storeLag(a.name, nil, obj, o.lags())
	case admissionv1.Update:
		if r.gvr.Resource == "namespaces" {
			n := obj.(*corev1.Namespace)
			cur := h.w.namespaces[r.name]
			n.UID, n.CreationTimestamp, n.DeletionTimestamp = cur.UID, cur.CreationTimestamp, cur.DeletionTimestamp
			h.storeLag(a.name, cur, n, o.lags())
			h.logf("  => stored")
			return true
		}
		cur := h.w.objs[key{o.resource, r.namespace, r.name}]
		m := metaOf(obj)
		m.SetUID(metaOf(cur.obj).GetUID())
		m.SetCreationTimestamp(metaOf(cur.obj).GetCreationTimestamp())
		h.storeLag(a.name, cur.obj, obj, o.lags())
	case admissionv1.Delete:
		if r.gvr.Resource == "namespaces" {
			if o.held {
				h.w.deletions[r.name] = deletion{by: a.name, subtree: h.w.below(r.name)}
				h.markTerminating(a, r.name, o.lags())
				h.logf("  => namespace Terminating (held by a finalizer; the namespace controller deletes its content later)")
				return true
			}
			h.deleteNamespace(a, r.name, o.lags())
			h.logf("  => namespace deleted (and emptied)")
			return true
		}
		cur := h.w.objs[key{o.resource, r.namespace, r.name}]
		h.storeLag(a.name, cur.obj, nil, o.lags())
	}
	h.logf("  => stored")
	return true
}

// deleteNamespace plays a namespace's deletion: terminating, its objects
// deleted by the namespace controller, then gone.
func (h *harness) deleteNamespace(a *actor, name string, lag lags) {
	h.terminate(a, name, lag)
	h.remove(a.name, name, lag)
}

// terminate begins a namespace's deletion: it is marked Terminating and the
// namespace controller deletes its objects (a finalizer may then hold it,
// until finish).
func (h *harness) terminate(a *actor, name string, lag lags) {
	h.markTerminating(a, name, lag)
	for _, k := range h.w.keys("") {
		if k.namespace == name {
			h.storeLag(namespaceController, h.w.objs[k].obj, nil, lag)
		}
	}
}

// markTerminating marks a namespace Terminating.
func (h *harness) markTerminating(a *actor, name string, lag lags) {
	cur := h.w.namespaces[name]
	term := cur.DeepCopy()
	now := metav1.NewTime(h.clock.Now())
	term.DeletionTimestamp = &now
	h.storeLag(a.name, cur, term, lag)
}

// remove ends a namespace's deletion: it is gone.
func (h *harness) remove(writer, name string, lag lags) {
	h.storeLag(writer, h.w.namespaces[name], nil, lag)
	delete(h.w.deletions, name)
	for _, x := range h.actors {
		delete(x.admin, name)
	}
}

// namespaceController is the user of kube-controller-manager's namespace
// controller.
const namespaceController = "system:serviceaccount:kube-system:namespace-controller"

// finish removes the finalizer that holds a Terminating namespace: the
// namespace controller's last requests, each sent through the webhooks
// (controller_test.go), delete what is left in it, then it.
func (h *harness) finish(o op) bool {
	if _, held := h.w.deletions[o.name]; !held {
		h.logf("  namespace %s is not held in Terminating", o.name)
		return false
	}
	for _, k := range h.w.keys("") {
		if k.namespace == o.name && !h.controllerDelete(o, k) {
			return false
		}
	}
	if !h.controllerRemove(o, o.name) {
		return false
	}
	h.logf("  => namespace removed by the namespace controller")
	return true
}
