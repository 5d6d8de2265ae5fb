package backend

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttlkit/ttlkit/metrics"
)

// Metrics are the backend's Prometheus collectors. Counters are this
// instance's. The warm pool's Stats (sandboxes_warm_*: idle, creating,
// created_total, destroyed_total by reason, ...) and the TTL runner's
// (sandboxes_runner_*) come from ttlkit's metrics package; the fleet's warm
// set and the assigned sandboxes are read at every scrape. A nil *Metrics
// counts nothing.
type Metrics struct {
	b *Backend

	execs      *prometheus.HistogramVec
	assigned   *prometheus.HistogramVec
	destroyed  *prometheus.CounterVec
	archives   *prometheus.CounterVec
	archBytes  prometheus.Counter
	restores   *prometheus.CounterVec
	checks     *prometheus.CounterVec
	refusals   prometheus.Counter
	destroyErr prometheus.Counter
	adopted    prometheus.Counter

	warmFleet, live *prometheus.Desc
}

// NewMetrics returns the collectors; Register them once the backend
// exists.
func NewMetrics() *Metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sandboxes_" + name, Help: help}, labels)
	}
	return &Metrics{
		execs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sandboxes_exec_duration_seconds", Help: "Execs through this instance, by outcome (ok, nonzero_exit, timeout, sandbox_died, refused), from the agent's call to its reply.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"outcome"}),
		assigned: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sandboxes_assign_duration_seconds", Help: "Assignments of a sandbox to a conversation by this instance, by source (warm: from the pool; cold: created for it), including the restore of its files.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"source"}),
		destroyed:  counter("destroyed_total", "Assigned sandboxes destroyed by this instance, by reason (inactive, lifetime, unhealthy, deleted, shutdown, stale, superseded, assign_timeout, recovered).", "reason"),
		archives:   counter("archives_total", "Syncs of a destroyed sandbox's files to the archive, by result (ok, failed: the previous archive stays).", "result"),
		archBytes:  prometheus.NewCounter(prometheus.CounterOpts{Name: "sandboxes_archived_bytes_total", Help: "Bytes written to the archive."}),
		restores:   counter("restores_total", "Restores of a conversation's archived files into its new sandbox, by result.", "result"),
		checks:     counter("health_checks_total", "Health checks of assigned sandboxes by this instance, by result (ok, failed).", "result"),
		refusals:   prometheus.NewCounter(prometheus.CounterOpts{Name: "sandboxes_draining_refusals_total", Help: "Requests refused because their sandbox was draining."}),
		destroyErr: prometheus.NewCounter(prometheus.CounterOpts{Name: "sandboxes_destroy_failures_total", Help: "Destroys that failed (retried by a later GC pass)."}),
		adopted:    prometheus.NewCounter(prometheus.CounterOpts{Name: "sandboxes_adopted_total", Help: "Live sandboxes this instance recorded again for their conversations after the shared state lost their assignments."}),
		warmFleet:  prometheus.NewDesc("sandboxes_warm_shared", "Warm sandboxes in the shared pool, all instances.", nil, nil),
		live:       prometheus.NewDesc("sandboxes_assigned", "Sandboxes assigned to conversations (all instances), as of the last health pass.", nil, nil),
	}
}

// Register registers the collectors with r for backend b.
func (m *Metrics) Register(r prometheus.Registerer, b *Backend) error {
	m.b = b
	warm := metrics.Pool(b.pool, metrics.Options{Namespace: "sandboxes", Subsystem: "warm"})
	runner := metrics.Runner(b.runner, metrics.Options{Namespace: "sandboxes"})
	for _, c := range []prometheus.Collector{m.execs, m.assigned, m.destroyed, m.archives, m.archBytes, m.restores, m.checks, m.refusals, m.destroyErr, m.adopted, m, warm, runner} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.warmFleet
	ch <- m.live
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	if m.b == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(m.live, prometheus.GaugeValue, float64(m.b.assigned.Load()))
	if inv := m.b.cfg.Inventory; inv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if c, err := inv.Counts(ctx); err == nil {
			ch <- prometheus.MustNewConstMetric(m.warmFleet, prometheus.GaugeValue, float64(c.Idle))
		}
	}
}

func (m *Metrics) execOne(outcome string, d time.Duration) {
	if m != nil {
		m.execs.WithLabelValues(outcome).Observe(d.Seconds())
	}
}

func (m *Metrics) assignedOne(warm bool, d time.Duration) {
	if m != nil {
		src := "cold"
		if warm {
			src = "warm"
		}
		m.assigned.WithLabelValues(src).Observe(d.Seconds())
	}
}

func (m *Metrics) destroyedOne(reason string) {
	if m != nil {
		m.destroyed.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) archivedOne(ok bool, n int64) {
	if m != nil {
		m.archives.WithLabelValues(result(ok)).Inc()
		m.archBytes.Add(float64(n))
	}
}

func (m *Metrics) restoredOne(ok bool) {
	if m != nil {
		m.restores.WithLabelValues(result(ok)).Inc()
	}
}

func (m *Metrics) checked(ok bool) {
	if m != nil {
		m.checks.WithLabelValues(result(ok)).Inc()
	}
}

func (m *Metrics) refused() {
	if m != nil {
		m.refusals.Inc()
	}
}

func (m *Metrics) destroyFailed() {
	if m != nil {
		m.destroyErr.Inc()
	}
}

func (m *Metrics) adoptedOne() {
	if m != nil {
		m.adopted.Inc()
	}
}

func result(ok bool) string {
	if ok {
		return "ok"
	}
	return "failed"
}
