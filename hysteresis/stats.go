package hysteresis

import "time"

// Stats is a snapshot of a Gate's counters and gauges.
type Stats struct {
	// State is the current state and Since when it was entered.
	State State
	Since time.Time

	// TimeIn is the total time spent in each state since New, including the
	// current one up to now, indexed by State: TimeIn[Overloaded] is the time
	// the gate was tripped.
	TimeIn [3]time.Duration

	// Transitions counts state changes; Trips counts entries into Overloaded
	// and Recoveries exits from it.
	Transitions, Trips, Recoveries uint64

	// Samples counts accepted samples; Rejected counts samples refused for an
	// unknown signal or a NaN value.
	Samples, Rejected uint64

	// Stale is the number of signals stale now, Missing the number never
	// observed (a missing signal is also stale once StaleAfter has passed
	// since New). StaleEvents counts the times a signal went stale.
	Stale, Missing int
	StaleEvents    uint64

	// EventsDropped counts transitions not delivered to OnEvent because
	// its queue was full.
	EventsDropped uint64
}

// Stats returns a snapshot of the gate's counters, evaluated at the current
// time.
func (g *Gate) Stats() Stats {
	now := g.clock.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.evaluate(now)
	st := Stats{
		State:         g.state,
		Since:         g.since,
		TimeIn:        g.timeIn,
		Transitions:   g.transitions,
		Trips:         g.trips,
		Recoveries:    g.recoveries,
		Samples:       g.samples,
		Rejected:      g.rejected,
		StaleEvents:   g.staleEvents,
		EventsDropped: g.events.Dropped(),
	}
	if d := now.Sub(g.since); d > 0 {
		st.TimeIn[g.state] += d
	}
	for i := range g.signals {
		s := &g.signals[i]
		if s.stale {
			st.Stale++
		}
		if !s.observed {
			st.Missing++
		}
	}
	return st
}
