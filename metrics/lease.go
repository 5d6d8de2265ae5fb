package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttlkit/ttlkit/lease"
)

// Lease returns a collector of m's Stats, read at every scrape: counters of
// grants, rejections (by reason), heartbeats, releases and expiries (by the
// deadline that passed), and gauges of the live leases, the units they hold
// and the budget. Its metrics are named <namespace>_lease_<name> unless
// o.Subsystem says otherwise. m is usually a *lease.Manager.
func Lease(m interface{ Stats() lease.Stats }, o Options) prometheus.Collector {
	return newCollector(o, "lease", false, leaseSpecs, one(m.Stats))
}

var leaseSpecs = []spec[lease.Stats]{
	counter("grants_total", "Leases granted.", func(s lease.Stats) uint64 { return s.Granted }),
	labeled(prometheus.CounterValue, "rejections_total", "Grants refused, by reason.", "reason",
		func(s lease.Stats, put func(float64, ...string)) {
			put(float64(s.RejectedRecovering), "recovering")
			put(float64(s.RejectedOverloaded), "overloaded")
			put(float64(s.RejectedHolderHasLease), "holder_has_lease")
			put(float64(s.RejectedOverCapacity), "over_capacity")
		}),
	counter("invalid_total", "Grants refused for bad input.", func(s lease.Stats) uint64 { return s.Invalid }),
	counter("heartbeats_total", "Successful heartbeats.", func(s lease.Stats) uint64 { return s.Heartbeats }),
	counter("heartbeats_failed_total", "Heartbeats on expired, unknown or another holder's leases.", func(s lease.Stats) uint64 { return s.HeartbeatsFailed }),
	counter("releases_total", "Leases released.", func(s lease.Stats) uint64 { return s.Released }),
	labeled(prometheus.CounterValue, "expired_total", "Expired leases reclaimed by sweeps, by the deadline that passed: ttl (the absolute TTL) or heartbeat (the grace after the last heartbeat).", "deadline",
		func(s lease.Stats, put func(float64, ...string)) {
			put(float64(s.Expired-s.ExpiredLapsed), "ttl")
			put(float64(s.ExpiredLapsed), "heartbeat")
		}),
	counter("sweeps_total", "Sweeps completed.", func(s lease.Stats) uint64 { return s.Sweeps }),
	counter("store_errors_total", "Store calls that failed other than by a rule or the caller's context.", func(s lease.Stats) uint64 { return s.StoreErrors }),
	counter("events_dropped_total", "Events not delivered because OnEvent fell behind.", func(s lease.Stats) uint64 { return s.EventsDropped }),
	gauge("active", "Live leases in the store (exact in memory; other stores as of the last sweep).", func(s lease.Stats) int { return s.ActiveLeases }),
	gauge("units_in_use", "Budget units held by live leases (as active).", func(s lease.Stats) int { return s.UnitsInUse }),
	gauge("budget_units", "The budget live leases share.", func(s lease.Stats) int { return s.Budget }),
}
