package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ttlkit/ttlkit/hysteresis"
)

// metricsCollector exports the library's Stats() snapshots at every scrape,
// so nothing is counted twice and the hot paths carry no metric code.
type metricsCollector struct {
	adm     *Admission
	streams *Streams

	budget, unitsInUse, activeModals, available, currentUsage, totalUnits *prometheus.Desc
	activeUsers, suggestActive                                            *prometheus.Desc
	requests, grants, rejections, invalid, heartbeats, heartbeatsFailed   *prometheus.Desc
	releases, expired, storeErrors, sweeps, eventsDropped                 *prometheus.Desc
	gateState, healthy, cpu, memory, swap, samples, sampleErrors, trips   *prometheus.Desc
	streamsActive, framesSent                                             *prometheus.Desc
}

func newMetricsCollector(adm *Admission, streams *Streams) *metricsCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("cameras_"+name, help, labels, nil)
	}
	return &metricsCollector{
		adm: adm, streams: streams,
		budget:           d("modal_budget_units", "MODAL_BUDGET: units camera modals share."),
		unitsInUse:       d("modal_units_in_use", "Units taken by live modal leases (whole store; exact on memory, else as of the last cleanup)."),
		activeModals:     d("active_modals", "Live modal leases (whole store; as modal_units_in_use)."),
		available:        d("modal_budget_remaining_units", "MODAL_BUDGET minus the units in use."),
		currentUsage:     d("current_usage_units", "Baseline + suggest + modal units (design §2.3), this instance's view."),
		totalUnits:       d("total_stream_units", "TOTAL_STREAM_UNITS."),
		activeUsers:      d("active_ui_users", "UI users holding a seat (a suggest stream), on every instance; without suggest streams, the pages of this instance that asked for the status recently."),
		suggestActive:    d("suggest_active", "1 when suggest streams are on and a page is open."),
		requests:         d("lease_requests_total", "Lease requests decided by this instance."),
		grants:           d("lease_grants_total", "Modal leases granted by this instance."),
		rejections:       d("lease_rejections_total", "Lease requests rejected by this instance, by error_code.", "error_code"),
		invalid:          d("lease_invalid_total", "Lease requests refused for bad input after decoding."),
		heartbeats:       d("lease_heartbeats_total", "Successful heartbeats."),
		heartbeatsFailed: d("lease_heartbeats_failed_total", "Heartbeats on expired or unknown leases."),
		releases:         d("lease_releases_total", "Leases released."),
		expired:          d("lease_expired_total", "Expired leases cleaned up by this instance, by what ended them.", "by"),
		storeErrors:      d("lease_store_errors_total", "Store calls that failed."),
		sweeps:           d("lease_cleanups_total", "Cleanup passes over expired leases."),
		eventsDropped:    d("lease_events_dropped_total", "Lease events dropped from a full queue."),
		gateState:        d("overload_state", "The overload gate: 0 normal, 1 warning, 2 overloaded."),
		healthy:          d("healthy", "1 unless the overload gate refuses modals."),
		cpu:              d("cpu_percent", "CPU busy share of the last sample."),
		memory:           d("memory_percent", "Memory used share of the last sample."),
		swap:             d("swap_bytes", "Swap in use at the last sample."),
		samples:          d("load_samples_total", "Load samples fed to the gate."),
		sampleErrors:     d("load_sample_errors_total", "Load samples that failed."),
		trips:            d("overload_trips_total", "Times the gate tripped to overloaded."),
		streamsActive:    d("streams_active", "Streams being served, by kind.", "kind"),
		framesSent:       d("stream_frames_total", "JPEG frames sent on every stream."),
	}
}

// Describe implements prometheus.Collector.
func (c *metricsCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

// Collect implements prometheus.Collector.
func (c *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	a := c.adm
	s := a.leases.Stats()
	users := a.sessions.Active()
	if a.seats != nil {
		users = a.seats.Stats().ActiveLeases
	}
	gauge(c.budget, float64(s.Budget))
	gauge(c.unitsInUse, float64(s.UnitsInUse))
	gauge(c.activeModals, float64(s.ActiveLeases))
	gauge(c.available, float64(max(0, s.Budget-s.UnitsInUse)))
	gauge(c.currentUsage, float64(a.currentUsage(users, s.UnitsInUse)))
	gauge(c.totalUnits, float64(a.cfg.TotalStreamUnits))
	gauge(c.activeUsers, float64(users))
	gauge(c.suggestActive, b2f(a.suggestActive(users)))
	total, _ := requests(s)
	counter(c.requests, total)
	counter(c.grants, s.Granted)
	counter(c.rejections, s.RejectedOverloaded, CodeSystemOverload)
	counter(c.rejections, s.RejectedHolderHasLease, CodeUserAlreadyHasModal)
	counter(c.rejections, s.RejectedOverCapacity, CodeOverCapacity)
	counter(c.invalid, s.Invalid)
	counter(c.heartbeats, s.Heartbeats)
	counter(c.heartbeatsFailed, s.HeartbeatsFailed)
	counter(c.releases, s.Released)
	counter(c.expired, s.Expired-s.ExpiredLapsed, "ttl")
	counter(c.expired, s.ExpiredLapsed, "heartbeat")
	counter(c.storeErrors, s.StoreErrors)
	counter(c.sweeps, s.Sweeps)
	counter(c.eventsDropped, s.EventsDropped)
	if a.gate != nil {
		gs := a.gate.Stats()
		gauge(c.gateState, float64(gs.State))
		gauge(c.healthy, b2f(gs.State != hysteresis.Overloaded))
		counter(c.trips, gs.Trips)
	} else {
		gauge(c.healthy, 1)
	}
	if a.monitor != nil {
		ms := a.monitor.Stats()
		gauge(c.cpu, ms.Last.CPU)
		gauge(c.memory, ms.Last.Memory)
		gauge(c.swap, float64(ms.Last.Swap))
		counter(c.samples, ms.Samples)
		counter(c.sampleErrors, ms.Errors)
	}
	gauge(c.streamsActive, float64(c.streams.activeMain.Load()), "main")
	gauge(c.streamsActive, float64(c.streams.activeSub.Load()), "sub")
	gauge(c.streamsActive, float64(c.streams.activeSuggest.Load()), "suggest")
	counter(c.framesSent, c.streams.framesSent.Load())
}

// newRegistry returns the registry /metrics serves: the server's metrics,
// and the Go runtime's and the process's.
func newRegistry(adm *Admission, streams *Streams) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newMetricsCollector(adm, streams),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
