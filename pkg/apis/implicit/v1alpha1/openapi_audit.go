package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

func (CandidateAudit) OpenAPIModelName() string       { return modelPrefix + "CandidateAudit" }
func (CandidateAuditSpec) OpenAPIModelName() string   { return modelPrefix + "CandidateAuditSpec" }
func (CandidateAuditStatus) OpenAPIModelName() string { return modelPrefix + "CandidateAuditStatus" }
func (CandidateAuditRecord) OpenAPIModelName() string { return modelPrefix + "CandidateAuditRecord" }
func (AuditKeyCount) OpenAPIModelName() string        { return modelPrefix + "AuditKeyCount" }
func (AuditSample) OpenAPIModelName() string          { return modelPrefix + "AuditSample" }

// auditDefinitions are the OpenAPI definitions of CandidateAudit and its
// parts, added to GetOpenAPIDefinitions'.
func auditDefinitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	objectMeta := metav1.ObjectMeta{}.OpenAPIModelName()
	timeModel := metav1.Time{}.OpenAPIModelName()
	d := func(name, desc string, props map[string]spec.Schema, required []string, deps ...string) (string, common.OpenAPIDefinition) {
		return modelPrefix + name, common.OpenAPIDefinition{
			Schema:       spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Type: []string{"object"}, Properties: props, Required: required}},
			Dependencies: deps,
		}
	}
	str := func(desc string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Type: []string{"string"}, Default: ""}}
	}
	count := func(desc string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Type: []string{"integer"}, Format: "int64", Default: 0}}
	}
	to := func(desc, model string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Ref: ref(model)}}
	}
	strs := func(desc string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Type: []string{"array"},
			Items: &spec.SchemaOrArray{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"string"}, Default: ""}}}}}
	}
	list := func(desc, model string) spec.Schema {
		return spec.Schema{SchemaProps: spec.SchemaProps{Description: desc, Type: []string{"array"},
			Items: &spec.SchemaOrArray{Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Default: map[string]any{}, Ref: ref(model)}}}}}
	}
	out := map[string]common.OpenAPIDefinition{}
	add := func(name string, def common.OpenAPIDefinition) { out[name] = def }

	add(d("CandidateAudit", "CandidateAudit asks what the authorization webhook recorded of the candidates of one stable RoleBinding of the namespace: "+
		"the requests the candidate, outside its canaries, would have answered otherwise. Create-only; never stored; one replica's answer.",
		map[string]spec.Schema{
			"apiVersion": str("APIVersion defines the versioned schema of this representation of an object."),
			"kind":       str("Kind is a string value representing the REST resource this object represents."),
			"metadata":   to("Standard object's metadata.", objectMeta),
			"spec":       to("The stable source.", modelPrefix+"CandidateAuditSpec"),
			"status":     to("The answer.", modelPrefix+"CandidateAuditStatus"),
		}, []string{"spec"}, objectMeta, modelPrefix+"CandidateAuditSpec", modelPrefix+"CandidateAuditStatus"))
	add(d("CandidateAuditSpec", "CandidateAuditSpec names the stable source.", map[string]spec.Schema{
		"resource": str("The source's resource, group-qualified: rolebindings.rbac.authorization.k8s.io, the only one audited (the default)."),
		"name":     str("The stable source's name."),
	}, []string{"name"}))
	add(d("CandidateAuditStatus", "CandidateAuditStatus is the answer of one replica.", map[string]spec.Schema{
		"replica":          str("The host name of the replica that answered: each records the requests it answers itself."),
		"replicaStartTime": to("When the replica started recording.", timeModel),
		"scope":            str("Whose requests are counted: this replica's."),
		"candidates":       list("The candidates for the name, audited or not.", modelPrefix+"CandidateAuditRecord"),
	}, []string{"replica", "replicaStartTime", "scope"}, timeModel, modelPrefix+"CandidateAuditRecord"))
	add(d("CandidateAuditRecord", "CandidateAuditRecord is what the replica recorded of one candidate.", map[string]spec.Schema{
		"name":             str("The candidate's name."),
		"uid":              str("The candidate's uid."),
		"problem":          str("Why the candidate is not audited, if it is not."),
		"since":            to("When the replica judged its first request for the candidate.", timeModel),
		"judged":           count("Requests decided a second time with the candidate."),
		"wouldDeny":        count("Requests allowed that the candidate would not allow."),
		"wouldAllow":       count("Requests that got no opinion (denied) that the candidate would allow."),
		"keys":             list("The differences by namespace, user, verb, resource and direction, most first; a bounded number of keys.", modelPrefix+"AuditKeyCount"),
		"othersWouldDeny":  count("Would-deny differences not in keys."),
		"othersWouldAllow": count("Would-allow differences not in keys."),
		"samples":          list("The latest differences, oldest first.", modelPrefix+"AuditSample"),
		"withheld":         str("Why the keys and samples are left out, if they are (they need list on RoleBindings in every namespace); the differences are then all counted as others."),
	}, []string{"name", "uid", "judged", "wouldDeny", "wouldAllow", "othersWouldDeny", "othersWouldAllow"},
		timeModel, modelPrefix+"AuditKeyCount", modelPrefix+"AuditSample"))
	add(d("AuditKeyCount", "AuditKeyCount counts the differences of one key.", map[string]spec.Schema{
		"namespace": str("The request's namespace."),
		"user":      str("The requester."),
		"verb":      str("The request's verb."),
		"resource":  str("The request's resource: resource[.group][/subresource]."),
		"direction": str("WouldDeny or WouldAllow."),
		"count":     count("The differences counted while the key was tracked."),
	}, []string{"namespace", "user", "verb", "resource", "direction", "count"}))
	add(d("AuditSample", "AuditSample is one difference as it was seen.", map[string]spec.Schema{
		"time":      to("When the request was answered.", timeModel),
		"namespace": str("The request's namespace."),
		"user":      str("The requester."),
		"groups":    strs("The requester's groups, summarized."),
		"verb":      str("The request's verb."),
		"resource":  str("The request's resource: resource[.group][/subresource]."),
		"name":      str("The object's name, if the request names one."),
		"direction": str("WouldDeny or WouldAllow."),
		"given":     str("The reason of the answer given; empty for no opinion."),
		"candidate": str("The reason of the answer the candidate would give; empty for no opinion."),
	}, []string{"time", "namespace", "user", "verb", "resource", "direction"}, timeModel))
	return out
}
