package merge

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// Exclusion removes inherited items of one resource from a namespace's view
// and its descendants' views. Name "*" removes every inherited item of the resource.
type Exclusion struct {
	Resource string
	Name     string
	// Exception names the exception that declares it; "" for the
	// implicit.dev/exclude annotation.
	Exception string
	// Ends is the exception's end (zero: none). Only the server's expiry
	// mark ends it (ExceptionsOf): Ends is for the sources that require an
	// end, never compared with a clock here.
	Ends time.Time
	// Approved are the source namespaces (SourceKey) the exception's
	// approval covers; nil when it has none.
	Approved []string
}

// Matches reports whether the exclusion removes the item name of resource.
func (e Exclusion) Matches(resource, name string) bool {
	return e.Resource == resource && (e.Name == "*" || e.Name == name)
}

func (e Exclusion) String() string { return e.Resource + "/" + e.Name }

// Declared says where the exclusion is declared, for messages: the entry,
// and its exception's name if it is one's.
func (e Exclusion) Declared() string {
	if e.Exception != "" {
		return e.String() + " (exception " + e.Exception + ")"
	}
	return e.String()
}

// ParseExclusions parses the implicit.dev/exclude annotation:
// a comma-separated list of <resource>/<name> or <resource>/*.
// Blanks around entries and around the slash are ignored. Malformed entries are skipped and
// returned as errors, so one typo does not void the others.
func ParseExclusions(value string) ([]Exclusion, []error) {
	var out []Exclusion
	var errs []error
	for _, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		resource, name, ok := strings.Cut(entry, "/")
		resource, name = strings.ToLower(strings.TrimSpace(resource)), strings.TrimSpace(name)
		switch {
		case !ok || resource == "" || name == "":
			errs = append(errs, fmt.Errorf("exclusion %q: want <resource>/<name> or <resource>/*", entry))
			continue
		case strings.Contains(name, "/"):
			errs = append(errs, fmt.Errorf("exclusion %q: too many slashes", entry))
			continue
		}
		// The resource is a view's plural name, without a group: views are
		// named by resource, so "rolebindings", never "rolebindings.rbac...".
		if msgs := validation.IsDNS1123Label(resource); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("exclusion %q: resource %q must be a plural resource name without a group: %s", entry, resource, strings.Join(msgs, ", ")))
			continue
		}
		if name != "*" {
			msgs := path.IsValidPathSegmentName(name)
			if strings.ContainsFunc(name, unicode.IsSpace) {
				msgs = append(msgs, "must not contain spaces")
			}
			if len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("exclusion %q: %s", entry, strings.Join(msgs, ", ")))
				continue
			}
		}
		out = append(out, Exclusion{Resource: resource, Name: name})
	}
	return out, errs
}

// ExclusionsOf returns the well-formed exclusions declared on ns: its
// implicit.dev/exclude annotation's, then those of its exceptions in effect
// (ExceptionsOf: not marked expired).
func ExclusionsOf(ns *Namespace) []Exclusion {
	if ns == nil {
		return nil
	}
	var ex []Exclusion
	if v, ok := ns.Annotations[v1alpha1.AnnotationExclude]; ok {
		ex, _ = ParseExclusions(v)
	}
	return append(ex, exceptionExclusions(ns)...)
}
