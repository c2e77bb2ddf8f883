package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// RolloutAudit is the AUDIT section of rollout status: what the replica
// that answered recorded of the candidate's shadow decisions (a
// CandidateAudit, candidateaudits.implicit.dev).
type RolloutAudit struct {
	// Replica answered; Scope says it is that replica's share alone.
	Replica          string `json:"replica,omitempty"`
	ReplicaStartTime string `json:"replicaStartTime,omitempty"`
	Scope            string `json:"scope,omitempty"`
	// Unavailable says why there is no audit to show, if there is none.
	Unavailable string                 `json:"unavailable,omitempty"`
	Candidates  []RolloutAuditedTarget `json:"candidates,omitempty"`
}

// RolloutAuditedTarget is one candidate's audit.
type RolloutAuditedTarget struct {
	Name    string `json:"name"`
	Problem string `json:"problem,omitempty"`
	// Since is when the replica judged its first request for it.
	Since      string `json:"since,omitempty"`
	Judged     int64  `json:"judged"`
	WouldDeny  int64  `json:"wouldDeny"`
	WouldAllow int64  `json:"wouldAllow"`
	// TopSubjects and TopNamespaces add up the counted keys.
	TopSubjects      []AuditTotal             `json:"topSubjects,omitempty"`
	TopNamespaces    []AuditTotal             `json:"topNamespaces,omitempty"`
	Keys             []v1alpha1.AuditKeyCount `json:"keys,omitempty"`
	OthersWouldDeny  int64                    `json:"othersWouldDeny"`
	OthersWouldAllow int64                    `json:"othersWouldAllow"`
	Samples          []v1alpha1.AuditSample   `json:"samples,omitempty"`
	// Withheld says why the keys and samples are left out, if they are.
	Withheld string `json:"withheld,omitempty"`
}

// AuditTotal is the differences counted for one subject or namespace.
type AuditTotal struct {
	Name       string `json:"name"`
	WouldDeny  int64  `json:"wouldDeny"`
	WouldAllow int64  `json:"wouldAllow"`
}

// auditTop is how many subjects, namespaces and samples the table shows.
const auditTop = 5

var auditedSource = schema.GroupResource{Group: rbacv1.GroupName, Resource: "rolebindings"}

// audit asks the server for the audit of the candidates of st's source:
// RoleBindings only (the authorization webhook decides with them), and only
// while there is a candidate.
func (r *rollout) audit(ctx context.Context, st *RolloutStatus) {
	if r.source.GroupResource() != auditedSource || len(st.Candidates) == 0 {
		return
	}
	in := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": "CandidateAudit",
		"spec": map[string]any{"resource": auditedSource.String(), "name": r.name},
	}}
	u, err := r.dyn.Resource(gvr(v1alpha1.ResourceCandidateAudits)).Namespace(r.namespace).Create(ctx, in, metav1.CreateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		st.Audit = &RolloutAudit{Unavailable: "this implicit-apiserver does not audit candidates (no candidateaudits.implicit.dev)"}
		return
	case err != nil:
		st.Audit = &RolloutAudit{Unavailable: err.Error()}
		return
	}
	var ca v1alpha1.CandidateAudit
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ca); err != nil {
		st.Audit = &RolloutAudit{Unavailable: fmt.Sprintf("reading the CandidateAudit: %v", err)}
		return
	}
	st.Audit = rolloutAudit(ca.Status)
}

func rolloutAudit(s v1alpha1.CandidateAuditStatus) *RolloutAudit {
	a := &RolloutAudit{Replica: s.Replica, Scope: s.Scope, ReplicaStartTime: timeString(s.ReplicaStartTime)}
	for _, c := range s.Candidates {
		t := RolloutAuditedTarget{
			Name: c.Name, Problem: c.Problem, Judged: c.Judged, WouldDeny: c.WouldDeny, WouldAllow: c.WouldAllow,
			Keys: c.Keys, OthersWouldDeny: c.OthersWouldDeny, OthersWouldAllow: c.OthersWouldAllow, Samples: c.Samples,
			Withheld: c.Withheld,
		}
		if c.Since != nil {
			t.Since = timeString(*c.Since)
		}
		t.TopSubjects = totals(c.Keys, func(k v1alpha1.AuditKeyCount) string { return k.User })
		t.TopNamespaces = totals(c.Keys, func(k v1alpha1.AuditKeyCount) string { return k.Namespace })
		a.Candidates = append(a.Candidates, t)
	}
	return a
}

