package invariants

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// Exceptions in the model (issue 42): actors request exceptions (sometimes
// naming someone else as the requester), approve them (sometimes as
// someone else, or for sources they may not approve), and try to mark
// them expired, which only the server may; sources require approval or
// not. The invariant: every exception version, approval and expiry mark in
// the world was written by whom it may be, so an item whose source
// requires approval leaves a view only by an approval of someone allowed
// "approve" on its source who did not request it. Locked items are the
// locks invariant's, as ever.

const invExceptions = "exceptions"

// exceptionNames are the exceptions the generator writes, and
// exceptionEntries what they except: named unlocked and locked items and
// wildcards (the guards refuse an exception of a locked item, a wildcard's
// included).
var (
	exceptionNames   = []string{"x1", "x2"}
	exceptionEntries = []string{"rolebindings/x", "rolebindings/rb", "roles/quota-admin", "networkpolicies/allow", "rolebindings/*", "rolebindings/g-lock", "roles/*"}
)

// exceptionEdit is what an op does to a namespace's exceptions: request
// (or withdraw) one, approve one, mark one expired.
type exceptionEdit struct {
	request tri
	// name, exclude and requester of the exception requested or withdrawn.
	name, exclude, requester string
	approve                  tri
	// approver claimed and the namespaces the approval covers (comma-separated).
	approver, sources string
	expire            tri
}

// genExceptionOp turns o, a namespace update, into an exception edit:
// mostly a request by an actor on a namespace they administer, or an
// approval of a namespace's exception by an actor who may approve
// (sometimes by anyone, anywhere: RBAC and the guards must refuse it).
func (h *harness) genExceptionOp(rng *rand.Rand, o op) op {
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	var mine, declaring []string
	for _, n := range h.w.namespaceNames() {
		if h.actors[o.actor].isAdmin(n) {
			mine = append(mine, n)
		}
		if _, ok := h.w.namespaces[n].Annotations[v1alpha1.AnnotationExceptions]; ok {
			declaring = append(declaring, n)
		}
	}
	switch f := rng.Float64(); {
	case f < 0.4 && len(declaring) > 0:
		// an approval where there is something to approve
		o.name = pick(declaring)
		if rng.Float64() < 0.8 {
			o.actor = pick([]string{"org", "ops", "org2"})
		}
	case f < 0.9 && len(mine) > 0:
		o.name = pick(mine)
	}
	o.ns = nsEdit{excep: h.genExceptionEdit(rng, o.actor, o.name)}
	if o.ns.excep == (exceptionEdit{}) {
		o.ns.excep = exceptionEdit{request: set, name: pick(exceptionNames), exclude: pick(exceptionEntries), requester: o.actor}
	}
	return o
}

// genExceptionEdit draws an exceptionEdit for actor on namespace ns.
func (h *harness) genExceptionEdit(rng *rand.Rand, actor, ns string) exceptionEdit {
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	e := exceptionEdit{name: pick(exceptionNames), requester: actor, approver: actor}
	if rng.Float64() < 0.15 {
		e.requester = pick(actorNames)
	}
	if rng.Float64() < 0.15 {
		e.approver = pick(actorNames)
	}
	switch f := rng.Float64(); {
	case f < 0.45:
		e.request = set
		e.exclude = pick(exceptionEntries)
	case f < 0.55:
		e.request = clear
	case f < 0.9:
		e.approve = set
		// The namespaces an approval covers: the global one, or the
		// namespace's parent too.
		e.sources = global
		if p := h.w.namespaces[ns]; p != nil && p.Labels[v1alpha1.LabelParent] != "" && rng.Float64() < 0.5 {
			e.sources += "," + p.Labels[v1alpha1.LabelParent]
		}
	case f < 0.95:
		e.approve = clear
	default:
		e.expire = set
	}
	return e
}

func (e exceptionEdit) String() string {
	var parts []string
	switch e.request {
	case set:
		parts = append(parts, fmt.Sprintf("exception %s=%s by %s", e.name, e.exclude, e.requester))
	case clear:
		parts = append(parts, "-exception "+e.name)
	}
	switch e.approve {
	case set:
		parts = append(parts, fmt.Sprintf("approve %s as %s for %s", e.name, e.approver, e.sources))
	case clear:
		parts = append(parts, "-approval "+e.name)
	}
	if e.expire == set {
		parts = append(parts, "expire "+e.name)
	}
	return strings.Join(parts, " ")
}

