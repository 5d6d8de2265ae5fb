package gateway

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttlkit/ttlkit/metrics"
	"github.com/ttlkit/ttlkit/pool"
)

// Metrics are the gateway's Prometheus collectors: the function pools'
// Stats (library metrics gateway_pool_*, labelled by function: workers in
// use and idle, capacity, waits, workers created), workers destroyed by
// the gateway's reasons, invocation latency, asynchronous events, and the
// requests refused, by reason.
type Metrics struct {
	g         *Gateway
	refused   *prometheus.CounterVec
	destroyed *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	events    *prometheus.CounterVec
	retries   *prometheus.CounterVec
	queued    *prometheus.Desc
}

// NewMetrics returns the collectors; Register them once the gateway exists.
func NewMetrics() *Metrics {
	fn := []string{"function"}
	return &Metrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_requests_refused_total", Help: "Requests refused before they reached the API, by reason.",
		}, []string{"reason"}),
		destroyed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_workers_destroyed_total", Help: "Workers destroyed, by function and reason (the gateway's reasons: crashed and timeout among them).",
		}, []string{"function", "reason"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gateway_invocation_duration_seconds", Help: "Invocation latency, including the wait for a worker.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"function", "outcome"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_events_total", Help: "Asynchronous invocations done, by function and result (succeeded, failed after every retry, dropped at shutdown).",
		}, []string{"function", "result"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_event_retries_total", Help: "Retries of failed asynchronous invocations.",
		}, fn),
		queued: prometheus.NewDesc("gateway_events_queued", "Asynchronous invocations held in memory: waiting, running or waiting for a retry.", nil, nil),
	}
}

// Register registers the collectors with r for gateway g.
func (m *Metrics) Register(r prometheus.Registerer, g *Gateway) error {
	m.g = g
	pools := metrics.Group(g, metrics.Options{Namespace: "gateway", KeyLabel: "function"})
	for _, c := range []prometheus.Collector{m.refused, m.destroyed, m.latency, m.events, m.retries, m, pools} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.queued }

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	if m.g == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(m.queued, prometheus.GaugeValue, float64(m.g.QueuedEvents()))
}

func (m *Metrics) onEvent(fn string, log *slog.Logger) func(pool.Event) {
	return func(ev pool.Event) {
		switch {
		case ev.Err != nil:
			kind := map[pool.EventKind]string{pool.EventCreated: "create_failed", pool.EventDestroyed: "destroy_failed"}[ev.Kind]
			log.Warn("worker "+kind, "function", fn, "worker", ev.ID, "err", ev.Err)
		case ev.Kind == pool.EventDestroyed && ev.Reason != pool.ReasonLost: // a lost worker is forgotten, not destroyed
			reason := ev.Reason
			if reason == pool.ReasonDied { // its pool found it dead while idle
				reason = ReasonCrashed
			}
			m.destroyed.WithLabelValues(fn, string(reason)).Inc()
			log.Info("worker destroyed", "function", fn, "worker", ev.ID, "reason", string(reason))
		case ev.Kind == pool.EventCreated:
			log.Info("worker created", "function", fn, "worker", ev.ID)
		}
	}
}

// Reasons a request is refused for (gateway_requests_refused_total).
const (
	RefusedHost       = "host"        // a Host the gateway does not answer to
	RefusedCrossSite  = "cross_site"  // sent by a browser for another site
	RefusedUnsigned   = "unsigned"    // no SigV4 signature
	RefusedUnknownKey = "unknown_key" // signed with an access key id the gateway does not hold
	RefusedSignature  = "signature"   // a wrong, incomplete or expired signature
)

func (m *Metrics) refuse(reason string) { m.refused.WithLabelValues(reason).Inc() }

func (m *Metrics) observe(fn, outcome string, seconds float64) {
	m.latency.WithLabelValues(fn, outcome).Observe(seconds)
}

func (m *Metrics) event(fn, result string) { m.events.WithLabelValues(fn, result).Inc() }

func (m *Metrics) eventRetry(fn string) { m.retries.WithLabelValues(fn).Inc() }
