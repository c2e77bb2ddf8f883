package invariants

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// An op is one request of one actor, with every random choice fixed in it
// (the lag of the mirror, the order of the webhooks' answers), so that a
// sequence replays alike and can be shrunk by leaving ops out. An op that no
// longer fits the world (an update of what does not exist) fails as
// kube-apiserver would fail it.
type op struct {
	actor string
	kind  opKind
	// resource, namespace and name of a source; name alone for a namespace.
	resource, namespace, name string
	src                       srcEdit
	ns                        nsEdit
	dryRun                    bool
	// repeat sends the same request again that many times (a client's
	// retry after a timeout).
	repeat int
	// twice: kube-apiserver asks each validating webhook of the request
	// twice, and the first answer is lost (the connection reset after the
	// guard decided; a namespace DELETE's validation run again when its
	// update conflicts), the first call sent to a replica of its own.
	twice bool
	// lag and lag2 are how many ops later each replica's mirror sees the
	// write.
	lag, lag2 int
	// held: a namespace's deletion is held in Terminating by a finalizer
	// until an opNSFinish of it.
	held bool
	// order seeds the order in which the validating webhooks answer, and
	// which replica each webhook call is sent to.
	order uint64
	// to, when set, sends every webhook call to replica to-1 (scenario
	// tests); 0: each call to a replica drawn from order.
	to int
	// item is the object of resource in namespace name an opNSContent
	// deletes.
	item string
	// vetoed: another validating webhook (an admission policy of the
	// cluster's) refuses the request, whatever the guards answer; the
	// guards that admitted it may remember a write that never lands.
	vetoed bool
}

// lags are how many ops later each replica's mirror sees a write.
type lags [replicas]int

func (o op) lags() lags { return lags{o.lag, o.lag2} }

type opKind int

const (
	opCreate opKind = iota
	opUpdate
	opDelete
	opNSCreate
	opNSUpdate
	opNSDelete
	// opCopyWrite updates a materialized copy as `kubectl apply` would:
	// its content, keeping its labels unless src.dropCopyLabel.
	opCopyWrite
	// opNSFinish removes the finalizer that holds a Terminating
	// namespace: the namespace controller finishes its deletion, its
	// DELETEs of what is left in it and its last DELETE of the namespace
	// sent through the webhooks.
	opNSFinish
	// opNSContent is the namespace controller's DELETE of one object
	// (resource, item) left in a namespace (name) held in Terminating,
	// sent through the webhooks.
	opNSContent
)

// tri is keep, set or clear.
type tri int

const (
	keep tri = iota
	set
	clear
)

// srcEdit is what a create or update of a source sets.
type srcEdit struct {
	content       int // -1 keeps it
	lock, overlay tri
	// candidate: set makes it a candidate for candFor with selector.
	candidate         tri
	candFor, selector string
	dropCopyLabel     bool
	// approval: set requires approval for the source's exceptions.
	approval tri
}

// nsEdit is what a create or update of a namespace sets.
type nsEdit struct {
	parent  tri
	parentN string
	// inherit set labels implicit.dev/inherit: "false"; clear removes it.
	inherit tri
	stage   tri
	stageV  string
	exclude tri
	exclV   string
	// excep requests, approves or marks expired an exception (issue 42).
	excep exceptionEdit
}

func (t tri) show(name, v string) string {
	switch t {
	case set:
		if v == "" {
			return name
		}
		return name + "=" + v
	case clear:
		return "-" + name
	}
	return ""
}

