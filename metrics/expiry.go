package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttlkit/ttlkit/expiry"
)

// Map returns a collector of m's Stats, read at every scrape: gauges of the
// keys (with a deadline or not), of the average time left and of the
// estimated stale share, and counters of the keys expired (by reason:
// passive or active) and of the active-expiry cycles. Its metrics are named
// <namespace>_expiry_<name> unless o.Subsystem says otherwise. m is usually
// an *expiry.Map[K, V].
func Map(m interface{ Stats() expiry.Stats }, o Options) prometheus.Collector {
	return newCollector(o, "expiry", false, mapSpecs, one(m.Stats))
}

var mapSpecs = []spec[expiry.Stats]{
	gauge("keys", "Keys stored, including expired ones not yet found.", func(s expiry.Stats) int { return s.Keys }),
	gauge("keys_with_deadline", "Keys stored that carry a deadline.", func(s expiry.Stats) int { return s.KeysWithDeadline }),
	labeled(prometheus.CounterValue, "expired_total", "Keys deleted because they expired, by reason: passive (found by an access) or active (found by sampling).", "reason",
		func(s expiry.Stats, put func(float64, ...string)) {
			put(float64(s.ExpiredPassive), "passive")
			put(float64(s.ExpiredActive), "active")
		}),
	counter("cycles_total", "Active-expiry cycles run.", func(s expiry.Stats) uint64 { return s.Cycles }),
	counter("rounds_total", "Active-expiry sample rounds.", func(s expiry.Stats) uint64 { return s.Rounds }),
	counter("sampled_keys_total", "Keys examined by active expiry.", func(s expiry.Stats) uint64 { return s.Sampled }),
	counter("budget_hits_total", "Active-expiry cycles cut short by their time or round budget.", func(s expiry.Stats) uint64 { return s.BudgetHits }),
	gauge("stale_ratio", "Estimated share of the keys with a deadline that are expired but not yet deleted.", func(s expiry.Stats) float64 { return s.StaleEstimate }),
	gauge("avg_ttl_seconds", "Estimated average time left of the keys with a deadline; 0 until sampled.", func(s expiry.Stats) float64 { return s.AvgTTL.Seconds() }),
	gauge("last_cycle_duration_seconds", "How long the last active-expiry cycle took.", func(s expiry.Stats) float64 { return s.LastCycle.Seconds() }),
	counter("events_dropped_total", "Expiry events not delivered because OnEvent fell behind.", func(s expiry.Stats) uint64 { return s.EventsDropped }),
}

// Expirer returns a collector of e's Stats, for active expiry over a
// Keyspace other than a Map: counters of cycles, rounds, keys sampled and
// expired (reason "active") and budget hits, and gauges of the estimated
// stale share and the last cycle's duration. Its metrics are named like
// Map's, <namespace>_expiry_<name> unless o.Subsystem says otherwise.
// e is usually an *expiry.Expirer.
func Expirer(e interface{ Stats() expiry.Stats }, o Options) prometheus.Collector {
	return newCollector(o, "expiry", false, expirerSpecs, one(e.Stats))
}

var expirerSpecs = []spec[expiry.Stats]{
	labeled(prometheus.CounterValue, "expired_total", "Keys deleted because they expired, by reason: active (found by sampling).", "reason",
		func(s expiry.Stats, put func(float64, ...string)) {
			put(float64(s.ExpiredActive), "active")
		}),
	counter("cycles_total", "Active-expiry cycles run.", func(s expiry.Stats) uint64 { return s.Cycles }),
	counter("rounds_total", "Active-expiry sample rounds.", func(s expiry.Stats) uint64 { return s.Rounds }),
	counter("sampled_keys_total", "Keys examined by active expiry.", func(s expiry.Stats) uint64 { return s.Sampled }),
	counter("budget_hits_total", "Active-expiry cycles cut short by their time or round budget.", func(s expiry.Stats) uint64 { return s.BudgetHits }),
	gauge("stale_ratio", "Estimated share of the keys with a deadline that are expired but not yet deleted.", func(s expiry.Stats) float64 { return s.StaleEstimate }),
	gauge("last_cycle_duration_seconds", "How long the last active-expiry cycle took.", func(s expiry.Stats) float64 { return s.LastCycle.Seconds() }),
}
