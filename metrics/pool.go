package metrics

import (
	"fmt"
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttlkit/ttlkit/pool"
)

// Pool returns a collector of p's Stats, read at every scrape: gauges of
// the items by state and of the waiting acquires, counters of waits,
// creates and destroys (by reason). Its metrics are named
// <namespace>_pool_<name> unless o.Subsystem says otherwise. p is usually
// a *pool.Pool[T].
func Pool(p interface{ Stats() pool.Stats }, o Options) prometheus.Collector {
	return newCollector(o, "pool", false, poolSpecs, one(p.Stats))
}

// Group returns a collector of every pool of g, like Pool's, with the pool's
// key as the label o.KeyLabel ("key" by default). A pool appears at the
// first scrape after the group creates it. g is usually a *pool.Group[K, T].
func Group[K comparable](g interface{ Stats() map[K]pool.Stats }, o Options) prometheus.Collector {
	return newCollector(o, "pool", true, poolSpecs, func(yield func(string, pool.Stats)) {
		for k, s := range g.Stats() {
			yield(fmt.Sprint(k), s)
		}
	})
}

var poolSpecs = []spec[pool.Stats]{
	gauge("max_size", "The pool's capacity (Options.MaxSize).", func(s pool.Stats) int { return s.MaxSize }),
	gauge("size", "Items counted against the capacity: idle, in use, being created or destroyed.", func(s pool.Stats) int { return s.Size }),
	gauge("idle", "Idle items held by this instance.", func(s pool.Stats) int { return s.Idle }),
	gauge("in_use", "Items handed out.", func(s pool.Stats) int { return s.InUse }),
	gauge("creating", "Items being created.", func(s pool.Stats) int { return s.Creating }),
	gauge("destroying", "Items being destroyed.", func(s pool.Stats) int { return s.Destroying }),
	gauge("waiting", "Acquires waiting for capacity now.", func(s pool.Stats) int { return s.Waiting }),
	counter("waits_total", "Acquires that had to wait for capacity.", func(s pool.Stats) uint64 { return s.WaitCount }),
	counter("wait_seconds_total", "Time acquires spent waiting for capacity.", func(s pool.Stats) float64 { return s.WaitDuration.Seconds() }),
	counter("canceled_waits_total", "Waits for capacity that ended with the caller's context.", func(s pool.Stats) uint64 { return s.CanceledWaits }),
	counter("created_total", "Items created.", func(s pool.Stats) uint64 { return s.Creates }),
	counter("create_failures_total", "Creates that failed, panicked or timed out.", func(s pool.Stats) uint64 { return s.CreateFailures }),
	labeled(prometheus.CounterValue, "destroyed_total", "Items destroyed, by reason.", "reason",
		func(s pool.Stats, put func(float64, ...string)) {
			for _, r := range slices.Sorted(maps.Keys(s.Destroyed)) {
				put(float64(s.Destroyed[r]), string(r))
			}
		}),
	counter("destroy_errors_total", "Destroys that failed.", func(s pool.Stats) uint64 { return s.DestroyErrors }),
	counter("orphans_total", "Orphans found by reconciliation.", func(s pool.Stats) uint64 { return s.Orphans }),
	counter("detached_total", "Items taken out of the pool for good.", func(s pool.Stats) uint64 { return s.Detached }),
	counter("spared_total", "Would-be orphans spared because another owner claims them.", func(s pool.Stats) uint64 { return s.Spared }),
	counter("events_dropped_total", "Events not delivered because OnEvent fell behind.", func(s pool.Stats) uint64 { return s.EventsDropped }),
}
