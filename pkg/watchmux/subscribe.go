package watchmux

// Serving reports whether resource's views are complete: the mux has synced
// and resource is served and no longer pending. A follower of the views
// (the materializer) acts on them only then: before, a view may lack items
// whose sources have not been read, and acting on it would delete what
// still exists. Changes of a serving resource are followed with Watch on
// all namespaces: each event names the namespace whose view changed.
func (m *Mux) Serving(resource string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, served := m.st.sources[resource]
	return m.synced && served && !m.st.pending.Has(resource)
}
