package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttlkit/ttlkit/hysteresis"
)

// Gate returns a collector of g's Stats, read at every scrape: the state
// (one series per state, 1 for the current one), the time spent in each
// state, counters of transitions, trips, recoveries and samples, and gauges
// of the stale and missing signals. Its metrics are named
// <namespace>_gate_<name> unless o.Subsystem says otherwise. g is usually a
// *hysteresis.Gate.
func Gate(g interface{ Stats() hysteresis.Stats }, o Options) prometheus.Collector {
	return newCollector(o, "gate", false, gateSpecs, one(g.Stats))
}

var gateStates = []hysteresis.State{hysteresis.Normal, hysteresis.Warning, hysteresis.Overloaded}

var gateSpecs = []spec[hysteresis.Stats]{
	labeled(prometheus.GaugeValue, "state", "The gate's state: 1 for the current one, 0 for the others.", "state",
		func(s hysteresis.Stats, put func(float64, ...string)) {
			for _, st := range gateStates {
				v := 0.0
				if s.State == st {
					v = 1
				}
				put(v, st.String())
			}
		}),
	gauge("state_since_timestamp_seconds", "When the gate entered its current state, in seconds since the Unix epoch.",
		func(s hysteresis.Stats) float64 { return timestamp(s.Since) }),
	labeled(prometheus.CounterValue, "state_seconds_total", "Time spent in each state, the current one up to now.", "state",
		func(s hysteresis.Stats, put func(float64, ...string)) {
			for _, st := range gateStates {
				put(s.TimeIn[st].Seconds(), st.String())
			}
		}),
	counter("transitions_total", "State changes.", func(s hysteresis.Stats) uint64 { return s.Transitions }),
	counter("trips_total", "Entries into the overloaded state.", func(s hysteresis.Stats) uint64 { return s.Trips }),
	counter("recoveries_total", "Exits from the overloaded state.", func(s hysteresis.Stats) uint64 { return s.Recoveries }),
	counter("samples_total", "Samples accepted.", func(s hysteresis.Stats) uint64 { return s.Samples }),
	counter("rejected_samples_total", "Samples refused for an unknown signal or a NaN value.", func(s hysteresis.Stats) uint64 { return s.Rejected }),
	gauge("stale_signals", "Signals stale now.", func(s hysteresis.Stats) int { return s.Stale }),
	gauge("missing_signals", "Signals never observed.", func(s hysteresis.Stats) int { return s.Missing }),
	counter("stale_transitions_total", "Times a signal went stale.", func(s hysteresis.Stats) uint64 { return s.StaleEvents }),
	counter("events_dropped_total", "Transitions not delivered because OnEvent fell behind.", func(s hysteresis.Stats) uint64 { return s.EventsDropped }),
}
