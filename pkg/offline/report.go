package offline

import (
	"fmt"
	"io"
	"strings"
)

// WriteText prints a report for a terminal.
func WriteText(w io.Writer, r Report) error {
	var b strings.Builder
	for _, e := range r.Edits {
		fmt.Fprintf(&b, "%s %s: %s%s\n", e.Operation, e.Object, describeVerdict(e.Verdict), reach(e))
	}
	if len(r.Edits) > 0 {
		b.WriteString("\n")
	}
	for _, nd := range r.Namespaces {
		fmt.Fprintf(&b, "namespace %s\n", nd.Namespace)
		if nd.ProblemBefore != "" || nd.ProblemAfter != "" {
			fmt.Fprintf(&b, "  hierarchy: %s -> %s\n", orDefault(nd.ProblemBefore, "no problem"), orDefault(nd.ProblemAfter, "no problem"))
		}
		for _, v := range nd.Views {
			for _, it := range v.Added {
				fmt.Fprintf(&b, "  + %s/%s (%s)\n", v.Resource, it.Name, provenance(it))
			}
			for _, it := range v.Removed {
				fmt.Fprintf(&b, "  - %s/%s (%s)\n", v.Resource, it.Name, provenance(it))
			}
			for _, c := range v.Changed {
				fmt.Fprintf(&b, "  ~ %s/%s (%s)%s\n", v.Resource, c.After.Name, provenanceChange(c), fieldList(c.Fields))
			}
		}
	}
	if len(r.Edits) == 0 && len(r.Namespaces) == 0 {
		b.WriteString("No changes.\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMarkdown prints a report as a pull-request comment: the refusals
// first, then a table of the views that change, namespace by namespace.
// Field values appear only when the report kept them (--show-data).
func WriteMarkdown(w io.Writer, r Report, from, to string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "### implicit.dev: `%s` → `%s`\n\n", md(from), md(to))
	refused := 0
	for _, e := range r.Edits {
		if !e.Verdict.Allowed {
			refused++
		}
	}
	changes := 0
	for _, nd := range r.Namespaces {
		for _, v := range nd.Views {
			changes += len(v.Added) + len(v.Removed) + len(v.Changed)
		}
	}
	fmt.Fprintf(&b, "%d edits, **%d refused by the guards**; %d view items change in %d namespaces.\n\n", len(r.Edits), refused, changes, len(r.Namespaces))
	if !r.Now.IsZero() {
		fmt.Fprintf(&b, "Exceptions' ends as of %s.\n\n", r.Now.UTC().Format("2006-01-02T15:04:05Z"))
	}
	if refused > 0 {
		b.WriteString("#### Refused\n\n| edit | guard | reason |\n|---|---|---|\n")
		for _, e := range r.Edits {
			if !e.Verdict.Allowed {
				fmt.Fprintf(&b, "| %s `%s` | `%s` | %s |\n", e.Operation, md(e.Object), e.Verdict.Guard, md(e.Verdict.Reason))
			}
		}
		b.WriteString("\n")
	}
	if len(r.Edits) > 0 {
		b.WriteString("<details><summary>Edits</summary>\n\n| edit | reach | answer |\n|---|---|---|\n")
		for _, e := range r.Edits {
			answer := "allowed"
			if !e.Verdict.Allowed {
				answer = "**refused**"
			}
			if len(e.Verdict.Warnings) > 0 {
				answer += ": " + md(strings.Join(e.Verdict.Warnings, "; "))
			}
			reachCell := ""
			if e.Reach > 0 {
				reachCell = fmt.Sprint(e.Reach)
			}
			fmt.Fprintf(&b, "| %s `%s` | %s | %s |\n", e.Operation, md(e.Object), reachCell, answer)
		}
		b.WriteString("\n</details>\n\n")
	}
	if len(r.Namespaces) > 0 {
		b.WriteString("#### Views\n\n| namespace | change | item | from |\n|---|---|---|---|\n")
		for _, nd := range r.Namespaces {
			if nd.ProblemBefore != "" || nd.ProblemAfter != "" {
				fmt.Fprintf(&b, "| `%s` | hierarchy | %s | |\n", nd.Namespace, md(orDefault(nd.ProblemAfter, "fixed: "+nd.ProblemBefore)))
			}
			for _, v := range nd.Views {
				for _, it := range v.Added {
					fmt.Fprintf(&b, "| `%s` | added | `%s/%s` | %s |\n", nd.Namespace, v.Resource, it.Name, md(provenance(it)))
				}
				for _, it := range v.Removed {
					fmt.Fprintf(&b, "| `%s` | removed | `%s/%s` | %s |\n", nd.Namespace, v.Resource, it.Name, md(provenance(it)))
				}
				for _, c := range v.Changed {
					fmt.Fprintf(&b, "| `%s` | changed | `%s/%s` | %s%s |\n", nd.Namespace, v.Resource, c.After.Name, md(provenanceChange(c)), md(fieldList(c.Fields)))
				}
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func reach(e JudgedEdit) string {
	if e.Reach == 0 {
		return ""
	}
	return fmt.Sprintf(" (reaches %d namespaces)", e.Reach)
}

func provenance(it ItemRef) string {
	s := fmt.Sprintf("%s from %s", it.Scope, it.SourceNamespace)
	if it.Conflict != "" {
		s += "; " + it.Conflict
	}
	return s
}

func provenanceChange(c ItemChange) string {
	if c.Before == c.After {
		return provenance(c.After)
	}
	return provenance(c.Before) + " -> " + provenance(c.After)
}

func fieldList(fields []FieldDiff) string {
	if len(fields) == 0 {
		return ""
	}
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		if f.Before != nil || f.After != nil {
			parts = append(parts, fmt.Sprintf("%s: %v -> %v", f.Path, f.Before, f.After))
		} else {
			parts = append(parts, f.Path)
		}
	}
	return " fields: " + strings.Join(parts, ", ")
}

// md escapes a table cell.
func md(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ", "`", "'").Replace(s)
}
