package hysteresis

// PendingCap returns the capacity of the gate's delivery queue, so tests can
// check that a stuck callback cannot make it grow without bound.
func PendingCap(g *Gate) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return cap(g.pending)
}
