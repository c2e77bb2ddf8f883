package offline

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestAPIVersion is the apiVersion of ImplicitTest documents.
const TestAPIVersion = "test.implicit.dev/v1alpha1"

// Test is an ImplicitTest document: expectations of the world its
// directory's manifests make.
//
//	apiVersion: test.implicit.dev/v1alpha1
//	kind: ImplicitTest
//	metadata: {name: team-a}
//	requester: {user: alice, groups: [team-a-admins]}  # edits' default; else a system:masters member
//	views:
//	- namespace: team-a
//	  resource: rolebindings
//	  contains: [{name: org-viewers, scope: parent, sourceNamespace: org}]
//	  absent: [ci-bot]
//	  only: false          # true: contains is the whole view
//	edits:
//	- name: a shadow of the locked binding is refused
//	  object: {apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, ...}
//	  operation: CREATE    # default: UPDATE if the files hold it, else CREATE
//	  refused: true
//	  reason: locked       # a substring of the refusal
//	access:
//	- {requester: {user: bob}, verb: get, resource: pods, namespace: team-a, allowed: true}
type Test struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Requester *Requester   `json:"requester,omitempty"`
	Views     []ViewTest   `json:"views,omitempty"`
	Edits     []EditTest   `json:"edits,omitempty"`
	Access    []AccessTest `json:"access,omitempty"`
}

// ViewTest states what a namespace's view of a resource holds.
type ViewTest struct {
	Namespace string         `json:"namespace"`
	Resource  string         `json:"resource"`
	Contains  []ExpectedItem `json:"contains,omitempty"`
	Absent    []string       `json:"absent,omitempty"`
	// Only: Contains is the whole view.
	Only bool `json:"only,omitempty"`
}

// ExpectedItem is an item a view holds; Scope and SourceNamespace are
// checked when set.
type ExpectedItem struct {
	Name            string `json:"name"`
	Scope           string `json:"scope,omitempty"`
	SourceNamespace string `json:"sourceNamespace,omitempty"`
}

// EditTest states the guards' answer to an edit.
type EditTest struct {
	Name      string          `json:"name,omitempty"`
	Operation Operation       `json:"operation,omitempty"`
	Requester *Requester      `json:"requester,omitempty"`
	Object    json.RawMessage `json:"object"`
	Refused   bool            `json:"refused"`
	Reason    string          `json:"reason,omitempty"`
	Warning   string          `json:"warning,omitempty"`
}

// AccessTest states whether a requester may do something in a namespace.
type AccessTest struct {
	Requester   Requester `json:"requester"`
	Verb        string    `json:"verb"`
	Group       string    `json:"group,omitempty"`
	Resource    string    `json:"resource"`
	Subresource string    `json:"subresource,omitempty"`
	Name        string    `json:"name,omitempty"`
	Namespace   string    `json:"namespace"`
	Allowed     bool      `json:"allowed"`
}

// Result is one checked expectation.
type Result struct {
	Test  string `json:"test"`
	Check string `json:"check"`
	// From is the test document's file and position.
	From string `json:"from"`
	Pass bool   `json:"pass"`
	// Detail says what differed (on a failure) or what was found.
	Detail string `json:"detail,omitempty"`
}

// ParseTest reads an ImplicitTest document strictly: an unknown field is
// an error, as a typo would otherwise pass silently.
func ParseTest(obj Object) (Test, error) {
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		return Test{}, err
	}
	var t Test
	if err := yaml.UnmarshalStrict(raw, &t); err != nil {
		return Test{}, fmt.Errorf("%s: %w", obj.From, err)
	}
	if t.APIVersion != TestAPIVersion {
		return Test{}, fmt.Errorf("%s: apiVersion %q, want %s", obj.From, t.APIVersion, TestAPIVersion)
	}
	if t.Metadata.Name == "" {
		return Test{}, fmt.Errorf("%s: metadata.name is required", obj.From)
	}
	return t, nil
}

