package authz

import (
	"strconv"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Attributes is a namespaced resource request, as a SubjectAccessReview
// carries it.
type Attributes struct {
	User        string
	Groups      []string
	Namespace   string
	Verb        string
	APIGroup    string
	Resource    string
	Subresource string
	Name        string
}

// ruleAllows reports whether rule grants the request, as kube-apiserver's
// RBAC RuleAllows does for resource requests: the verb, the API group and the
// resource (with its subresource, "*" and "*/<subresource>" included) must
// match, and a rule with resourceNames allows only a request for one of
// those names (never one without a name, such as list or create).
func ruleAllows(a Attributes, rule rbacv1.PolicyRule) bool {
	return verbMatches(rule, a.Verb) &&
		apiGroupMatches(rule, a.APIGroup) &&
		resourceMatches(rule, a.Resource, a.Subresource) &&
		resourceNameMatches(rule, a.Name)
}

func verbMatches(rule rbacv1.PolicyRule, verb string) bool {
	for _, v := range rule.Verbs {
		if v == rbacv1.VerbAll || v == verb {
			return true
		}
	}
	return false
}

func apiGroupMatches(rule rbacv1.PolicyRule, group string) bool {
	for _, g := range rule.APIGroups {
		if g == rbacv1.APIGroupAll || g == group {
			return true
		}
	}
	return false
}

func resourceMatches(rule rbacv1.PolicyRule, resource, subresource string) bool {
	combined := resource
	if subresource != "" {
		combined = resource + "/" + subresource
	}
	for _, r := range rule.Resources {
		switch {
		case r == rbacv1.ResourceAll, r == combined:
			return true
		case subresource != "" && r == "*/"+subresource:
			return true
		}
	}
	return false
}

func resourceNameMatches(rule rbacv1.PolicyRule, name string) bool {
	if len(rule.ResourceNames) == 0 {
		return true
	}
	// Stricter than kube-apiserver for resourceNames [""]: never unnamed.
	if name == "" {
		return false
	}
	for _, n := range rule.ResourceNames {
		if n == name {
			return true
		}
	}
	return false
}

// serviceAccountPrefix is how kube-apiserver names service account users.
const serviceAccountPrefix = "system:serviceaccount:"

// subjectMatches reports whether subject names the requester, as RBAC's
// appliesToUser does. A ServiceAccount subject without a namespace means
// one in namespace, the namespace the binding applies to: a binding
// inherited into a namespace reads as a copy of it there would.
func subjectMatches(a Attributes, subject rbacv1.Subject, namespace string) bool {
	switch subject.Kind {
	case rbacv1.UserKind:
		return a.User == subject.Name
	case rbacv1.GroupKind:
		for _, g := range a.Groups {
			if g == subject.Name {
				return true
			}
		}
		return false
	case rbacv1.ServiceAccountKind:
		ns := subject.Namespace
		if ns == "" {
			ns = namespace
		}
		if ns == "" || subject.Name == "" {
			return false
		}
		return a.User == serviceAccountPrefix+ns+":"+subject.Name
	default:
		return false
	}
}

// key is the request's cache key, without the views' generation. Every
// field is length-prefixed, groups last: user and group names are whatever
// the authenticator says, so no separator can be assumed absent from them
// (with groups joined by one, ["a\x01b"] and ["a", "b"] shared a key).
func (a Attributes) key() string {
	fields := a.fields()
	var b strings.Builder
	b.Grow(a.keyLen())
	for _, s := range fields {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	for _, g := range a.Groups {
		b.WriteString(strconv.Itoa(len(g)))
		b.WriteByte(':')
		b.WriteString(g)
	}
	return b.String()
}

func (a Attributes) fields() [7]string {
	return [...]string{a.User, a.Namespace, a.Verb, a.APIGroup, a.Resource, a.Subresource, a.Name}
}

// keyLen is about the length of key(), without building it: the fields, the
// groups and room for their length prefixes.
func (a Attributes) keyLen() int {
	fields := a.fields()
	n := 4 * (len(fields) + len(a.Groups))
	for _, s := range fields {
		n += len(s)
	}
	for _, g := range a.Groups {
		n += len(g)
	}
	return n
}
