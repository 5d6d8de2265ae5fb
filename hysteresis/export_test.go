package hysteresis

import "runtime"

// Settle waits until every transition so far has been delivered to OnEvent
// (or dropped), so that a test can read what its callback collected. It
// yields rather than sleeps, so it moves no testing/synctest clock.
func Settle(g *Gate) {
	for i := 0; ; i++ {
		g.mu.Lock()
		n := g.transitions
		g.mu.Unlock()
		if g.events.Delivered()+g.events.Dropped() >= n {
			return
		}
		if i > 1e8 {
			panic("hysteresis: Settle: events never delivered")
		}
		runtime.Gosched()
	}
}

// Reason names why e happened, as the Logger writes it: trip, warn, calm,
// recovered or stale.
func (e Event) Reason() string { return e.reason() }
