package dns

// ReportedNames is how many names and hosts the reconciler remembers a
// report for (tests check that the memory shrinks).
func (r *Reconciler) ReportedNames() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reported)
}
