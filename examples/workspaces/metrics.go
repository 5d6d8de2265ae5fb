package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// collector exports the components' Stats() at every scrape, so the hot
// paths carry no metric code.
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
	"activity_records_total":          {"Activity recorded by this proxy's tracker.", ""},
	"activity_pending":                {"Workspaces with activity not yet flushed.", ""},
	"activity_flushes_total":          {"Flushes of the tracker that sent something.", ""},
	"activity_flush_errors_total":     {"Flushes that failed (kept for the next one).", ""},
	"activity_buffer_losses_total":    {"Times the tracker found the buffer lost (Redis restarted empty) and sent its recent activity again.", ""},
	"runner_ticks_total":              {"TTL runner ticks.", ""},
	"runner_synced_total":             {"Activities moved from the buffer into the table.", ""},
	"runner_expired_total":            {"Workspaces whose TTL expired, by rule.", "rule"},
	"runner_skipped_ticks_total":      {"Ticks that skipped a rule because the table's last activity could be stale, by rule.", "rule"},
	"runner_errors_total":             {"Failed syncs, rules and wakes.", ""},
	"runner_last_tick_seconds":        {"How long the last tick took.", ""},
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
		t := s.tracker.Stats()
		counter("activity_records_total", t.Records)
		gauge("activity_pending", float64(t.Pending))
		counter("activity_flushes_total", t.Flushes)
		counter("activity_flush_errors_total", t.FlushErrors)
		counter("activity_buffer_losses_total", t.SinkLosses)
	}
	if s.runner != nil {
		r := s.runner.Stats()
		counter("runner_ticks_total", r.Ticks)
		counter("runner_synced_total", r.Synced)
		for _, rule := range r.Rules {
			counter("runner_expired_total", rule.Expired, rule.Name)
			counter("runner_skipped_ticks_total", rule.Skipped, rule.Name)
		}
		counter("runner_errors_total", r.SyncErrors+r.RuleErrors+r.WakeErrors)
		gauge("runner_last_tick_seconds", r.LastTickDuration.Seconds())
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

// registerMetrics registers the system's metrics, and the Go runtime's and
// the process's.
func (s *System) registerMetrics() error {
	for _, c := range []prometheus.Collector{newCollector(s), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := s.registry.Register(c); err != nil {
			return err
		}
	}
	return nil
}