func (o op) String() string {
	var b strings.Builder
	verb := map[opKind]string{opCreate: "CREATE", opUpdate: "UPDATE", opDelete: "DELETE", opNSCreate: "CREATE", opNSUpdate: "UPDATE", opNSDelete: "DELETE", opCopyWrite: "UPDATE(copy)", opNSFinish: "FINALIZE", opNSContent: "DELETE(content)"}[o.kind]
	fmt.Fprintf(&b, "%s %s ", o.actor, verb)
	var parts []string
	add := func(s string) {
		if s != "" {
			parts = append(parts, s)
		}
	}
	switch o.kind {
	case opNSContent:
		fmt.Fprintf(&b, "%s %s/%s (namespace Terminating)", o.resource, o.name, o.item)
	case opNSCreate, opNSUpdate, opNSDelete, opNSFinish:
		fmt.Fprintf(&b, "namespace %s", o.name)
		if o.held {
			add("held-by-finalizer")
		}
		add(o.ns.parent.show("parent", o.ns.parentN))
		add(o.ns.inherit.show("inherit=false", ""))
		add(o.ns.stage.show("stage", o.ns.stageV))
		add(o.ns.exclude.show("exclude", o.ns.exclV))
		add(o.ns.excep.String())
	default:
		fmt.Fprintf(&b, "%s %s/%s", o.resource, o.namespace, o.name)
		if o.src.content >= 0 && o.kind != opDelete {
			add(fmt.Sprintf("content#%d", o.src.content))
		}
		add(o.src.lock.show("locked", ""))
		add(o.src.overlay.show("overlay", ""))
		add(o.src.approval.show("exception-approval=required", ""))
		add(o.src.candidate.show("candidate-for", o.src.candFor))
		if o.src.candidate == set {
			add(fmt.Sprintf("canary-selector=%q", o.src.selector))
		}
		if o.src.dropCopyLabel {
			add("-" + v1alpha1.LabelMaterialized)
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(&b, " {%s}", strings.Join(parts, " "))
	}
	if o.dryRun {
		b.WriteString(" --dry-run=server")
	}
	if o.repeat > 0 {
		fmt.Fprintf(&b, " (sent %d times)", o.repeat+1)
	}
	if o.twice {
		b.WriteString(" (each webhook asked twice, the first answer lost)")
	}
	if o.to > 0 {
		fmt.Fprintf(&b, " (to replica %d)", o.to-1)
	}
	if o.vetoed {
		b.WriteString(" (refused by another webhook)")
	}
	if o.lag > 0 || o.lag2 > 0 {
		fmt.Fprintf(&b, " [mirrors %d and %d ops behind]", o.lag, o.lag2)
	}
	return b.String()
}

// veto marks o vetoed with probability rate, drawn from o's own order so
// that the generator's draws, and so every seed's sequence, stay as they
// are without vetoes (IMPLICIT_INVARIANTS_VETO).
func veto(o op, rate float64) op {
	if rate > 0 && o.actor != namespaceController && o.kind != opNSFinish {
		o.vetoed = rand.New(rand.NewPCG(o.order, 0x7e70)).Float64() < rate
	}
	return o
}

// Pools the generator draws from.
var (
	namespacePool = []string{"p", "a", "b", "c", "d", "e", "f"}
	stages        = []string{"canary", "x"}
	selectors     = []string{"implicit.dev/stage=canary", "!implicit.dev/stage", "implicit.dev/stage in (canary,x)"}
	exclusions    = []string{"rolebindings/*", "networkpolicies/deny", "rolebindings/g-lock", "roles/*", "networkpolicies/*"}
	lagPool       = []int{0, 0, 0, 0, 1, 1, 2, 3, 6}
)

// gen draws the next op from the world as it is.
func (h *harness) gen(rng *rand.Rand) op {
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	triOf := func(pSet, pClear float64) tri {
		switch f := rng.Float64(); {
		case f < pSet:
			return set
		case f < pSet+pClear:
			return clear
		}
		return keep
	}
	o := op{actor: pick(actorNames), lag: lagPool[rng.IntN(len(lagPool))], lag2: lagPool[rng.IntN(len(lagPool))], order: rng.Uint64(), src: srcEdit{content: -1}}
	if rng.Float64() < 0.12 {
		o.dryRun = true
	}
	if rng.Float64() < 0.06 {
		o.repeat = 1
	}
	if rng.Float64() < 0.06 {
		o.twice = true
	}
	names := h.w.namespaceNames()
	switch f := rng.Float64(); {
	case f < 0.30: // a namespace's place, tenancy, stage, exclusions
		o.kind = opNSUpdate
		o.name = pick(names)
		if rng.Float64() < 0.3 {
			return h.genExceptionOp(rng, o)
		}
		for o.ns == (nsEdit{}) {
			if o.ns.parent = triOf(0.35, 0.08); o.ns.parent == set {
				o.ns.parentN = pick(append(names, "f"))
			}
			o.ns.inherit = triOf(0.12, 0.12)
			if o.ns.stage = triOf(0.18, 0.08); o.ns.stage == set {
				o.ns.stageV = pick(stages)
			}
			if o.ns.exclude = triOf(0.15, 0.08); o.ns.exclude == set {
				o.ns.exclV = pick(exclusions)
			}
		}
	case f < 0.36:
		o.kind = opNSCreate
		o.name = pick(namespacePool)
		if rng.Float64() < 0.6 {
			o.ns.parent, o.ns.parentN = set, pick(names)
		}
		if rng.Float64() < 0.25 {
			o.ns.inherit = set
		}
		if rng.Float64() < 0.15 {
			o.ns.stage, o.ns.stageV = set, pick(stages)
		}
	case f < 0.39:
		o.kind = opNSDelete
		o.name = pick(namespacePool)
		o.held = rng.Float64() < 0.5
	case f < 0.41:
		// The finalizer holding a Terminating namespace is removed.
		var held []string
		for _, n := range names {
			if h.w.namespaces[n].DeletionTimestamp != nil {
				held = append(held, n)
			}
		}
		if len(held) == 0 {
			return h.gen(rng)
		}
		o.kind, o.name = opNSFinish, pick(held)
		// Or the namespace controller deletes one of what is left in it.
		var left []key
		for _, k := range h.w.keys("") {
			if k.namespace == o.name {
				left = append(left, k)
			}
		}
		if len(left) > 0 && rng.Float64() < 0.7 {
			k := left[rng.IntN(len(left))]
			o.actor, o.kind, o.resource, o.item = namespaceController, opNSContent, k.resource, k.name
		}
	case f < 0.45:
		copies := h.copies()
		if len(copies) == 0 {
			return h.gen(rng)
		}
		k := copies[rng.IntN(len(copies))]
		o.kind, o.resource, o.namespace, o.name = opCopyWrite, k.resource, k.namespace, k.name
		o.src.content = rng.IntN(contents(k.resource))
		o.src.dropCopyLabel = rng.Float64() < 0.2
	default: // a source
		o.resource = resources[rng.IntN(len(resources))]
		// Mostly where the actor may write: a forbidden request tests
		// nothing but RBAC.
		a := h.actors[o.actor]
		var mine []string
		for _, n := range append(names, global) {
			if a.isAdmin(n) {
				mine = append(mine, n)
			}
		}
		if len(mine) > 0 && rng.Float64() < 0.8 {
			o.namespace = pick(mine)
		} else {
			o.namespace = pick(append(names, global, global))
		}
		var existing, free []string
		for _, n := range sourceNames[o.resource] {
			if _, ok := h.w.objs[key{o.resource, o.namespace, n}]; ok {
				existing = append(existing, n)
			} else {
				free = append(free, n)
			}
		}
		switch f := rng.Float64(); {
		case len(existing) > 0 && f < 0.15:
			o.kind, o.name = opDelete, pick(existing)
			return o
		case len(existing) > 0 && (f < 0.6 || len(free) == 0):
			o.kind, o.name = opUpdate, pick(existing)
			if rng.Float64() < 0.5 {
				o.src.content = rng.IntN(contents(o.resource))
			}
		default:
			o.kind = opCreate
			o.name = pick(sourceNames[o.resource])
			if len(free) > 0 && rng.Float64() < 0.8 {
				o.name = pick(free)
			}
			o.src.content = rng.IntN(contents(o.resource))
		}
		o.src.lock = triOf(0.3, 0.15)
		o.src.overlay = triOf(0.15, 0.1)
		o.src.approval = triOf(0.15, 0.05)
		if o.src.candidate = triOf(0.2, 0.08); o.src.candidate == set {
			// Mostly a candidate for a source beside it.
			targets := sourceNames[o.resource]
			if len(existing) > 0 && rng.Float64() < 0.8 {
				targets = existing
			}
			o.src.candFor = pick(targets)
			if o.src.candFor == o.name {
				o.src.candidate = keep
			}
			o.src.selector = pick(selectors)
		}
	}
	return o
}

// copies are the materialized copies in the world, sorted.
func (h *harness) copies() []key {
	var out []key
	for _, k := range h.w.keys("") {
		if isCopy(h.w.objs[k].obj) {
			out = append(out, k)
		}
	}
	return out
}
