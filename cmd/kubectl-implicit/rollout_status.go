package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// RolloutStatus is what rollout status prints with -o: the stable source,
// its candidates, and which namespaces see which version.
type RolloutStatus struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Resource is the source's resource, group-qualified.
	Resource string `json:"resource"`
	// Source is the stable source, namespace/name.
	Source string `json:"source"`
	// StableExists is false for a staged creation.
	StableExists bool `json:"stableExists"`
	// Candidates are the objects annotated implicit.dev/candidate-for: the
	// source's name; at most one applies (two or more: none does).
	Candidates []RolloutCandidate `json:"candidates"`
	// CandidateCount and StableCount count Namespaces by version.
	CandidateCount int                `json:"candidateCount"`
	StableCount    int                `json:"stableCount"`
	Namespaces     []NamespaceVersion `json:"namespaces"`
	// Audit is the candidate's audit on live authorization traffic
	// (RoleBindings only; rollout_audit.go).
	Audit *RolloutAudit `json:"audit,omitempty"`
	// Members, on a fleet's hub, are the members' shares of a global
	// source's rollout (rollout_members.go).
	Members []RolloutMember `json:"members,omitempty"`
}

// RolloutCandidate is one candidate of the stable source.
type RolloutCandidate struct {
	Name     string `json:"name"`
	UID      string `json:"uid"`
	Selector string `json:"selector"`
	// Problem says why the candidate reaches no namespace, if it does not
	// by its own annotations (malformed).
	Problem string `json:"problem,omitempty"`
}

// NamespaceVersion is one namespace whose view shows the source.
type NamespaceVersion struct {
	Namespace string `json:"namespace"`
	// Version is "candidate" or "stable".
	Version string `json:"version"`
	// As is "source" (the item's winning source) or "overlay".
	As string `json:"as"`
}

// The versions a namespace sees.
const (
	versionCandidate = "candidate"
	versionStable    = "stable"
)

// status reads the stable source, its candidates and the views of every
// namespace.
func (r *rollout) status(ctx context.Context) (*RolloutStatus, error) {
	stable, candidates, err := r.load(ctx)
	if err != nil {
		return nil, err
	}
	st := &RolloutStatus{
		APIVersion: "implicit.dev/v1alpha1", Kind: "RolloutStatus",
		Resource: r.source.GroupResource().String(), Source: r.namespace + "/" + r.name,
		StableExists: stable != nil, Candidates: []RolloutCandidate{}, Namespaces: []NamespaceVersion{},
	}
	for _, c := range candidates {
		rc := RolloutCandidate{Name: c.GetName(), UID: string(c.GetUID()), Selector: c.GetAnnotations()[v1alpha1.AnnotationCanarySelector]}
		if _, err := merge.ParseCandidate(c.GetName(), c.GetAnnotations()); err != nil {
			rc.Problem = err.Error()
		}
		st.Candidates = append(st.Candidates, rc)
	}
	items, err := r.viewsOf(ctx)
	if err != nil {
		return nil, err
	}
	ours := names(candidates)
	for i := range items {
		it := &items[i]
		if it.GetNamespace() == r.namespace {
			// The source's own namespace holds it as a local item: not
			// reached, as no reach counts it (watchmux.Reach).
			continue
		}
		as := ""
		switch {
		case it.GetLabels()[v1alpha1.LabelSourceNamespace] == r.namespace:
			as = "source"
		case slices.Contains(strings.Split(it.GetAnnotations()[v1alpha1.AnnotationOverlays], ","), r.namespace+"/"+r.name):
			as = "overlay"
		default:
			continue // another namespace's source of the same name
		}
		version := versionStable
		for _, c := range candidatesOf(it) {
			if slices.Contains(ours, c) {
				version = versionCandidate
				break
			}
		}
		st.Namespaces = append(st.Namespaces, NamespaceVersion{Namespace: it.GetNamespace(), Version: version, As: as})
		if version == versionCandidate {
			st.CandidateCount++
		} else {
			st.StableCount++
		}
	}
	sort.Slice(st.Namespaces, func(i, j int) bool { return st.Namespaces[i].Namespace < st.Namespaces[j].Namespace })
	r.members(ctx, st, items)
	return st, nil
}

func printRolloutStatus(w io.Writer, st *RolloutStatus) error {
	subject := st.Resource + " " + st.Source
	switch {
	case len(st.Candidates) == 0:
		fmt.Fprintf(w, "%s has no candidate.\n", subject)
	case len(st.Candidates) > 1:
		var n []string
		for _, c := range st.Candidates {
			n = append(n, c.Name)
		}
		fmt.Fprintf(w, "%s has %d candidates (%s): none applies, and the guard refuses a second one; delete all but one.\n",
			subject, len(st.Candidates), strings.Join(n, ", "))
	case !st.StableExists:
		c := st.Candidates[0]
		fmt.Fprintf(w, "%s does not exist: candidate %s stages its creation, selector %s.\n", subject, c.Name, c.Selector)
	default:
		c := st.Candidates[0]
		fmt.Fprintf(w, "%s: candidate %s, selector %s.\n", subject, c.Name, c.Selector)
	}
	for _, c := range st.Candidates {
		if c.Problem != "" {
			fmt.Fprintf(w, "Candidate %s is malformed and reaches no namespace: %s\n", c.Name, c.Problem)
		}
	}
	if len(st.Candidates) > 0 {
		ns := strings.SplitN(st.Source, "/", 2)[0]
		fmt.Fprintf(w, "Namespace %s holds the candidate as a real object: its native enforcement applies it, and its own view shows it under its own name.\n", ns)
	}
	fmt.Fprintf(w, "%d namespace(s) see the candidate, %d the stable version.\n", st.CandidateCount, st.StableCount)
	if len(st.Namespaces) == 0 {
		if err := printAudit(w, st.Audit); err != nil {
			return err
		}
		return printRolloutMembers(w, st.Members)
	}
	t := newTable(w, "NAMESPACE", "VERSION", "AS")
	for _, n := range st.Namespaces {
		t.row(n.Namespace, n.Version, n.As)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if err := printAudit(w, st.Audit); err != nil {
		return err
	}
	return printRolloutMembers(w, st.Members)
}
