package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ttlkit/ttlkit/metrics"
)

// collector exports the proxy's and the controller's Stats() at every
// scrape, so the hot paths carry no metric code. The library parts (the
// proxy's activity tracker, the TTL runner, the controllers' claims) are
// exported by ttlkit's metrics package (see registerMetrics).
type collector struct {
	s *System
	d map[string]*prometheus.Desc
}

// metricDescs names every metric, with its help and labels.
var metricDescs = map[string][2]string{
	"proxy_requests_total":            {"HTTP requests relayed or held, WebSocket upgrades included (each one activity).", ""},
	"proxy_websockets_total":          {"WebSocket connections relayed.", ""},
	"proxy_websockets_open":           {"WebSocket connections open now.", ""},
	"proxy_websocket_messages_total":  {"WebSocket messages relayed, by direction (each one activity).", "direction"},
	"proxy_held_requests_total":       {"Requests that waited for their workspace to start.", ""},
	"proxy_hold_timeouts_total":       {"Requests whose workspace did not start within START_TIMEOUT_SECONDS.", ""},
	"proxy_refused_total":             {"Requests refused before any activity: no token, a bad or expired one, another site's.", ""},
	"proxy_errors_total":              {"Requests that failed after being accepted.", ""},
	"controller_operations_total":     {"Completed operations, by kind.", "operation"},
	"controller_kept_total":           {"STANDBY decisions cleared because activity arrived after them.", ""},
	"controller_conflicts_total":      {"Compare-and-sets another writer won.", ""},
	"controller_errors_total":         {"Failed operations and table calls.", ""},
	"controller_operations_in_flight": {"Operations in progress.", ""},
	"controller_queued":               {"Workspaces waiting for a worker.", ""},
}

func newCollector(s *System) *collector {
	c := &collector{s: s, d: map[string]*prometheus.Desc{}}
	for name, v := range metricDescs {
		var labels []string
		if v[1] != "" {
			labels = []string{v[1]}
		}
		c.d[name] = prometheus.NewDesc("workspaces_"+name, v[0], labels, nil)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(name string, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.d[name], prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.d[name], prometheus.GaugeValue, v, labels...)
	}
	s := c.s
	if s.proxy != nil {
		p := s.proxy.Stats()
		counter("proxy_requests_total", p.Requests)
		counter("proxy_websockets_total", p.WebSockets)
		gauge("proxy_websockets_open", float64(p.Open))
		counter("proxy_websocket_messages_total", p.MessagesIn, "in")
		counter("proxy_websocket_messages_total", p.MessagesOut, "out")
		counter("proxy_held_requests_total", p.Held)
		counter("proxy_hold_timeouts_total", p.HoldTimeouts)
		counter("proxy_refused_total", p.Refused)
		counter("proxy_errors_total", p.Errors)
	}
	if s.controller != nil {
		w := s.controller.Stats()
		counter("controller_operations_total", w.Started, "start")
		counter("controller_operations_total", w.Stopped, "stop")
		counter("controller_operations_total", w.Archived, "archive")
		counter("controller_operations_total", w.Restored, "restore")
		counter("controller_kept_total", w.Kept)
		counter("controller_conflicts_total", w.Conflicts)
		counter("controller_errors_total", w.Errors)
		gauge("controller_operations_in_flight", float64(w.Busy))
		gauge("controller_queued", float64(w.Queued))
	}
}

// registerMetrics registers the system's metrics: the components' own, the
// library parts' of the components this process runs (workspaces_activity_*
// for the proxy's tracker, workspaces_runner_*, workspaces_claims_* for the
// controllers' claims on PostgreSQL), and the Go runtime's and the
// process's.
func (s *System) registerMetrics() error {
	cs := []prometheus.Collector{newCollector(s), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
	if s.tracker != nil {
		cs = append(cs, metrics.Tracker(s.tracker, metrics.Options{Namespace: "workspaces", Subsystem: "activity"}))
	}
	if s.runner != nil {
		cs = append(cs, metrics.Runner(s.runner, metrics.Options{Namespace: "workspaces"}))
	}
	if s.claims != nil {
		cs = append(cs, metrics.Lease(s.claims, metrics.Options{Namespace: "workspaces", Subsystem: "claims"}))
	}
	for _, c := range cs {
		if err := s.registry.Register(c); err != nil {
			return err
		}
	}
	return nil
}
