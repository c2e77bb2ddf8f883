package authz

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// CandidateAudits reports what this replica recorded of the candidate
// RoleBindings of namespace for the stable name: every candidate the mirror
// holds for it, audited or not (Problem says why not), with the records of
// the current one (by uid). The records of candidates that are gone are
// dropped first. err is set when the views can't be read yet.
func (a *Authorizer) CandidateAudits(namespace, stable string) (AuditReport, error) {
	if err := a.pruneAudit(); err != nil {
		return AuditReport{}, err
	}
	out := AuditReport{Replica: a.audit.replica, Started: a.audit.started}
	var cands []merge.Item
	if _, err := a.views.Read(func(r watchmux.Reader) {
		for _, it := range r.Candidates(resourceRoleBindings, namespace) {
			if it.Candidate != nil && it.Candidate.For == stable {
				cands = append(cands, it)
			}
		}
	}); err != nil {
		return AuditReport{}, err
	}
	for _, it := range cands {
		ca := CandidateAudit{
			Candidate: CandidateRef{Namespace: namespace, Name: it.Name, UID: it.UID, Cluster: it.Cluster},
			Stable:    stable,
		}
		switch {
		case len(cands) > 1:
			names := make([]string, 0, len(cands))
			for _, c := range cands {
				names = append(names, c.Name)
			}
			ca.Problem = fmt.Sprintf("%d candidates for %q (%s): none applies, so none is audited", len(cands), stable, strings.Join(names, ", "))
		default:
			if o, ok := it.Object.(metav1.Object); ok {
				if _, err := merge.ParseCandidate(it.Name, o.GetAnnotations()); err != nil {
					ca.Problem = "malformed, it reaches no namespace and is not audited: " + err.Error()
				}
			}
		}
		a.audit.mu.RLock()
		rec := a.audit.records[ca.Candidate]
		a.audit.mu.RUnlock()
		if rec != nil {
			rec.report(&ca)
		}
		out.Candidates = append(out.Candidates, ca)
	}
	return out, nil
}
