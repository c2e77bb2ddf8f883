package webhookconfig

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// Match condition names: the fixed ones, and the one ConditionSync keeps
// equal to the sources.
const (
	lockTouchedCondition      = "lock-touched"
	hierarchyChangedCondition = "hierarchy-changed"
	parentTouchedCondition    = "parent-touched"
	copyTouchedCondition      = "materialized-touched"
	candidateTouchedCondition = "candidate-touched"
	stageChangedCondition     = "stage-changed"
	copyWrittenCondition      = "materialized-written"
	syncedCondition           = "implicit-sources"
)

// lockTouched is true when the old or the new object carries the lock, and
// for every scale subresource request: a Scale carries none of its source's
// annotations, so the guard looks the lock up.
const lockTouched = `(has(request.subResource) && request.subResource == '` + SubresourceScale + `') || ` +
	`(oldObject != null && has(oldObject.metadata.annotations) && '` + v1alpha1.AnnotationLocked + `' in oldObject.metadata.annotations && oldObject.metadata.annotations['` + v1alpha1.AnnotationLocked + `'] == 'true') || ` +
	`(object != null && has(object.metadata.annotations) && '` + v1alpha1.AnnotationLocked + `' in object.metadata.annotations && object.metadata.annotations['` + v1alpha1.AnnotationLocked + `'] == 'true')`

// copyTouchedExpr is true when the old or the new object carries the
// materialized label, whatever its value: copies, forged labels and
// removed ones.
const copyTouchedExpr = `(oldObject != null && has(oldObject.metadata.labels) && '` + v1alpha1.LabelMaterialized + `' in oldObject.metadata.labels) || ` +
	`(object != null && has(object.metadata.labels) && '` + v1alpha1.LabelMaterialized + `' in object.metadata.labels)`

// copyWritten is true when the old object is a materialized copy (the
// label "true") and the new object exists: the writes OwnCopy may make
// their writer's own.
const copyWritten = `oldObject != null && object != null && has(oldObject.metadata.labels) && '` + v1alpha1.LabelMaterialized + `' in oldObject.metadata.labels && ` +
	`oldObject.metadata.labels['` + v1alpha1.LabelMaterialized + `'] == 'true'`

// candidateTouchedExpr is true when the old or the new object carries
// any candidate annotation, whatever its value: candidates, malformed
// ones, and objects that stop being one.
var candidateTouchedExpr = func() string {
	has := func(o string) string {
		return fmt.Sprintf("(%[1]s != null && has(%[1]s.metadata.annotations) && (%[2]s in %[1]s.metadata.annotations || %[3]s in %[1]s.metadata.annotations || %[4]s in %[1]s.metadata.annotations))",
			o, quote(v1alpha1.AnnotationCandidateFor), quote(v1alpha1.AnnotationCanarySelector), quote(v1alpha1.AnnotationCanaryClusters))
	}
	return has("oldObject") + " || " + has("object")
}()

// stageChanged is true when a namespace's implicit.dev/stage label is set
// (on creation too), changed or removed.
var stageChanged = metadataChanged("labels", v1alpha1.LabelStage)

// hierarchyChanged is true when a namespace's parent label, inherit label,
// parent-uid annotation or exclude annotation is set, changed or removed
// (the parents guard judges the exclusions too).
var hierarchyChanged = strings.Join([]string{
	metadataChanged("labels", v1alpha1.LabelParent),
	metadataChanged("labels", v1alpha1.LabelInherit),
	metadataChanged("annotations", v1alpha1.AnnotationParentUID),
	metadataChanged("annotations", v1alpha1.AnnotationExclude),
	metadataChanged("annotations", v1alpha1.AnnotationExceptions),
	metadataChanged("annotations", v1alpha1.AnnotationExceptionApprovals),
	metadataChanged("annotations", v1alpha1.AnnotationExceptionsExpired),
}, " || ")

