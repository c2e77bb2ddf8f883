package admission

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// exclusions judges a namespace's implicit.dev/exclude annotation, so that
// no entry is a silent no-op. An entry the request adds that is malformed or
// names no view the server serves (a singular, a short name, a group) is
// refused, with the name it likely meant; one that was there already is
// only warned of (refusing it would block every later change of the
// namespace's hierarchy). An added entry naming an item the namespace
// inherits locked is warned of: a lock keeps the item in the view (the
// exclusion is reported as blocked).
func (g *Guards) exclusions(old, obj *unstructured.Unstructured) decision {
	next, ok := obj.GetAnnotations()[v1alpha1.AnnotationExclude]
	if !ok {
		return allow()
	}
	before := map[string]bool{}
	if old != nil {
		prev, had := old.GetAnnotations()[v1alpha1.AnnotationExclude]
		if had && prev == next {
			return allow() // unchanged: judged when it was written
		}
		for _, e := range exclusionEntries(prev) {
			before[e] = true
		}
	}
	views := g.views()
	var refused, warnings []string
	lookups := 0
	for _, entry := range exclusionEntries(next) {
		existing := before[entry]
		problem := ""
		ex, errs := merge.ParseExclusions(entry)
		switch {
		case len(errs) > 0:
			problem = errs[0].Error()
		case !slices.Contains(views, ex[0].Resource):
			problem = fmt.Sprintf("exclusion %q: implicit.dev serves no view %q%s", entry, ex[0].Resource, meant(ex[0], views))
		}
		switch {
		case problem != "" && existing:
			warnings = append(warnings, fmt.Sprintf("implicit.dev: namespace %s: %s, so it excludes nothing", obj.GetName(), problem))
		case problem != "":
			refused = append(refused, problem)
		case !existing && ex[0].Name != "*" && lookups < maxLockedExclusionChecks:
			// Bounded: a list of thousands of names must not make one
			// review read the mirror thousands of times.
			lookups++
			if w := g.lockedExclusion(obj.GetName(), ex[0]); w != "" {
				warnings = append(warnings, w)
			}
		}
	}
	if len(refused) > 0 {
		return deny("namespace %s: %s: %s lists <resource>/<name> or <resource>/*, the resource a view's plural name (served: %s)",
			obj.GetName(), strings.Join(firstOf(refused), "; "), v1alpha1.AnnotationExclude, strings.Join(views, ", "))
	}
	return allow(firstOf(warnings)...)
}

// maxLockedExclusionChecks bounds the exclusions added by one request that
// are checked for a locked item; maxListed the problems named in one
// answer (the others are counted).
const (
	maxLockedExclusionChecks = 64
	maxListed                = 10
)

// firstOf keeps the first maxListed of items, and says how many more.
func firstOf(items []string) []string {
	if len(items) <= maxListed {
		return items
	}
	return append(slices.Clone(items[:maxListed]), fmt.Sprintf("and %d more", len(items)-maxListed))
}

// exclusionEntries are the entries of an implicit.dev/exclude value, as
// written (trimmed), for comparing two values.
func exclusionEntries(value string) []string {
	var out []string
	for _, e := range strings.Split(value, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// views are the view resources served now, sorted.
func (g *Guards) views() []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]string, 0, len(g.served))
	for _, r := range g.served {
		out = append(out, r)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// shortNames are the names users type for the default views' sources.
var shortNames = map[string]string{"rb": "rolebindings", "np": "networkpolicies", "netpol": "networkpolicies"}

// meant names the view an unknown exclusion resource likely meant: its
// plural, or the view of a short name.
func meant(ex merge.Exclusion, views []string) string {
	r := ex.Resource
	guesses := []string{shortNames[r], r + "s", r + "es", strings.TrimSuffix(r, "y") + "ies"}
	for _, guess := range guesses {
		if guess != "" && slices.Contains(views, guess) {
			return fmt.Sprintf(" (a view is named by its plural resource name: %s/%s)", guess, ex.Name)
		}
	}
	return ""
}

// lockedExclusion warns when namespace inherits the item ex names locked:
// the exclusion will not remove it.
func (g *Guards) lockedExclusion(namespace string, ex merge.Exclusion) string {
	inh, found, err := g.mirror.Inheritance.Inherited(ex.Resource, namespace, ex.Name)
	if err != nil || !found || !inh.Locked() {
		return ""
	}
	return fmt.Sprintf("implicit.dev: namespace %s: the exclusion %s does nothing while the %s source %s/%s is locked: a locked item can't be excluded; its owners can unlock it",
		namespace, ex, inh.Scope, inh.Item.Namespace, inh.Item.Name)
}
