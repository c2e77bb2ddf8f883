package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// OpenAPI model names, as openapi-gen would give them (OpenAPIModelName).

func (Hierarchy) OpenAPIModelName() string          { return modelPrefix + "Hierarchy" }
func (HierarchyList) OpenAPIModelName() string      { return modelPrefix + "HierarchyList" }
func (HierarchyStatus) OpenAPIModelName() string    { return modelPrefix + "HierarchyStatus" }
func (HierarchyProblem) OpenAPIModelName() string   { return modelPrefix + "HierarchyProblem" }
func (Explanation) OpenAPIModelName() string        { return modelPrefix + "Explanation" }
func (ExplanationSpec) OpenAPIModelName() string    { return modelPrefix + "ExplanationSpec" }
func (ExplanationStatus) OpenAPIModelName() string  { return modelPrefix + "ExplanationStatus" }
func (ItemReference) OpenAPIModelName() string      { return modelPrefix + "ItemReference" }
func (ScopeExplanation) OpenAPIModelName() string   { return modelPrefix + "ScopeExplanation" }
func (ExclusionEffect) OpenAPIModelName() string    { return modelPrefix + "ExclusionEffect" }
func (Preview) OpenAPIModelName() string            { return modelPrefix + "Preview" }
func (PreviewSpec) OpenAPIModelName() string        { return modelPrefix + "PreviewSpec" }
func (PreviewStatus) OpenAPIModelName() string      { return modelPrefix + "PreviewStatus" }
func (NamespaceChange) OpenAPIModelName() string    { return modelPrefix + "NamespaceChange" }
func (ItemSummary) OpenAPIModelName() string        { return modelPrefix + "ItemSummary" }
func (NamespaceUnchanged) OpenAPIModelName() string { return modelPrefix + "NamespaceUnchanged" }
func (RulesReview) OpenAPIModelName() string        { return modelPrefix + "RulesReview" }
func (RulesReviewSpec) OpenAPIModelName() string    { return modelPrefix + "RulesReviewSpec" }
func (RulesReviewStatus) OpenAPIModelName() string  { return modelPrefix + "RulesReviewStatus" }
func (InheritedRule) OpenAPIModelName() string      { return modelPrefix + "InheritedRule" }
func (RoleReference) OpenAPIModelName() string      { return modelPrefix + "RoleReference" }