// applyExceptionEdit edits n's exception annotations as a client would:
// the approval names the digest of the exception as the request makes it.
func applyExceptionEdit(n *corev1.Namespace, e exceptionEdit) {
	if e == (exceptionEdit{}) {
		return
	}
	a := annotationsOf(n)
	var specs []v1alpha1.ExceptionSpec
	if v, ok := a[v1alpha1.AnnotationExceptions]; ok {
		specs, _ = merge.ParseExceptions(v)
	}
	drop := func(name string) {
		out := specs[:0]
		for _, s := range specs {
			if s.Name != name {
				out = append(out, s)
			}
		}
		specs = out
	}
	switch e.request {
	case set:
		drop(e.name)
		specs = append(specs, v1alpha1.ExceptionSpec{Name: e.name, Exclude: []string{e.exclude}, Reason: "ticket", RequestedBy: e.requester})
	case clear:
		drop(e.name)
	}
	putJSON(a, v1alpha1.AnnotationExceptions, specs, len(specs) > 0)
	if e.approve != keep || e.expire == set {
		digest := "none"
		for _, s := range specs {
			if s.Name == e.name {
				digest = merge.ExceptionDigest(s)
			}
		}
		approvals := map[string]v1alpha1.ExceptionApproval{}
		if v, ok := a[v1alpha1.AnnotationExceptionApprovals]; ok {
			approvals, _ = merge.ParseExceptionApprovals(v)
		}
		switch e.approve {
		case set:
			approvals[e.name] = v1alpha1.ExceptionApproval{By: e.approver, Digest: digest, Sources: strings.Split(e.sources, ",")}
		case clear:
			delete(approvals, e.name)
		}
		putJSON(a, v1alpha1.AnnotationExceptionApprovals, approvals, len(approvals) > 0)
		if e.expire == set {
			expired := map[string]string{}
			if v, ok := a[v1alpha1.AnnotationExceptionsExpired]; ok {
				expired, _ = merge.ParseExceptionsExpired(v)
			}
			expired[e.name] = digest
			putJSON(a, v1alpha1.AnnotationExceptionsExpired, expired, true)
		}
	}
	if len(a) == 0 {
		a = nil
	}
	n.Annotations = a
}

func putJSON(a map[string]string, key string, v any, keepIt bool) {
	if !keepIt {
		delete(a, key)
		return
	}
	b, _ := json.Marshal(v)
	a[key] = string(b)
}

// exceptionWrite names one version of one entry of one exception
// annotation of a namespace.
type exceptionWrite struct{ namespace, annotation, name, value string }

// recordExceptionWriters remembers who wrote each entry of n's exception
// annotations that old did not hold as it is.
func (h *harness) recordExceptionWriters(writer string, old, n *corev1.Namespace) {
	entries := func(ns *corev1.Namespace) map[exceptionWrite]bool {
		out := map[exceptionWrite]bool{}
		if ns == nil {
			return out
		}
		a := ns.Annotations
		if specs, err := merge.ParseExceptions(a[v1alpha1.AnnotationExceptions]); err == nil {
			for _, s := range specs {
				out[exceptionWrite{ns.Name, v1alpha1.AnnotationExceptions, s.Name, merge.ExceptionDigest(s)}] = true
			}
		}
		if approvals, err := merge.ParseExceptionApprovals(a[v1alpha1.AnnotationExceptionApprovals]); err == nil {
			for name, ap := range approvals {
				b, _ := json.Marshal(ap)
				out[exceptionWrite{ns.Name, v1alpha1.AnnotationExceptionApprovals, name, string(b)}] = true
			}
		}
		if expired, err := merge.ParseExceptionsExpired(a[v1alpha1.AnnotationExceptionsExpired]); err == nil {
			for name, d := range expired {
				out[exceptionWrite{ns.Name, v1alpha1.AnnotationExceptionsExpired, name, d}] = true
			}
		}
		return out
	}
	before := entries(old)
	for w := range entries(n) {
		if !before[w] {
			h.exceptionWriters[w] = writer
		}
	}
}