func timeString(t metav1.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// totals adds up keys by what by returns, most differences first, the
// first auditTop.
func totals(keys []v1alpha1.AuditKeyCount, by func(v1alpha1.AuditKeyCount) string) []AuditTotal {
	m := map[string]*AuditTotal{}
	for _, k := range keys {
		t := m[by(k)]
		if t == nil {
			t = &AuditTotal{Name: by(k)}
			m[by(k)] = t
		}
		if k.Direction == "WouldDeny" {
			t.WouldDeny += k.Count
		} else {
			t.WouldAllow += k.Count
		}
	}
	out := make([]AuditTotal, 0, len(m))
	for _, t := range m {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].WouldDeny+out[i].WouldAllow, out[j].WouldDeny+out[j].WouldAllow
		if a != b {
			return a > b
		}
		return out[i].Name < out[j].Name
	})
	if len(out) > auditTop {
		out = out[:auditTop]
	}
	return out
}

// printAudit prints the AUDIT section.
func printAudit(w io.Writer, a *RolloutAudit) error {
	if a == nil {
		return nil
	}
	fmt.Fprintln(w)
	if a.Unavailable != "" {
		fmt.Fprintf(w, "AUDIT: unavailable: %s\n", a.Unavailable)
		return nil
	}
	fmt.Fprintf(w, "AUDIT (replica %s's view only: %s)\n", a.Replica, a.Scope)
	for _, c := range a.Candidates {
		if c.Problem != "" {
			fmt.Fprintf(w, "Candidate %s is not audited: %s\n", c.Name, c.Problem)
			continue
		}
		if c.Judged == 0 {
			fmt.Fprintf(w, "Candidate %s: no request judged yet (outside its canaries, in a namespace that would see it).\n", c.Name)
			continue
		}
		fmt.Fprintf(w, "Candidate %s, audited since %s: %d request(s) judged, %d would be denied, %d newly allowed.\n",
			c.Name, c.Since, c.Judged, c.WouldDeny, c.WouldAllow)
		if c.WouldDeny+c.WouldAllow == 0 {
			continue
		}
		if c.Withheld != "" {
			fmt.Fprintf(w, "Who and where left out: %s.\n", c.Withheld)
			continue
		}
		t := newTable(w, "TOP SUBJECTS", "WOULD DENY", "WOULD ALLOW")
		for _, s := range c.TopSubjects {
			t.row(s.Name, fmt.Sprint(s.WouldDeny), fmt.Sprint(s.WouldAllow))
		}
		if c.OthersWouldDeny+c.OthersWouldAllow > 0 {
			// Differences of keys beyond the bounded ones counted one by one.
			t.row("(others)", fmt.Sprint(c.OthersWouldDeny), fmt.Sprint(c.OthersWouldAllow))
		}
		if err := t.flush(); err != nil {
			return err
		}
		t = newTable(w, "TOP NAMESPACES", "WOULD DENY", "WOULD ALLOW")
		for _, n := range c.TopNamespaces {
			t.row(n.Name, fmt.Sprint(n.WouldDeny), fmt.Sprint(n.WouldAllow))
		}
		if err := t.flush(); err != nil {
			return err
		}
		t = newTable(w, "LATEST", "NAMESPACE", "USER", "GROUPS", "VERB", "RESOURCE", "NAME", "DIFFERENCE")
		samples := c.Samples
		if len(samples) > auditTop {
			samples = samples[len(samples)-auditTop:]
		}
		for _, s := range samples {
			t.row(timeString(s.Time), s.Namespace, s.User, strings.Join(s.Groups, ","), s.Verb, s.Resource, s.Name, s.Direction)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	return nil
}
