package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Options name a collector's metrics. The zero value gives each collector
// its default prefix (pool_, lease_, tracker_, runner_, expiry_, gate_).
type Options struct {
	// Namespace is the first part of every metric name, usually the
	// program's name ("gateway" gives gateway_pool_in_use). Empty means none.
	Namespace string
	// Subsystem is the second part of every metric name. Empty means the
	// collector's default: pool, lease, tracker, runner, expiry or gate. Set
	// it to tell apart two collectors of one kind in one registry.
	Subsystem string
	// ConstLabels are added to every metric, as in prometheus.Opts.
	ConstLabels prometheus.Labels
	// KeyLabel is the name of the label that carries a Group's pool key
	// (fmt.Sprint of the key). Empty means "key". Other collectors ignore it.
	KeyLabel string
}

// spec describes one metric: its name (without the prefix), help, type,
// the name of its variable label if it has one, and how to read its
// values from a Stats snapshot S.
type spec[S any] struct {
	name, help string
	typ        prometheus.ValueType
	label      string
	read       func(s S, put func(v float64, label ...string))
}

// number is what a Stats field holds: counters are uint64, gauges int,
// ratios and seconds float64.
type number interface{ ~int | ~uint64 | ~float64 }

func counter[S any, N number](name, help string, f func(S) N) spec[S] {
	return spec[S]{name: name, help: help, typ: prometheus.CounterValue,
		read: func(s S, put func(float64, ...string)) { put(float64(f(s))) }}
}

func gauge[S any, N number](name, help string, f func(S) N) spec[S] {
	return spec[S]{name: name, help: help, typ: prometheus.GaugeValue,
		read: func(s S, put func(float64, ...string)) { put(float64(f(s))) }}
}

// labeled is a metric with one variable label; f puts one value per label
// value.
func labeled[S any](typ prometheus.ValueType, name, help, label string, f func(S, func(float64, ...string))) spec[S] {
	return spec[S]{name: name, help: help, typ: typ, label: label, read: f}
}

// collector is a prometheus.Collector that reads Stats snapshots at every
// scrape and turns them into const metrics, so that nothing is counted
// twice and the primitives' hot paths carry no metric code.
type collector[S any] struct {
	specs []spec[S]
	descs []*prometheus.Desc
	keyed bool
	// each calls yield with every snapshot to export and, for a Group, the
	// key it belongs to.
	each func(yield func(key string, s S))
}

func newCollector[S any](o Options, subsystem string, keyed bool, specs []spec[S], each func(func(string, S))) *collector[S] {
	if o.Subsystem != "" {
		subsystem = o.Subsystem
	}
	c := &collector[S]{specs: specs, keyed: keyed, each: each}
	for _, sp := range specs {
		var labels []string
		if keyed {
			key := o.KeyLabel
			if key == "" {
				key = "key"
			}
			labels = append(labels, key)
		}
		if sp.label != "" {
			labels = append(labels, sp.label)
		}
		c.descs = append(c.descs, prometheus.NewDesc(
			prometheus.BuildFQName(o.Namespace, subsystem, sp.name), sp.help, labels, o.ConstLabels))
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *collector[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector[S]) Collect(ch chan<- prometheus.Metric) {
	c.each(func(key string, s S) {
		for i, sp := range c.specs {
			sp.read(s, func(v float64, label ...string) {
				if c.keyed {
					label = append([]string{key}, label...)
				}
				ch <- prometheus.MustNewConstMetric(c.descs[i], sp.typ, v, label...)
			})
		}
	})
}

// one is the each of a collector over a single Stats source.
func one[S any](stats func() S) func(func(string, S)) {
	return func(yield func(string, S)) { yield("", stats()) }
}

// timestamp is t in seconds since the Unix epoch, or 0 for the zero time.
func timestamp(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}