// checkExceptions: each exception version in the world was written by the
// requester it names, each approval in effect by someone else allowed
// "approve" on what it covers, and each expiry mark by the server.
func (h *harness) checkExceptions() {
	names := make([]string, 0, len(h.w.namespaces))
	for n := range h.w.namespaces {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, ns := range names {
		n := h.w.namespaces[ns]
		for _, e := range merge.ExceptionsOf(merge.NamespaceOf(n)) {
			w, known := h.exceptionWriters[exceptionWrite{ns, v1alpha1.AnnotationExceptions, e.Name, e.Digest}]
			if known && w != e.RequestedBy {
				h.violateState("exception "+ns+"/"+e.Name, invExceptions, "", "exception %s in namespace %s names %s as its requester, but %s wrote it", e.Name, ns, e.RequestedBy, w)
			}
			if e.Approval != nil {
				h.approvalsSeen++
				b, _ := json.Marshal(*e.Approval)
				w, known := h.exceptionWriters[exceptionWrite{ns, v1alpha1.AnnotationExceptionApprovals, e.Name, string(b)}]
				if known {
					if why := h.mayApprove(w, e); why != "" {
						h.violateState("approval "+ns+"/"+e.Name, invExceptions, "", "exception %s in namespace %s is approved by %s's write, though %s", e.Name, ns, w, why)
					}
				}
			}
			if e.Expired {
				if w, known := h.exceptionWriters[exceptionWrite{ns, v1alpha1.AnnotationExceptionsExpired, e.Name, e.Digest}]; known && w != server {
					h.violateState("expired "+ns+"/"+e.Name, invExceptions, "", "exception %s in namespace %s was marked expired by %s, not the server", e.Name, ns, w)
				}
			}
		}
	}
}

// mayApprove says why writer may not have written e's approval ("" if it
// may): it is the requester, or may not approve a source it covers.
func (h *harness) mayApprove(writer string, e merge.Exception) string {
	if writer == e.RequestedBy {
		return "they requested it"
	}
	for _, src := range e.Approval.Sources {
		for _, entry := range e.Exclude {
			ex, errs := merge.ParseExclusions(entry)
			if len(errs) > 0 || len(ex) != 1 {
				continue
			}
			name := ex[0].Name
			if name == "*" {
				name = ""
			}
			attrs := authorizationv1.ResourceAttributes{Verb: "approve", Group: grOf[ex[0].Resource].Group, Resource: ex[0].Resource, Namespace: src, Name: name}
			if !h.oracle.may(writer, attrs) {
				return fmt.Sprintf("they may not approve %s in %s", entry, src)
			}
		}
	}
	return ""
}

// TestExceptionScenario plays one exception through the guards: a tenant
// requests it, approves it (refused: the requester), someone allowed
// approve on the global namespace approves it, a tenant marks it expired
// (refused: the server's only).
func TestExceptionScenario(t *testing.T) {
	s := newShared(t)
	h := mustHarness(t, s)
	ops := []op{
		{actor: "alice", kind: opNSUpdate, name: "a", ns: nsEdit{excep: exceptionEdit{request: set, name: "x1", exclude: "rolebindings/x", requester: "alice"}}},
		{actor: "alice", kind: opNSUpdate, name: "a", ns: nsEdit{excep: exceptionEdit{approve: set, name: "x1", approver: "alice", sources: global}}},
		{actor: "ops", kind: opNSUpdate, name: "a", ns: nsEdit{excep: exceptionEdit{approve: set, name: "x1", approver: "ops", sources: global}}},
		{actor: "alice", kind: opNSUpdate, name: "a", ns: nsEdit{excep: exceptionEdit{expire: set, name: "x1"}}},
	}
	want := []bool{true, false, true, false}
	for i, o := range ops {
		if stored := h.run(o); stored != want[i] {
			t.Errorf("%s: stored %v, want %v; transcript:\n%s", o, stored, want[i], strings.Join(h.transcript, "\n"))
		}
	}
	if h.approvalsSeen == 0 {
		t.Error("the approval never was in effect")
	}
	for _, v := range h.violations {
		t.Errorf("%s", v)
	}
}