// parentTouched is true when a namespace's parent label or parent-uid
// annotation is set, changed or removed.
var parentTouched = metadataChanged("labels", v1alpha1.LabelParent) + " || " + metadataChanged("annotations", v1alpha1.AnnotationParentUID)

// metadataChanged is a CEL expression, true when key of the metadata map
// field (labels, annotations) is added, removed or changed.
func metadataChanged(field, key string) string {
	in := func(o string) string {
		return fmt.Sprintf("(%[1]s != null && has(%[1]s.metadata.%[2]s) && %[3]s in %[1]s.metadata.%[2]s)", o, field, quote(key))
	}
	return fmt.Sprintf("(%[1]s != %[2]s || (%[1]s && %[2]s && oldObject.metadata.%[3]s[%[4]s] != object.metadata.%[3]s[%[4]s]))",
		in("oldObject"), in("object"), field, quote(key))
}

// MatchInputs is what the admission webhook's match conditions are made
// of, so that only requests the guards may act on are sent to them.
type MatchInputs struct {
	// LockedNames are the names of locked source objects, per resource, sorted.
	LockedNames map[string][]string
	// Inherited are the namespaces whose sources other namespaces inherit:
	// the global namespaces and every namespace named as a parent, sorted.
	Inherited []string
	// NeverInherited are the namespaces no other namespace inherits from,
	// whatever their labels: the excluded ones that are no kind's global
	// namespace (the server's own among them), sorted.
	NeverInherited []string
	// Materialized are the resources delivered as real objects, sorted:
	// every creation of one in a tenant namespace is judged (ConditionSync
	// sets them).
	Materialized []string
}

// String prints g compactly, for logs.
func (g MatchInputs) String() string {
	var b strings.Builder
	for _, r := range slices.Sorted(maps.Keys(g.LockedNames)) {
		fmt.Fprintf(&b, "%s locked %d; ", r, len(g.LockedNames[r]))
	}
	fmt.Fprintf(&b, "%d inherited namespaces", len(g.Inherited))
	return b.String()
}

// shadowCondition matches a CREATE whose name is the name of a locked source
// of its resource (it may shadow it), outside the global namespace.
func shadowCondition(g MatchInputs, globalNamespace string) string {
	var parts []string
	if len(g.Materialized) > 0 {
		// Every creation of a materialized kind: a lock of its name
		// decided a moment later (on any replica) must know the object is
		// there, before the mirror shows it.
		parts = append(parts, fmt.Sprintf("request.resource.resource in %s", list(g.Materialized)))
	}
	for _, r := range slices.Sorted(maps.Keys(g.LockedNames)) {
		names := g.LockedNames[r]
		if len(names) == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("(request.resource.resource == %s && object.metadata.name in %s)", quote(r), list(names)))
	}
	if len(parts) == 0 {
		return "false"
	}
	return fmt.Sprintf("request.namespace != %s && (%s)", quote(globalNamespace), strings.Join(parts, " || "))
}

// deletionCondition is the match condition of the namespace deletions
// guard: every namespace but those nobody can inherit from. Not only the
// namespaces others inherit from now: one that became a parent a moment ago
// (before this condition, synced from the mirror about once a second, named
// it) must be judged too.
func deletionCondition(g MatchInputs) string {
	if len(g.NeverInherited) == 0 {
		return "true"
	}
	return "!(request.name in " + list(g.NeverInherited) + ")"
}

// fanoutCondition matches requests in the namespaces others inherit from.
func fanoutCondition(g MatchInputs) string {
	if len(g.Inherited) == 0 {
		return "false"
	}
	return "request.namespace in " + list(g.Inherited)
}

// quote writes s as a CEL string literal: Go's double-quoted escapes
// (\n, \", \\, \xNN, \uNNNN) are CEL's too, so any name, control
// characters included, stays one well-formed literal.
func quote(s string) string { return strconv.Quote(s) }

func list(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
