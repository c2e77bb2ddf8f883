package invariants

import (
	"math/rand/v2"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
)

// The namespace controller's requests that end a deletion held in
// Terminating: the DELETE of each object left in the namespace, then the
// namespace's own last DELETE, each sent through the webhooks as
// kube-apiserver sends them (kube-controller-manager's identity: it may
// delete anything, and unlock nothing). A guard may let them through
// (docs/security.md, "Held in Terminating") but must not refuse them: a
// namespace stuck Terminating after its content is gone. What they take
// from other views is checked as the end of the deletion its first DELETE
// was judged on.

// invStuck: a request of the namespace controller ending a deletion was
// refused.
const invStuck = "deletion ends"

// controller is the namespace controller as an actor.
func (h *harness) controller() *actor {
	if a, ok := h.actors[namespaceController]; ok {
		return a
	}
	a := &actor{name: namespaceController, groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system"}, all: true}
	h.actors[namespaceController] = a
	return a
}

// controllerDelete sends the namespace controller's DELETE of the object
// k of a Terminating namespace through the webhooks, and deletes it when
// admitted.
func (h *harness) controllerDelete(o op, k key) bool {
	cur, ok := h.w.objs[k]
	if !ok {
		h.logf("  %s not found", k)
		return false
	}
	a := h.controller()
	r := request{actor: a, op: admissionv1.Delete, gvr: gvrOf(k.resource), namespace: k.namespace, name: k.name, old: cur.obj.DeepCopyObject()}
	h.logf("  namespace controller: DELETE %s", k)
	if _, allowed := h.admit(r, rand.New(rand.NewPCG(o.order, uint64(h.step))), 0); !allowed {
		h.violate(invStuck, "39/controller-refused", "the namespace controller's DELETE of %s, in namespace %s being deleted, was refused: the namespace stays Terminating", k, k.namespace)
		return false
	}
	h.storeLag(a.name, cur.obj, nil, o.lags())
	return true
}

// controllerRemove sends the namespace controller's last DELETE of the
// Terminating namespace name through the webhooks, once it is empty, and
// removes it when admitted.
func (h *harness) controllerRemove(o op, name string) bool {
	cur := h.w.namespaces[name]
	a := h.controller()
	r := request{actor: a, op: admissionv1.Delete, gvr: gvrOf("namespaces"), name: name, old: cur.DeepCopy()}
	h.logf("  namespace controller: DELETE namespace %s", name)
	if _, allowed := h.admit(r, rand.New(rand.NewPCG(o.order, uint64(h.step))), 0); !allowed {
		h.violate(invStuck, "39/controller-refused", "the namespace controller's last DELETE of namespace %s, emptied, was refused: it stays Terminating", name)
		return false
	}
	h.remove(a.name, name, o.lags())
	return true
}

// contentDelete deletes one object of a Terminating namespace as the
// namespace controller does (opNSContent).
func (h *harness) contentDelete(o op) bool {
	if _, held := h.w.deletions[o.name]; !held {
		h.logf("  namespace %s is not held in Terminating", o.name)
		return false
	}
	return h.controllerDelete(o, key{o.resource, o.name, o.item})
}

// TestControllerEndsDeletion plays a deletion held in Terminating to its
// end through the webhooks: f, below a, holds a locked RoleBinding and
// copies; alice deletes f (no children: nothing lost), the namespace
// controller deletes the locked binding, alice (no unlock) a copy, and the
// finalizer's removal ends the deletion with the controller's DELETEs of
// what is left and of f. None may be refused.
func TestControllerEndsDeletion(t *testing.T) {
	s := newShared(t)
	h := mustHarness(t, s)
	ops := []op{
		{actor: "alice", kind: opNSCreate, name: "f", ns: nsEdit{parent: set, parentN: "a"}},
		{actor: "org", kind: opCreate, resource: rolebindings, namespace: "f", name: "x", src: srcEdit{content: 1, lock: set}},
		{actor: "alice", kind: opNSDelete, name: "f", held: true},
		{actor: namespaceController, kind: opNSContent, name: "f", resource: rolebindings, item: "x", lag: 3, lag2: 6},
		{actor: "alice", kind: opDelete, resource: netpols, namespace: "f", name: "deny", lag: 6},
		{actor: "alice", kind: opNSFinish, name: "f", lag2: 6},
	}
	want := []bool{true, true, true, true, true, true}
	for i, o := range ops {
		o.order = uint64(i + 1)
		if stored := h.run(o); stored != want[i] {
			t.Errorf("%s: stored %v, want %v; transcript:\n%s", o, stored, want[i], strings.Join(h.transcript, "\n"))
		}
	}
	if _, ok := h.w.namespaces["f"]; ok {
		t.Errorf("namespace f still exists")
	}
	for _, v := range h.violations {
		t.Errorf("%s", v)
	}
}
