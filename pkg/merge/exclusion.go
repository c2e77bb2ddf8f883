package merge

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
)

// Exclusion removes inherited items of one resource from a namespace's view
// and its descendants' views. Name "*" removes every inherited item of the resource.
type Exclusion struct {
	Resource string
	Name     string
}

// Matches reports whether the exclusion removes the item name of resource.
func (e Exclusion) Matches(resource, name string) bool {
	return e.Resource == resource && (e.Name == "*" || e.Name == name)
}

func (e Exclusion) String() string { return e.Resource + "/" + e.Name }

// ParseExclusions parses the implicit.dev/exclude annotation:
// a comma-separated list of <resource>/<name> or <resource>/*.
// Blanks around entries are ignored. Malformed entries are skipped and
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
		switch {
		case !ok || resource == "" || name == "":
			errs = append(errs, fmt.Errorf("exclusion %q: want <resource>/<name> or <resource>/*", entry))
			continue
		case strings.Contains(name, "/"):
			errs = append(errs, fmt.Errorf("exclusion %q: too many slashes", entry))
			continue
		case name != "*":
			if msgs := path.IsValidPathSegmentName(name); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("exclusion %q: %s", entry, strings.Join(msgs, ", ")))
				continue
			}
		}
		out = append(out, Exclusion{Resource: strings.ToLower(resource), Name: name})
	}
	return out, errs
}

// ExclusionsOf returns the well-formed exclusions declared on ns.
func ExclusionsOf(ns *Namespace) []Exclusion {
	if ns == nil {
		return nil
	}
	v, ok := ns.Annotations[AnnotationExclude]
	if !ok {
		return nil
	}
	ex, _ := ParseExclusions(v)
	return ex
}