// RunTests checks every ImplicitTest of the world. An error is bad input
// (a malformed test, a resource not served, an edit that can't be made):
// not a failure, which is a Result with Pass false.
func (w *World) RunTests(ctx context.Context) ([]Result, error) {
	var out []Result
	for _, obj := range w.Tests {
		t, err := ParseTest(obj)
		if err != nil {
			return nil, err
		}
		rs, err := w.runTest(ctx, t, obj.From)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

func (w *World) runTest(ctx context.Context, t Test, from string) ([]Result, error) {
	var out []Result
	add := func(check string, pass bool, detail string) {
		out = append(out, Result{Test: t.Metadata.Name, Check: check, From: from, Pass: pass, Detail: detail})
	}
	for i, v := range t.Views {
		if v.Namespace == "" || v.Resource == "" {
			return nil, fmt.Errorf("%s: views[%d]: namespace and resource are required", from, i)
		}
		items, err := w.Members(v.Namespace, v.Resource)
		if err != nil {
			return nil, fmt.Errorf("%s: views[%d]: %w", from, i, err)
		}
		byName := map[string]Item{}
		for _, it := range items {
			byName[it.Name] = it
		}
		check := fmt.Sprintf("view %s/%s", v.Namespace, v.Resource)
		for _, want := range v.Contains {
			got, ok := byName[want.Name]
			switch {
			case !ok:
				add(check+" contains "+want.Name, false, "not in the view; it holds "+describeItems(items))
			case want.Scope != "" && string(got.Scope) != want.Scope, want.SourceNamespace != "" && got.SourceNamespace != want.SourceNamespace:
				add(check+" contains "+want.Name, false, fmt.Sprintf("want scope %s from %s, got scope %s from %s%s",
					orAny(want.Scope), orAny(want.SourceNamespace), got.Scope, got.SourceNamespace, conflictNote(got)))
			default:
				add(check+" contains "+want.Name, true, fmt.Sprintf("%s from %s", got.Scope, got.SourceNamespace))
			}
		}
		for _, name := range v.Absent {
			got, ok := byName[name]
			if ok {
				add(check+" lacks "+name, false, fmt.Sprintf("in the view: %s from %s%s", got.Scope, got.SourceNamespace, conflictNote(got)))
			} else {
				add(check+" lacks "+name, true, "")
			}
		}
		if v.Only {
			var extra []string
			for _, it := range items {
				if !slices.ContainsFunc(v.Contains, func(e ExpectedItem) bool { return e.Name == it.Name }) {
					extra = append(extra, it.Name)
				}
			}
			add(check+" holds only the items listed", len(extra) == 0, strings.Join(prefixed("also holds ", extra), ""))
		}
	}
	for i, e := range t.Edits {
		if len(e.Object) == 0 {
			return nil, fmt.Errorf("%s: edits[%d]: object is required", from, i)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(e.Object); err != nil {
			return nil, fmt.Errorf("%s: edits[%d]: object: %w", from, i, err)
		}
		r := Requester{}
		switch {
		case e.Requester != nil:
			r = *e.Requester
		case t.Requester != nil:
			r = *t.Requester
		}
		v, err := w.Judge(ctx, Edit{Operation: e.Operation, Object: u, Requester: r})
		if err != nil {
			return nil, fmt.Errorf("%s: edits[%d]: %w", from, i, err)
		}
		name := e.Name
		if name == "" {
			name = fmt.Sprintf("%s %s", orDefault(string(e.Operation), "apply"), KeyOf(u))
		}
		want := "allowed"
		if e.Refused {
			want = "refused"
		}
		check := "edit " + name + " is " + want
		got := describeVerdict(v)
		switch {
		case e.Refused == v.Allowed:
			add(check, false, "got "+got)
		case e.Refused && e.Reason != "" && !strings.Contains(v.Reason, e.Reason):
			add(check, false, fmt.Sprintf("want a reason with %q, got %s", e.Reason, got))
		case e.Warning != "" && !slices.ContainsFunc(v.Warnings, func(s string) bool { return strings.Contains(s, e.Warning) }):
			add(check, false, fmt.Sprintf("want a warning with %q, got %s", e.Warning, got))
		default:
			add(check, true, got)
		}
	}
	for i, a := range t.Access {
		if a.Requester.User == "" || a.Verb == "" || a.Resource == "" || a.Namespace == "" {
			return nil, fmt.Errorf("%s: access[%d]: requester.user, verb, resource and namespace are required", from, i)
		}
		got, err := w.May(a.Requester, authorizationv1.ResourceAttributes{
			Namespace: a.Namespace, Verb: a.Verb, Group: a.Group, Resource: a.Resource, Subresource: a.Subresource, Name: a.Name,
		})
		if err != nil {
			return nil, fmt.Errorf("%s: access[%d]: %w", from, i, err)
		}
		verb := "may"
		if !a.Allowed {
			verb = "may not"
		}
		res := a.Resource
		if a.Subresource != "" {
			res += "/" + a.Subresource
		}
		if a.Group != "" {
			res += "." + a.Group
		}
		check := fmt.Sprintf("%s %s %s %s in %s", a.Requester.User, verb, a.Verb, res, a.Namespace)
		detail := "denied (no opinion)"
		if got.Allowed {
			detail = "allowed by " + got.Reason
		}
		add(check, got.Allowed == a.Allowed, detail)
	}
	return out, nil
}

func describeItems(items []Item) string {
	if len(items) == 0 {
		return "nothing"
	}
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = fmt.Sprintf("%s (%s from %s)", it.Name, it.Scope, it.SourceNamespace)
	}
	return strings.Join(parts, ", ")
}

func describeVerdict(v Verdict) string {
	if v.Allowed {
		if len(v.Warnings) > 0 {
			return "allowed, warned: " + strings.Join(v.Warnings, "; ")
		}
		return "allowed"
	}
	return "refused by " + v.Guard + ": " + v.Reason
}

func conflictNote(it Item) string {
	if it.Conflict == "" {
		return ""
	}
	return " (" + it.Conflict + ")"
}

func orAny(s string) string { return orDefault(s, "any") }

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func prefixed(prefix string, items []string) []string {
	if len(items) == 0 {
		return nil
	}
	return []string{prefix + strings.Join(items, ", ")}
}
