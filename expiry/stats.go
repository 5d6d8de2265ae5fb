package expiry

import "time"

// Stats is a snapshot of a [Map]'s or an [Expirer]'s counters and gauges; an
// Expirer leaves those marked "Map" zero.
type Stats struct {
	Keys             int // Map: keys stored, including expired ones not yet found
	KeysWithDeadline int // Map: of which carry a deadline

	ExpiredPassive uint64 // Map: keys deleted because an access found them expired
	ExpiredActive  uint64 // keys deleted by active expiry sampling

	Cycles     uint64 // active-expiry cycles run (by the loop or by hand)
	Rounds     uint64 // sample rounds over all cycles
	Sampled    uint64 // keys examined by active expiry
	BudgetHits uint64 // cycles cut short by their time or round budget
	// AvgTTL (Map) estimates the average time left of the keys with a deadline, from the live keys
	// active expiry samples (Redis INFO's avg_ttl): 0 until a sample has seen one; each round weighs 2 %.
	AvgTTL time.Duration
	// StaleEstimate estimates the share of keys with a deadline that are
	// expired but not yet deleted: the expired share of the last rounds of
	// each cycle (what the cycle leaves behind), smoothed over cycles.
	StaleEstimate float64
	LastCycle     time.Duration // duration of the last cycle

	EventsDelivered uint64 // Map: expiry events OnEvent has returned from
	EventsDropped   uint64 // Map: expiry events dropped because the queue was full
}

// Stats returns a snapshot of the Map's counters. It takes no lock.
func (m *Map[K, V]) Stats() Stats {
	st := m.exp.Stats()
	for i := range m.shards {
		s := &m.shards[i]
		st.Keys += int(s.keys.Load())
		st.KeysWithDeadline += int(s.withDL.Load())
	}
	st.AvgTTL = time.Duration(m.avgTTL.Load())
	st.ExpiredPassive = m.expiredPassive.Load()
	st.ExpiredActive = m.expiredActive.Load()
	st.EventsDelivered = m.ev.Delivered()
	st.EventsDropped = m.ev.Dropped()
	return st
}
