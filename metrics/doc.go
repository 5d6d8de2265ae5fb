// Package metrics exports the Stats of ttlkit's primitives to Prometheus.
//
// Each function returns a prometheus.Collector over one primitive — Pool,
// Group, Lease, Tracker, Runner, Map, Expirer and Gate — that reads the
// primitive's Stats() at every scrape and reports it as const metrics: the
// primitive's counters as counters (named _total), its gauges as gauges,
// durations in seconds. Nothing is counted twice and the primitives' hot
// paths carry no metric code. A collector never blocks beyond what Stats
// itself takes.
//
// Register a collector for each primitive a program runs:
//
//	p, err := pool.New(prov, pool.Options{MaxSize: 8})
//	if err != nil { ... }
//	prometheus.MustRegister(metrics.Pool(p, metrics.Options{Namespace: "myapp"}))
//	// /metrics now has myapp_pool_in_use, myapp_pool_idle,
//	// myapp_pool_created_total, myapp_pool_destroyed_total{reason="idle"}, ...
//
// Metric names are <Namespace>_<Subsystem>_<name>; the Subsystem defaults
// to the primitive (pool, lease, tracker, runner, expiry, gate), so two
// collectors of one kind in one registry need Subsystems of their own. A
// Group's metrics carry the pool's key as a label (Options.KeyLabel, "key"
// by default). Each function's documentation says what it exports.
package metrics