// GetOpenAPIDefinitions returns the OpenAPI definitions of these kinds, by
// model name: what openapi-gen would generate, written by hand.
func GetOpenAPIDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	objectMeta := metav1.ObjectMeta{}.OpenAPIModelName()
	listMeta := metav1.ListMeta{}.OpenAPIModelName()
	d := func(name, desc string, props map[string]spec.Schema, required []string, deps ...string) (string, common.OpenAPIDefinition) {
		return modelPrefix + name, common.OpenAPIDefinition{
			Schema:       spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Type: []string{"object"}, Properties: props, Required: required}},
			Dependencies: deps,
		}
	}
	str := func(desc string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Type: []string{"string"}, Default: ""}}
	}
	boolean := func(desc string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Type: []string{"boolean"}, Default: false}}
	}
	integer := func(desc string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Type: []string{"integer"}, Format: "int32", Default: 0}}
	}
	to := func(desc, model string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Ref: ref(model)}}
	}
	strings := func(desc string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Type: []string{"array"},
			Items: &spec.SchemaOrArray{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"string"}, Default: ""}}}}}
	}
	list := func(desc, model string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Type: []string{"array"},
			Items: &spec.SchemaOrArray{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Default: map[string]any{}, Ref: ref(model)}}}}}
	}
	typeMeta := map[string]spec.Schema{
		"apiVersion": str("APIVersion defines the versioned schema of this representation of an object."),
		"kind":       str("Kind is a string value representing the REST resource this object represents."),
	}
	with := func(props map[string]spec.Schema) map[string]spec.Schema {
		for k, v := range typeMeta {
			props[k] = v
		}
		return props
	}
	out := map[string]common.OpenAPIDefinition{}
	add := func(name string, def common.OpenAPIDefinition) { out[name] = def }

	add(d("Hierarchy", "Hierarchy is where one namespace stands in the hierarchy: ancestors, children and problems. Read-only.",
		with(map[string]spec.Schema{
			"metadata": to("Standard object's metadata; the name is the namespace's.", objectMeta),
			"status":   to("The namespace's place in the hierarchy.", modelPrefix+"HierarchyStatus"),
		}), nil, objectMeta, modelPrefix+"HierarchyStatus"))
	add(d("HierarchyList", "HierarchyList is a list of Hierarchies.",
		with(map[string]spec.Schema{
			"metadata": to("Standard list metadata.", listMeta),
			"items":    list("The Hierarchies.", modelPrefix+"Hierarchy"),
		}), []string{"items"}, listMeta, modelPrefix+"Hierarchy"))
	add(d("HierarchyStatus", "HierarchyStatus is a namespace's place in the hierarchy.", map[string]spec.Schema{
		"tenant":    boolean("Tenant is false for namespaces that inherit nothing."),
		"notTenant": str("Why a namespace is not a tenant: Global (a global namespace, whose sources the tenants inherit), Excluded (kept out by the server) or OptedOut (labeled implicit.dev/inherit: false)."),
		"parent":    str("The namespace's implicit.dev/parent label."),
		"ancestors": strings("The namespaces inherited from, nearest first."),
		"children":  strings("The namespaces that inherit from this one directly, sorted."),
		"problems":  list("Problems found walking up from the namespace.", modelPrefix+"HierarchyProblem"),
	}, []string{"tenant"}, modelPrefix+"HierarchyProblem"))
	add(d("HierarchyProblem", "HierarchyProblem is a cycle, a missing or invalid parent, a parent uid mismatch or a lineage past the depth limit.", map[string]spec.Schema{
		"reason":    str("Cycle, MissingParent, InvalidParent, ParentUIDMismatch or DepthExceeded."),
		"namespace": str("The namespace carrying the offending parent label."),
		"parent":    str("The label's value."),
		"cycle":     strings("The namespaces of a cycle, in parent order."),
		"message":   str("The problem in words."),
	}, []string{"reason", "namespace", "message"}))

	add(d("Explanation", "Explanation asks why an item is, or is not, in the namespace's view. Create-only; never stored.",
		with(map[string]spec.Schema{
			"metadata": to("Standard object's metadata.", objectMeta),
			"spec":     to("The view item asked about.", modelPrefix+"ExplanationSpec"),
			"status":   to("The answer.", modelPrefix+"ExplanationStatus"),
		}), []string{"spec"}, objectMeta, modelPrefix+"ExplanationSpec", modelPrefix+"ExplanationStatus"))
	add(d("ExplanationSpec", "ExplanationSpec names the view item asked about.", map[string]spec.Schema{
		"resource": str("The view resource: rolebindings, networkpolicies, ..."),
		"name":     str("The item's name; it need not be in the view."),
	}, []string{"resource", "name"}))
	add(d("ExplanationStatus", "ExplanationStatus is the answer.", map[string]spec.Schema{
		"inView":           boolean("Whether the view holds the item."),
		"tenant":           boolean("False when the namespace inherits nothing."),
		"winner":           to("The source the view item comes from.", modelPrefix+"ItemReference"),
		"overlays":         list("The sources merged onto the winner, top down.", modelPrefix+"ItemReference"),
		"conflicts":        strings("What a lock blocked."),
		"scopes":           list("Every scope of the view, from global down to the namespace.", modelPrefix+"ScopeExplanation"),
		"hierarchyProblem": str("The problem that cut the namespace's lineage short."),
		"summary":          str("Why the item is or is not in the view, in one sentence."),
	}, []string{"inView", "tenant", "summary"}, modelPrefix+"ItemReference", modelPrefix+"ScopeExplanation"))
	add(d("ItemReference", "ItemReference names a source object.", map[string]spec.Schema{
		"namespace": str("The source's namespace."),
		"name":      str("The source's name."),
		"scope":     str("The source's scope from the viewing namespace: global, parent or local."),
		"locked":    boolean("Whether the source is locked."),
	}, []string{"namespace", "name"}))
	add(d("ScopeExplanation", "ScopeExplanation is one scope of the view and what became of its item.", map[string]spec.Schema{
		"scope":      str("global, parent or local."),
		"namespace":  str("The scope's namespace."),
		"item":       to("The scope's item of that name.", modelPrefix+"ItemReference"),
		"outcome":    str("Won, Shadowed, Overlaid, BlockedByLock, Excluded or NoItem."),
		"by":         str("The namespace whose item, lock or exclusion decided the outcome."),
		"exclusions": list("The scope's exclusions that match the name.", modelPrefix+"ExclusionEffect"),
		"message":    str("The outcome in words."),
	}, []string{"scope", "namespace", "outcome"}, modelPrefix+"ItemReference", modelPrefix+"ExclusionEffect"))
	add(d("ExclusionEffect", "ExclusionEffect is what one exclusion did.", map[string]spec.Schema{
		"exclusion": str("The exclusion as declared."),
		"effect":    str("Removed, BlockedByLock or NothingInherited."),
		"item":      to("The inherited item it removed or could not remove.", modelPrefix+"ItemReference"),
	}, []string{"exclusion", "effect"}, modelPrefix+"ItemReference"))

	add(d("Preview", "Preview asks what an edit of a source object would change in the views. Create-only; never stored.",
		with(map[string]spec.Schema{
			"metadata": to("Standard object's metadata.", objectMeta),
			"spec":     to("The edit.", modelPrefix+"PreviewSpec"),
			"status":   to("The answer.", modelPrefix+"PreviewStatus"),
		}), []string{"spec"}, objectMeta, modelPrefix+"PreviewSpec", modelPrefix+"PreviewStatus"))
	add(d("PreviewSpec", "PreviewSpec is the edit: a proposed object or a source to delete.", map[string]spec.Schema{
		"resource": str("The view resource of the source kind."),
		"object": {SchemaProps: spec.SchemaProps{Description: "The proposed source object, as JSON of the source kind.", Type: []string{"object"}},
			VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-preserve-unknown-fields": true, "x-kubernetes-embedded-resource": true}}},
		"delete": str("The name of the source object to delete."),
	}, []string{"resource"}))
	add(d("PreviewStatus", "PreviewStatus is the answer.", map[string]spec.Schema{
		"operation": str("Create, Update or Delete."),
		"name":      str("The source's name."),
		"reached":   integer("How many namespaces' views the edit could change."),
		"changed":   list("The namespaces whose view item would change.", modelPrefix+"NamespaceChange"),
		"unchanged": list("The namespaces a lock, a shadow or an exclusion keeps unchanged.", modelPrefix+"NamespaceUnchanged"),
		"hidden":    integer("How many namespaces are left out of changed and unchanged: the requester may not get this view item there."),
	}, []string{"operation", "name", "reached"}, modelPrefix+"NamespaceChange", modelPrefix+"NamespaceUnchanged"))
	add(d("NamespaceChange", "NamespaceChange is how one namespace's view item would change.", map[string]spec.Schema{
		"namespace": str("The viewing namespace."),
		"type":      str("Added, Modified or Deleted."),
		"before":    to("The view item before.", modelPrefix+"ItemSummary"),
		"after":     to("The view item after.", modelPrefix+"ItemSummary"),
	}, []string{"namespace", "type"}, modelPrefix+"ItemSummary"))
	add(d("ItemSummary", "ItemSummary is where a view item comes from.", map[string]spec.Schema{
		"source":   to("The winning source.", modelPrefix+"ItemReference"),
		"overlays": strings("The sources merged on top, namespace/name."),
		"conflict": str("What a lock blocked."),
		"content": {SchemaProps: spec.SchemaProps{Description: "What a reader of the view item sees change: its labels, annotations and every field but metadata.", Type: []string{"object"}},
			VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-preserve-unknown-fields": true}}},
	}, []string{"source"}, modelPrefix+"ItemReference"))
	add(d("NamespaceUnchanged", "NamespaceUnchanged is a namespace the edit reaches whose view stays as it is.", map[string]spec.Schema{
		"namespace": str("The viewing namespace."),
		"reason":    str("Locked, Shadowed or Excluded."),
		"by":        str("The namespace of the lock, the shadowing item or the exclusion."),
	}, []string{"namespace", "reason", "by"}))

	add(d("RulesReview", "RulesReview asks what a user may do in the namespace through inherited RoleBindings. Create-only; never stored.",
		with(map[string]spec.Schema{
			"metadata": to("Standard object's metadata.", objectMeta),
			"spec":     to("Whom to review: empty for the requester.", modelPrefix+"RulesReviewSpec"),
			"status":   to("The answer.", modelPrefix+"RulesReviewStatus"),
		}), []string{"spec"}, objectMeta, modelPrefix+"RulesReviewSpec", modelPrefix+"RulesReviewStatus"))
	add(d("RulesReviewSpec", "RulesReviewSpec names whom to review: empty for the requester.", map[string]spec.Schema{
		"user":   str("The user to review instead of the requester; needs impersonate on the user and each group."),
		"groups": strings("The user's groups; they need user."),
	}, nil))
	add(d("RulesReviewStatus", "RulesReviewStatus is the answer.", map[string]spec.Schema{
		"user":   str("The user the rules were computed for."),
		"groups": strings("The user's groups."),
		"rules":  list("The rules inherited bindings grant in the namespace, each with its binding.", modelPrefix+"InheritedRule"),
	}, []string{"user"}, modelPrefix+"InheritedRule"))
	add(d("InheritedRule", "InheritedRule is one rule an inherited RoleBinding grants.", map[string]spec.Schema{
		"verbs":         strings("The verbs."),
		"apiGroups":     strings("The API groups."),
		"resources":     strings("The resources."),
		"resourceNames": strings("The names the rule is restricted to."),
		"binding":       to("The inherited RoleBinding's source, with its scope: parent or global.", modelPrefix+"ItemReference"),
		"candidate":     str("The candidate the view shows in the binding's place."),
		"role":          to("The role the binding resolves to.", modelPrefix+"RoleReference"),
	}, []string{"verbs", "binding", "role"}, modelPrefix+"ItemReference", modelPrefix+"RoleReference"))
	add(d("RoleReference", "RoleReference names a resolved role: a ClusterRole, or a Role in the binding's own source namespace.", map[string]spec.Schema{
		"kind":      str("ClusterRole or Role."),
		"namespace": str("The Role's namespace; empty for a ClusterRole."),
		"name":      str("The role's name."),
	}, []string{"kind", "name"}))
	return out
}
