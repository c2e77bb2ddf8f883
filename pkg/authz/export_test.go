package authz

import "k8s.io/component-base/metrics/testutil"

// Test-only access to the audit's internals.

// PruneAudit drops the records of the candidates that are gone, as RunAudit
// does on its ticks.
func (a *Authorizer) PruneAudit() error { return a.pruneAudit() }

// AuditedCandidates is the number of candidates whose records are held.
func (a *Authorizer) AuditedCandidates() int {
	a.audit.mu.RLock()
	defer a.audit.mu.RUnlock()
	return len(a.audit.records)
}

// Differences is implicit_candidate_audit_differences_total of the
// RoleBinding candidates in direction (would_deny, would_allow).
func Differences(direction string) float64 {
	v, _ := testutil.GetCounterMetricValue(differences.WithLabelValues(resourceRoleBindings, direction))
	return v
}
