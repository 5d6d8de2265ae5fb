package lease

import (
	"context"
	"sync/atomic"
)

// Stats is a snapshot of a Manager's counters, of its own calls only, and
// gauges of the whole store: exact with a memory store, else as of the
// last Sweep or Usage call.
type Stats struct {
	Granted uint64 // leases granted
	// Rejected by reason.
	RejectedRecovering, RejectedOverloaded, RejectedHolderHasLease, RejectedOverCapacity uint64
	// Other outcomes.
	Invalid          uint64 // grants refused for bad input
	Heartbeats       uint64 // successful heartbeats
	HeartbeatsFailed uint64 // heartbeats on expired, unknown or another holder's leases
	Released         uint64 // leases released
	Expired          uint64 // expired leases reclaimed by this Manager's sweeps
	ExpiredLapsed    uint64 // of which ended by missing heartbeats (SweepResult.Lapsed)
	Sweeps           uint64 // Sweep calls completed
	StoreErrors      uint64 // store calls that failed other than by a rule or the caller's context
	EventsDropped    uint64 // events dropped: the queue was full, or Close had ended it

	ActiveLeases int
	UnitsInUse   int
	Budget       int
}

// counters are the Manager's live counters.
type counters struct {
	granted, rejOverloaded, rejHolder, rejCapacity, invalid atomic.Uint64
	rejRecovering                                           atomic.Uint64
	heartbeats, heartbeatsFailed, released, expired, sweeps atomic.Uint64
	expiredLapsed                                           atomic.Uint64
	storeErrors, eventsLate                                 atomic.Uint64
	activeLeases, unitsInUse                                atomic.Int64
}

// Stats returns a snapshot of the Manager's counters and gauges.
func (m *Manager) Stats() Stats {
	c := &m.stats
	if ms, ok := m.store.(*memoryStore); ok {
		if units, n, err := ms.Usage(context.Background()); err == nil {
			c.unitsInUse.Store(int64(units))
			c.activeLeases.Store(int64(n))
		}
	}
	return Stats{
		Granted:                c.granted.Load(),
		RejectedRecovering:     c.rejRecovering.Load(),
		RejectedOverloaded:     c.rejOverloaded.Load(),
		RejectedHolderHasLease: c.rejHolder.Load(),
		RejectedOverCapacity:   c.rejCapacity.Load(),
		Invalid:                c.invalid.Load(),
		Heartbeats:             c.heartbeats.Load(),
		HeartbeatsFailed:       c.heartbeatsFailed.Load(),
		Released:               c.released.Load(),
		Expired:                c.expired.Load(),
		ExpiredLapsed:          c.expiredLapsed.Load(),
		Sweeps:                 c.sweeps.Load(),
		StoreErrors:            c.storeErrors.Load(),
		EventsDropped:          m.events.Dropped() + c.eventsLate.Load(),
		ActiveLeases:           int(c.activeLeases.Load()),
		UnitsInUse:             int(c.unitsInUse.Load()),
		Budget:                 m.budget,
	}
}
