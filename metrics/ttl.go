package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttlkit/ttlkit/ttl"
)

// Tracker returns a collector of t's Stats, read at every scrape: counters
// of records, flushes and losses of the sink, and gauges of the ids
// pending and buffered. Its metrics are named <namespace>_tracker_<name>
// unless o.Subsystem says otherwise. t is usually a *ttl.Tracker.
func Tracker(t interface{ Stats() ttl.TrackerStats }, o Options) prometheus.Collector {
	return newCollector(o, "tracker", false, trackerSpecs, one(t.Stats))
}

var trackerSpecs = []spec[ttl.TrackerStats]{
	counter("records_total", "Activities recorded.", func(s ttl.TrackerStats) uint64 { return s.Records }),
	gauge("pending", "Ids with activity not yet flushed.", func(s ttl.TrackerStats) int { return s.Pending }),
	gauge("buffered", "Ids held, pending or kept for allocation-free re-recording.", func(s ttl.TrackerStats) int { return s.Buffered }),
	counter("flushes_total", "Flushes that had something to send.", func(s ttl.TrackerStats) uint64 { return s.Flushes }),
	counter("flushed_total", "Activities handed to the sink.", func(s ttl.TrackerStats) uint64 { return s.Flushed }),
	counter("flush_errors_total", "Flushes that failed (kept for the next one).", func(s ttl.TrackerStats) uint64 { return s.FlushErrors }),
	counter("sink_losses_total", "Times the sink was found to have lost what it held.", func(s ttl.TrackerStats) uint64 { return s.SinkLosses }),
	counter("resent_total", "Activities sent again after a loss of the sink.", func(s ttl.TrackerStats) uint64 { return s.Resent }),
	gauge("last_flush_timestamp_seconds", "When the last successful flush ended, in seconds since the Unix epoch; 0 if none.",
		func(s ttl.TrackerStats) float64 { return timestamp(s.LastFlush) }),
	counter("events_dropped_total", "Events not delivered because OnEvent fell behind.", func(s ttl.TrackerStats) uint64 { return s.EventsDropped }),
}

// Runner returns a collector of r's Stats, read at every scrape: counters
// of ticks, activities synced, entities expired and ticks skipped (by rule)
// and errors (by stage), and the time and duration of the last tick. Its
// metrics are named <namespace>_runner_<name> unless o.Subsystem says
// otherwise. r is usually a *ttl.Runner.
func Runner(r interface{ Stats() ttl.RunnerStats }, o Options) prometheus.Collector {
	return newCollector(o, "runner", false, runnerSpecs, one(r.Stats))
}

var runnerSpecs = []spec[ttl.RunnerStats]{
	counter("ticks_total", "Ticks run.", func(s ttl.RunnerStats) uint64 { return s.Ticks }),
	counter("synced_total", "Activities moved from the buffer into the store.", func(s ttl.RunnerStats) uint64 { return s.Synced }),
	labeled(prometheus.CounterValue, "expired_total", "Entities a rule changed, by rule.", "rule",
		func(s ttl.RunnerStats, put func(float64, ...string)) {
			for _, r := range s.Rules {
				put(float64(r.Expired), r.Name)
			}
		}),
	labeled(prometheus.CounterValue, "skipped_ticks_total", "Ticks that did not apply a rule because the store's last activity could be stale, by rule.", "rule",
		func(s ttl.RunnerStats, put func(float64, ...string)) {
			for _, r := range s.Rules {
				put(float64(r.Skipped), r.Name)
			}
		}),
	labeled(prometheus.CounterValue, "errors_total", "Failures, by stage: sync (buffer to store), rule or wake.", "stage",
		func(s ttl.RunnerStats, put func(float64, ...string)) {
			put(float64(s.SyncErrors), "sync")
			put(float64(s.RuleErrors), "rule")
			put(float64(s.WakeErrors), "wake")
		}),
	counter("incomplete_drains_total", "Ticks whose drain did not reach the end of the buffer.", func(s ttl.RunnerStats) uint64 { return s.IncompleteDrains }),
	counter("buffer_losses_total", "Times the buffer was found to have lost what it held.", func(s ttl.RunnerStats) uint64 { return s.BufferLosses }),
	gauge("last_tick_timestamp_seconds", "When the last tick started, in seconds since the Unix epoch; 0 if none.",
		func(s ttl.RunnerStats) float64 { return timestamp(s.LastTick) }),
	gauge("last_tick_duration_seconds", "How long the last tick took.", func(s ttl.RunnerStats) float64 { return s.LastTickDuration.Seconds() }),
	counter("events_dropped_total", "Events not delivered because OnEvent fell behind.", func(s ttl.RunnerStats) uint64 { return s.EventsDropped }),
}
