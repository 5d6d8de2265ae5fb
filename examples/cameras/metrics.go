package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ttlkit/ttlkit/metrics"
)

// metricsCollector exports, at every scrape, what the library's collectors
// (see newRegistry) do not: the server's own figures over the leases and
// the seats, the load samples, the health and the streams. The hot paths
// carry no metric code.
type metricsCollector struct {
	adm     *Admission
	streams *Streams

	currentUsage, totalUnits, activeUsers, suggestActive, requests *prometheus.Desc
	healthy, cpu, memory, swap, samples, sampleErrors              *prometheus.Desc
	streamsActive, framesSent                                      *prometheus.Desc
}

func newMetricsCollector(adm *Admission, streams *Streams) *metricsCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("cameras_"+name, help, labels, nil)
	}
	return &metricsCollector{
		adm: adm, streams: streams,
		currentUsage:  d("current_usage_units", "Baseline + suggest + modal units (design §2.3), this instance's view."),
		totalUnits:    d("total_stream_units", "TOTAL_STREAM_UNITS."),
		activeUsers:   d("active_ui_users", "UI users holding a seat (a suggest stream), on every instance; without suggest streams, the pages of this instance that asked for the status recently."),
		suggestActive: d("suggest_active", "1 when suggest streams are on and a page is open."),
		requests:      d("lease_requests_total", "Lease requests decided by this instance: granted or rejected by a rule."),
		healthy:       d("healthy", "1 unless the overload gate refuses modals."),
		cpu:           d("cpu_percent", "CPU busy share of the last sample."),
		memory:        d("memory_percent", "Memory used share of the last sample."),
		swap:          d("swap_bytes", "Swap in use at the last sample."),
		samples:       d("load_samples_total", "Load samples fed to the gate."),
		sampleErrors:  d("load_sample_errors_total", "Load samples that failed."),
		streamsActive: d("streams_active", "Streams being served, by kind.", "kind"),
		framesSent:    d("stream_frames_total", "JPEG frames sent on every stream."),
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
	gauge(c.currentUsage, float64(a.currentUsage(users, s.UnitsInUse)))
	gauge(c.totalUnits, float64(a.cfg.TotalStreamUnits))
	gauge(c.activeUsers, float64(users))
	gauge(c.suggestActive, b2f(a.suggestActive(users)))
	total, _ := requests(s)
	counter(c.requests, total)
	gauge(c.healthy, b2f(a.gate == nil || !a.gate.Overloaded()))
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

// newRegistry returns the registry /metrics serves: the server's metrics;
// the library parts' from ttlkit's metrics package: the modal leases
// (cameras_lease_*), the seats of UI users when suggest streams are on
// (cameras_seats_*) and the overload gate (cameras_overload_*); and the Go
// runtime's and the process's.
func newRegistry(adm *Admission, streams *Streams) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newMetricsCollector(adm, streams),
		metrics.Lease(adm.leases, metrics.Options{Namespace: "cameras"}),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if adm.seats != nil {
		reg.MustRegister(metrics.Lease(adm.seats, metrics.Options{Namespace: "cameras", Subsystem: "seats"}))
	}
	if adm.gate != nil {
		reg.MustRegister(metrics.Gate(adm.gate, metrics.Options{Namespace: "cameras", Subsystem: "overload"}))
	}
	return reg
}
