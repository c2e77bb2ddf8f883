package authz

// AuditDifferences counts the differences this replica recorded for the
// candidate RoleBinding namespace/name since it started (or since the
// candidate was last created): the requests the candidate would have
// answered otherwise, both directions. Counts only, for a member's report
// to its hub (pkg/fleet): who and where stay behind CandidateAudits.
func (a *Authorizer) AuditDifferences(namespace, name string) int64 {
	a.audit.mu.RLock()
	var recs []*auditRecord
	for ref, rec := range a.audit.records {
		if ref.Namespace == namespace && ref.Name == name {
			recs = append(recs, rec)
		}
	}
	a.audit.mu.RUnlock()
	var n int64
	for _, rec := range recs {
		rec.mu.Lock()
		n += rec.wouldDeny + rec.wouldAllow
		rec.mu.Unlock()
	}
	return n
}
