package metrics_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/ttlkit/ttlkit/expiry"
	"github.com/ttlkit/ttlkit/hysteresis"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/metrics"
	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/ttl"
)

// ints provisions consecutive ints: a stand-in for containers or workers.
type ints struct{ n atomic.Int64 }

func (p *ints) Create(context.Context) (int, error) { return int(p.n.Add(1)), nil }
func (p *ints) Destroy(context.Context, int) error  { return nil }

// show prints c's metrics of the given names in Prometheus's text format.
func show(c prometheus.Collector, names ...string) {
	text, err := testutil.CollectAndFormat(c, expfmt.TypeTextPlain, names...)
	if err != nil {
		panic(err)
	}
	fmt.Print(string(text))
}

func ExamplePool() {
	ctx := context.Background()
	p, err := pool.New[int](&ints{}, pool.Options{MaxSize: 4})
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)
	h, err := p.Acquire(ctx)
	if err != nil {
		panic(err)
	}
	defer h.Release()

	reg := prometheus.NewRegistry() // served on /metrics by promhttp.HandlerFor(reg, ...)
	c := metrics.Pool(p, metrics.Options{Namespace: "myapp"})
	reg.MustRegister(c)

	show(c, "myapp_pool_in_use", "myapp_pool_created_total")
	// Output:
	// # HELP myapp_pool_created_total Items created.
	// # TYPE myapp_pool_created_total counter
	// myapp_pool_created_total 1
	// # HELP myapp_pool_in_use Items handed out.
	// # TYPE myapp_pool_in_use gauge
	// myapp_pool_in_use 1
}

func ExampleGroup() {
	ctx := context.Background()
	g, err := pool.NewGroup(func(fn string) (pool.Provisioner[int], pool.Options, error) {
		return &ints{}, pool.Options{MaxSize: 2}, nil
	})
	if err != nil {
		panic(err)
	}
	defer g.Close(ctx)
	for _, fn := range []string{"resize", "thumbnail", "thumbnail"} {
		p, err := g.Pool(fn)
		if err != nil {
			panic(err)
		}
		h, err := p.Acquire(ctx)
		if err != nil {
			panic(err)
		}
		defer h.Release()
	}

	c := metrics.Group(g, metrics.Options{Namespace: "gateway", Subsystem: "workers", KeyLabel: "function"})
	prometheus.NewRegistry().MustRegister(c)

	show(c, "gateway_workers_in_use")
	// Output:
	// # HELP gateway_workers_in_use Items handed out.
	// # TYPE gateway_workers_in_use gauge
	// gateway_workers_in_use{function="resize"} 1
	// gateway_workers_in_use{function="thumbnail"} 2
}

func ExampleLease() {
	ctx := context.Background()
	m, err := lease.New(2, lease.Options{})
	if err != nil {
		panic(err)
	}
	defer m.Close(ctx)
	_, _ = m.Grant(ctx, lease.Request{Holder: "alice", Cost: 2})
	_, _ = m.Grant(ctx, lease.Request{Holder: "bob", Cost: 1}) // over capacity

	c := metrics.Lease(m, metrics.Options{Namespace: "app", ConstLabels: prometheus.Labels{"store": "memory"}})
	prometheus.NewRegistry().MustRegister(c)

	show(c, "app_lease_grants_total", "app_lease_rejections_total", "app_lease_units_in_use")
	// Output:
	// # HELP app_lease_grants_total Leases granted.
	// # TYPE app_lease_grants_total counter
	// app_lease_grants_total{store="memory"} 1
	// # HELP app_lease_rejections_total Grants refused, by reason.
	// # TYPE app_lease_rejections_total counter
	// app_lease_rejections_total{reason="holder_has_lease",store="memory"} 0
	// app_lease_rejections_total{reason="over_capacity",store="memory"} 1
	// app_lease_rejections_total{reason="overloaded",store="memory"} 0
	// app_lease_rejections_total{reason="recovering",store="memory"} 0
	// # HELP app_lease_units_in_use Budget units held by live leases (as active).
	// # TYPE app_lease_units_in_use gauge
	// app_lease_units_in_use{store="memory"} 2
}

func ExampleGate() {
	ctx := context.Background()
	g, err := hysteresis.New([]hysteresis.Signal{{Name: "cpu", Warn: 70, Trip: 85, Recover: 60}}, hysteresis.Options{})
	if err != nil {
		panic(err)
	}
	defer g.Close(ctx)
	_ = g.Observe("cpu", 92)

	c := metrics.Gate(g, metrics.Options{Namespace: "myapp", Subsystem: "overload"})
	prometheus.NewRegistry().MustRegister(c)

	show(c, "myapp_overload_state", "myapp_overload_trips_total")
	// Output:
	// # HELP myapp_overload_state The gate's state: 1 for the current one, 0 for the others.
	// # TYPE myapp_overload_state gauge
	// myapp_overload_state{state="normal"} 0
	// myapp_overload_state{state="overloaded"} 1
	// myapp_overload_state{state="warning"} 0
	// # HELP myapp_overload_trips_total Entries into the overloaded state.
	// # TYPE myapp_overload_trips_total counter
	// myapp_overload_trips_total 1
}

func ExampleTracker() {
	ctx := context.Background()
	t, err := ttl.NewTracker(new(ttl.MemoryBuffer), ttl.TrackerOptions{})
	if err != nil {
		panic(err)
	}
	defer t.Close(ctx)
	t.Record("ws-1")
	t.Record("ws-2")
	t.Record("ws-1")

	c := metrics.Tracker(t, metrics.Options{Namespace: "app", Subsystem: "activity"})
	prometheus.NewRegistry().MustRegister(c)

	show(c, "app_activity_records_total", "app_activity_pending")
	// Output:
	// # HELP app_activity_pending Ids with activity not yet flushed.
	// # TYPE app_activity_pending gauge
	// app_activity_pending 2
	// # HELP app_activity_records_total Activities recorded.
	// # TYPE app_activity_records_total counter
	// app_activity_records_total 3
}

func ExampleMap() {
	ctx := context.Background()
	m, err := expiry.NewMap(expiry.MapOptions[string, string]{})
	if err != nil {
		panic(err)
	}
	defer m.Close(ctx)
	m.Set("config", "v1", time.Time{})
	_ = m.SetWithTTL("session:42", "alice", time.Hour)

	c := metrics.Map(m, metrics.Options{Namespace: "kv"})
	prometheus.NewRegistry().MustRegister(c)

	show(c, "kv_expiry_keys", "kv_expiry_keys_with_deadline")
	// Output:
	// # HELP kv_expiry_keys Keys stored, including expired ones not yet found.
	// # TYPE kv_expiry_keys gauge
	// kv_expiry_keys 2
	// # HELP kv_expiry_keys_with_deadline Keys stored that carry a deadline.
	// # TYPE kv_expiry_keys_with_deadline gauge
	// kv_expiry_keys_with_deadline 1
}
