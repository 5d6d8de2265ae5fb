package metrics_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/expiry"
	"github.com/ttlkit/ttlkit/hysteresis"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/metrics"
	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/ttl"
)

// scrape registers c in a fresh pedantic registry (which checks every
// metric against its description), requires promlint to find no problem in
// it and returns every series, keyed `name{label="value",...}` with the
// labels sorted by name.
func scrape(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	require.Empty(t, problems)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			var pairs []string
			for _, l := range m.GetLabel() {
				pairs = append(pairs, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			if len(pairs) > 0 {
				key += "{" + strings.Join(pairs, ",") + "}"
			}
			_, dup := out[key]
			require.False(t, dup, "series %s twice", key)
			switch mf.GetType().String() {
			case "COUNTER":
				out[key] = m.GetCounter().GetValue()
			case "GAUGE":
				out[key] = m.GetGauge().GetValue()
			default:
				t.Fatalf("%s: unexpected type %s", key, mf.GetType())
			}
		}
	}
	return out
}

// poolWant is what Pool and Group must export for s, under prefix, with
// labels (`key="a",` or "") before each series' own.
func poolWant(want map[string]float64, prefix, labels string, s pool.Stats) {
	series := func(name string, v float64, own ...string) {
		l := labels + strings.Join(own, ",")
		l = strings.TrimSuffix(l, ",")
		if l != "" {
			name += "{" + l + "}"
		}
		want[prefix+name] = v
	}
	series("max_size", float64(s.MaxSize))
	series("size", float64(s.Size))
	series("idle", float64(s.Idle))
	series("in_use", float64(s.InUse))
	series("creating", float64(s.Creating))
	series("destroying", float64(s.Destroying))
	series("waiting", float64(s.Waiting))
	series("waits_total", float64(s.WaitCount))
	series("wait_seconds_total", s.WaitDuration.Seconds())
	series("canceled_waits_total", float64(s.CanceledWaits))
	series("created_total", float64(s.Creates))
	series("create_failures_total", float64(s.CreateFailures))
	for _, r := range []pool.Reason{"idle", "lifetime", "warm_ttl", "unhealthy", "orphan", "shutdown", "evicted", "lost", "died"} {
		n, ok := s.Destroyed[r]
		if !ok {
			panic("no destroyed count for reason " + r)
		}
		series("destroyed_total", float64(n), `reason="`+string(r)+`"`)
	}
	series("destroy_errors_total", float64(s.DestroyErrors))
	series("orphans_total", float64(s.Orphans))
	series("detached_total", float64(s.Detached))
	series("spared_total", float64(s.Spared))
	series("events_dropped_total", float64(s.EventsDropped))
}

func TestPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		p, err := pool.New[int](&ints{}, pool.Options{MaxSize: 2})
		require.NoError(t, err)
		defer func() { require.NoError(t, p.Close(ctx)) }()
		h1, err := p.Acquire(ctx)
		require.NoError(t, err)
		h2, err := p.Acquire(ctx)
		require.NoError(t, err)
		wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		_, err = p.Acquire(wctx) // full: waits, then gives up
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		h1.Release()
		h2.Destroy(pool.ReasonUnhealthy)
		synctest.Wait()

		c := metrics.Pool(p, metrics.Options{Namespace: "test", ConstLabels: prometheus.Labels{"instance_id": "i1"}})
		got := scrape(t, c)
		s := p.Stats()
		want := map[string]float64{}
		poolWant(want, "test_pool_", `instance_id="i1",`, s)
		assert.Equal(t, want, got)

		// The operations above, as the metrics say them.
		assert.Equal(t, 2.0, got[`test_pool_created_total{instance_id="i1"}`])
		assert.Equal(t, 1.0, got[`test_pool_idle{instance_id="i1"}`])
		assert.Equal(t, 0.0, got[`test_pool_in_use{instance_id="i1"}`])
		assert.Equal(t, 1.0, got[`test_pool_waits_total{instance_id="i1"}`])
		assert.Equal(t, 1.0, got[`test_pool_canceled_waits_total{instance_id="i1"}`])
		assert.Equal(t, 1.5, got[`test_pool_wait_seconds_total{instance_id="i1"}`])
		assert.Equal(t, 1.0, got[`test_pool_destroyed_total{instance_id="i1",reason="unhealthy"}`])
		assert.Equal(t, 2.0, got[`test_pool_max_size{instance_id="i1"}`])
	})
}

func TestGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		g, err := pool.NewGroup(func(fn string) (pool.Provisioner[int], pool.Options, error) {
			return &ints{}, pool.Options{MaxSize: len(fn)}, nil
		})
		require.NoError(t, err)
		defer func() { require.NoError(t, g.Close(ctx)) }()
		c := metrics.Group(g, metrics.Options{Namespace: "gw", Subsystem: "workers", KeyLabel: "function"})
		assert.Empty(t, scrape(t, c), "no pool yet")

		h, err := acquireKey(ctx, g, "echo")
		require.NoError(t, err)
		h2, err := acquireKey(ctx, g, "hello")
		require.NoError(t, err)
		h2.Release()

		got := scrape(t, c)
		want := map[string]float64{}
		stats := g.Stats()
		require.Len(t, stats, 2)
		for fn, s := range stats {
			poolWant(want, "gw_workers_", `function="`+fn+`",`, s)
		}
		assert.Equal(t, want, got)
		assert.Equal(t, 1.0, got[`gw_workers_in_use{function="echo"}`])
		assert.Equal(t, 0.0, got[`gw_workers_in_use{function="hello"}`])
		assert.Equal(t, 1.0, got[`gw_workers_idle{function="hello"}`])
		assert.Equal(t, 4.0, got[`gw_workers_max_size{function="echo"}`])
		assert.Equal(t, 5.0, got[`gw_workers_max_size{function="hello"}`])
		h.Release()
	})
}

func TestGroupKeyLabelDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		g, err := pool.NewGroup(func(int) (pool.Provisioner[int], pool.Options, error) {
			return &ints{}, pool.Options{MaxSize: 1}, nil
		})
		require.NoError(t, err)
		defer func() { require.NoError(t, g.Close(ctx)) }()
		h, err := acquireKey(ctx, g, 7)
		require.NoError(t, err)
		defer h.Release()
		got := scrape(t, metrics.Group(g, metrics.Options{}))
		assert.Equal(t, 1.0, got[`pool_in_use{key="7"}`])
	})
}

func TestLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m, err := lease.New(3, lease.Options{})
		require.NoError(t, err)
		defer func() { require.NoError(t, m.Close(ctx)) }()

		a, err := m.Grant(ctx, lease.Request{Holder: "alice", Cost: 2})
		require.NoError(t, err)
		_, err = m.Grant(ctx, lease.Request{Holder: "alice", Cost: 1})
		requireRejected(t, err, lease.ErrHolderHasLease)
		_, err = m.Grant(ctx, lease.Request{Holder: "bob", Cost: 2})
		requireRejected(t, err, lease.ErrOverCapacity)
		_, err = m.Grant(ctx, lease.Request{Holder: "", Cost: 1})
		require.ErrorIs(t, err, lease.ErrInvalid)
		_, err = m.Heartbeat(ctx, a.ID, "")
		require.NoError(t, err)
		_, err = m.Heartbeat(ctx, "no-such-lease", "")
		require.Error(t, err)
		_, err = m.Release(ctx, a.ID, "")
		require.NoError(t, err)
		_, err = m.Grant(ctx, lease.Request{Holder: "carol", Cost: 1, Grace: time.Minute})
		require.NoError(t, err)
		_, err = m.Grant(ctx, lease.Request{Holder: "dave", Cost: 1})
		require.NoError(t, err)
		time.Sleep(2 * time.Minute) // carol's grace passes, dave's (45 s) too
		_, err = m.Sweep(ctx)
		require.NoError(t, err)
		_, err = m.Grant(ctx, lease.Request{Holder: "erin", Cost: 2})
		require.NoError(t, err)

		c := metrics.Lease(m, metrics.Options{Namespace: "test"})
		got := scrape(t, c)
		s := m.Stats()
		assert.Equal(t, map[string]float64{
			"test_lease_grants_total":                                float64(s.Granted),
			`test_lease_rejections_total{reason="recovering"}`:       float64(s.RejectedRecovering),
			`test_lease_rejections_total{reason="overloaded"}`:       float64(s.RejectedOverloaded),
			`test_lease_rejections_total{reason="holder_has_lease"}`: float64(s.RejectedHolderHasLease),
			`test_lease_rejections_total{reason="over_capacity"}`:    float64(s.RejectedOverCapacity),
			"test_lease_invalid_total":                               float64(s.Invalid),
			"test_lease_heartbeats_total":                            float64(s.Heartbeats),
			"test_lease_heartbeats_failed_total":                     float64(s.HeartbeatsFailed),
			"test_lease_releases_total":                              float64(s.Released),
			`test_lease_expired_total{deadline="ttl"}`:               float64(s.Expired - s.ExpiredLapsed),
			`test_lease_expired_total{deadline="heartbeat"}`:         float64(s.ExpiredLapsed),
			"test_lease_sweeps_total":                                float64(s.Sweeps),
			"test_lease_store_errors_total":                          float64(s.StoreErrors),
			"test_lease_events_dropped_total":                        float64(s.EventsDropped),
			"test_lease_active":                                      float64(s.ActiveLeases),
			"test_lease_units_in_use":                                float64(s.UnitsInUse),
			"test_lease_budget_units":                                float64(s.Budget),
		}, got)
		assert.Equal(t, 4.0, got["test_lease_grants_total"])
		assert.Equal(t, 1.0, got[`test_lease_rejections_total{reason="holder_has_lease"}`])
		assert.Equal(t, 1.0, got[`test_lease_rejections_total{reason="over_capacity"}`])
		assert.Equal(t, 1.0, got["test_lease_invalid_total"])
		assert.Equal(t, 1.0, got["test_lease_heartbeats_total"])
		assert.Equal(t, 1.0, got["test_lease_heartbeats_failed_total"])
		assert.Equal(t, 1.0, got["test_lease_releases_total"])
		assert.Equal(t, 2.0, got[`test_lease_expired_total{deadline="heartbeat"}`])
		assert.Equal(t, 0.0, got[`test_lease_expired_total{deadline="ttl"}`])
		assert.Equal(t, 1.0, got["test_lease_active"])
		assert.Equal(t, 2.0, got["test_lease_units_in_use"])
		assert.Equal(t, 3.0, got["test_lease_budget_units"])
	})
}

func requireRejected(t *testing.T, err error, reason error) {
	t.Helper()
	var re *lease.RejectedError
	require.True(t, errors.As(err, &re), "%v", err)
	require.Equal(t, reason, re.Err)
}

func TestTracker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		tr, err := ttl.NewTracker(new(ttl.MemoryBuffer), ttl.TrackerOptions{})
		require.NoError(t, err)
		defer func() { require.NoError(t, tr.Close(ctx)) }()
		tr.Record("a")
		tr.Record("b")
		tr.Record("a")
		_, err = tr.Flush(ctx)
		require.NoError(t, err)
		time.Sleep(time.Second)
		tr.Record("c")

		got := scrape(t, metrics.Tracker(tr, metrics.Options{Namespace: "test", Subsystem: "activity"}))
		s := tr.Stats()
		assert.Equal(t, map[string]float64{
			"test_activity_records_total":                float64(s.Records),
			"test_activity_pending":                      float64(s.Pending),
			"test_activity_buffered":                     float64(s.Buffered),
			"test_activity_flushes_total":                float64(s.Flushes),
			"test_activity_flushed_total":                float64(s.Flushed),
			"test_activity_flush_errors_total":           float64(s.FlushErrors),
			"test_activity_sink_losses_total":            float64(s.SinkLosses),
			"test_activity_resent_total":                 float64(s.Resent),
			"test_activity_last_flush_timestamp_seconds": float64(s.LastFlush.UnixNano()) / 1e9,
			"test_activity_events_dropped_total":         float64(s.EventsDropped),
		}, got)
		assert.Equal(t, 4.0, got["test_activity_records_total"])
		assert.Equal(t, 1.0, got["test_activity_pending"])
		assert.Equal(t, 1.0, got["test_activity_flushes_total"])
		assert.Equal(t, 2.0, got["test_activity_flushed_total"])
		assert.Positive(t, got["test_activity_last_flush_timestamp_seconds"])
	})
}

func TestRunner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := &table{created: time.Now(), desired: map[string]string{"w1": "", "w2": ""}}
		r, err := ttl.NewRunner(store, []ttl.Rule{
			{Name: "old", Phase: "RUNNING", Since: ttl.SinceCreated, After: time.Minute, Then: "STOPPED"},
		}, ttl.RunnerOptions{})
		require.NoError(t, err)
		defer func() { require.NoError(t, r.Close(ctx)) }()
		time.Sleep(90 * time.Second)
		_, err = r.Tick(ctx)
		require.NoError(t, err)

		got := scrape(t, metrics.Runner(r, metrics.Options{Namespace: "test"}))
		s := r.Stats()
		require.Len(t, s.Rules, 1)
		assert.Equal(t, map[string]float64{
			"test_runner_ticks_total":                     float64(s.Ticks),
			"test_runner_synced_total":                    float64(s.Synced),
			`test_runner_expired_total{rule="old"}`:       float64(s.Rules[0].Expired),
			`test_runner_skipped_ticks_total{rule="old"}`: float64(s.Rules[0].Skipped),
			`test_runner_errors_total{stage="sync"}`:      float64(s.SyncErrors),
			`test_runner_errors_total{stage="rule"}`:      float64(s.RuleErrors),
			`test_runner_errors_total{stage="wake"}`:      float64(s.WakeErrors),
			"test_runner_incomplete_drains_total":         float64(s.IncompleteDrains),
			"test_runner_buffer_losses_total":             float64(s.BufferLosses),
			"test_runner_last_tick_timestamp_seconds":     float64(s.LastTick.UnixNano()) / 1e9,
			"test_runner_last_tick_duration_seconds":      s.LastTickDuration.Seconds(),
			"test_runner_events_dropped_total":            float64(s.EventsDropped),
		}, got)
		assert.Equal(t, 2.0, got[`test_runner_expired_total{rule="old"}`])
		assert.GreaterOrEqual(t, got["test_runner_ticks_total"], 2.0, "the loop's first tick and ours")
		assert.Equal(t, float64(time.Now().Unix()), got["test_runner_last_tick_timestamp_seconds"])
	})
}

func TestMap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m, err := expiry.NewMap(expiry.MapOptions[string, string]{Options: expiry.Options{Interval: time.Second}})
		require.NoError(t, err)
		defer func() { require.NoError(t, m.Close(ctx)) }()
		m.Set("forever", "x", time.Time{})
		require.NoError(t, m.SetWithTTL("read", "x", 1200*time.Millisecond))
		require.NoError(t, m.SetWithTTL("unread", "x", 1200*time.Millisecond))
		require.NoError(t, m.SetWithTTL("later", "x", time.Hour))
		time.Sleep(1500 * time.Millisecond) // one active cycle (at 1 s) ran before the keys expired
		_, ok := m.Get("read")
		require.False(t, ok)
		_, err = m.Cycle(ctx)
		require.NoError(t, err)

		got := scrape(t, metrics.Map(m, metrics.Options{Namespace: "test"}))
		s := m.Stats()
		assert.Equal(t, map[string]float64{
			"test_expiry_keys":                            float64(s.Keys),
			"test_expiry_keys_with_deadline":              float64(s.KeysWithDeadline),
			`test_expiry_expired_total{reason="passive"}`: float64(s.ExpiredPassive),
			`test_expiry_expired_total{reason="active"}`:  float64(s.ExpiredActive),
			"test_expiry_cycles_total":                    float64(s.Cycles),
			"test_expiry_rounds_total":                    float64(s.Rounds),
			"test_expiry_sampled_keys_total":              float64(s.Sampled),
			"test_expiry_budget_hits_total":               float64(s.BudgetHits),
			"test_expiry_stale_ratio":                     s.StaleEstimate,
			"test_expiry_avg_ttl_seconds":                 s.AvgTTL.Seconds(),
			"test_expiry_last_cycle_duration_seconds":     s.LastCycle.Seconds(),
			"test_expiry_events_dropped_total":            float64(s.EventsDropped),
		}, got)
		assert.Equal(t, 2.0, got["test_expiry_keys"])
		assert.Equal(t, 1.0, got["test_expiry_keys_with_deadline"])
		assert.Equal(t, 1.0, got[`test_expiry_expired_total{reason="passive"}`])
		assert.Equal(t, 1.0, got[`test_expiry_expired_total{reason="active"}`])
		assert.Equal(t, 2.0, got["test_expiry_cycles_total"])
	})
}

// deadlines is a Keyspace: keys and their deadlines, all examined at once.
type deadlines map[string]time.Time

func (d deadlines) ExpireSample(now time.Time, n int) (sampled, expired int) {
	for k, at := range d {
		if sampled == n {
			break
		}
		sampled++
		if !at.After(now) {
			delete(d, k)
			expired++
		}
	}
	return sampled, expired
}

func TestExpirer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		// An Expirer over a store of one's own, cycles run by hand.
		ks := deadlines{}
		e, err := expiry.NewExpirer(ks, expiry.Options{Interval: -1})
		require.NoError(t, err)
		defer func() { require.NoError(t, e.Close(ctx)) }()
		for _, k := range []string{"a", "b", "c"} {
			ks[k] = time.Now().Add(time.Millisecond)
		}
		time.Sleep(time.Millisecond)
		_, err = e.Cycle(ctx)
		require.NoError(t, err)

		got := scrape(t, metrics.Expirer(e, metrics.Options{Namespace: "test", Subsystem: "keyspace"}))
		s := e.Stats()
		assert.Equal(t, map[string]float64{
			`test_keyspace_expired_total{reason="active"}`: float64(s.ExpiredActive),
			"test_keyspace_cycles_total":                   float64(s.Cycles),
			"test_keyspace_rounds_total":                   float64(s.Rounds),
			"test_keyspace_sampled_keys_total":             float64(s.Sampled),
			"test_keyspace_budget_hits_total":              float64(s.BudgetHits),
			"test_keyspace_stale_ratio":                    s.StaleEstimate,
			"test_keyspace_last_cycle_duration_seconds":    s.LastCycle.Seconds(),
		}, got)
		assert.Equal(t, 3.0, got[`test_keyspace_expired_total{reason="active"}`])
		assert.Equal(t, 1.0, got["test_keyspace_cycles_total"])
		assert.Equal(t, 3.0, got["test_keyspace_sampled_keys_total"])
	})
}

func TestGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		g, err := hysteresis.New([]hysteresis.Signal{{Name: "cpu", Warn: 70, Trip: 85, Recover: 60}},
			hysteresis.Options{Hold: time.Minute})
		require.NoError(t, err)
		defer func() { require.NoError(t, g.Close(ctx)) }()
		require.NoError(t, g.Observe("cpu", 90)) // trips at 0 s
		for range 14 {                           // calm from 5 s: recovers at 65 s
			time.Sleep(5 * time.Second)
			require.NoError(t, g.Observe("cpu", 50))
		}
		require.Error(t, g.Observe("disk", 1))
		time.Sleep(5 * time.Second)
		require.NoError(t, g.Observe("cpu", 90)) // trips again at 75 s

		got := scrape(t, metrics.Gate(g, metrics.Options{Namespace: "test", Subsystem: "overload"}))
		s := g.Stats()
		want := map[string]float64{
			"test_overload_state_since_timestamp_seconds": float64(s.Since.UnixNano()) / 1e9,
			"test_overload_transitions_total":             float64(s.Transitions),
			"test_overload_trips_total":                   float64(s.Trips),
			"test_overload_recoveries_total":              float64(s.Recoveries),
			"test_overload_samples_total":                 float64(s.Samples),
			"test_overload_rejected_samples_total":        float64(s.Rejected),
			"test_overload_stale_signals":                 float64(s.Stale),
			"test_overload_missing_signals":               float64(s.Missing),
			"test_overload_stale_transitions_total":       float64(s.StaleEvents),
			"test_overload_events_dropped_total":          float64(s.EventsDropped),
		}
		for _, st := range []hysteresis.State{hysteresis.Normal, hysteresis.Warning, hysteresis.Overloaded} {
			v := 0.0
			if s.State == st {
				v = 1
			}
			want[`test_overload_state{state="`+st.String()+`"}`] = v
			want[`test_overload_state_seconds_total{state="`+st.String()+`"}`] = s.TimeIn[st].Seconds()
		}
		assert.Equal(t, want, got)
		assert.Equal(t, 1.0, got[`test_overload_state{state="overloaded"}`])
		assert.Equal(t, 0.0, got[`test_overload_state{state="normal"}`])
		assert.Equal(t, 2.0, got["test_overload_trips_total"])
		assert.Equal(t, 1.0, got["test_overload_recoveries_total"])
		assert.Equal(t, 16.0, got["test_overload_samples_total"])
		assert.Equal(t, 1.0, got["test_overload_rejected_samples_total"])
		assert.Equal(t, 65.0, got[`test_overload_state_seconds_total{state="overloaded"}`])
		assert.Equal(t, 10.0, got[`test_overload_state_seconds_total{state="normal"}`])
		assert.Equal(t, float64(time.Now().Unix()), got["test_overload_state_since_timestamp_seconds"])
	})
}

// TestNames: two collectors of one kind register side by side under
// Subsystems of their own, and clash without.
func TestNames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		a, err := lease.New(1, lease.Options{})
		require.NoError(t, err)
		defer func() { require.NoError(t, a.Close(ctx)) }()
		b, err := lease.New(2, lease.Options{})
		require.NoError(t, err)
		defer func() { require.NoError(t, b.Close(ctx)) }()
		reg := prometheus.NewPedanticRegistry()
		require.NoError(t, reg.Register(metrics.Lease(a, metrics.Options{Namespace: "app"})))
		require.Error(t, reg.Register(metrics.Lease(b, metrics.Options{Namespace: "app"})))
		require.NoError(t, reg.Register(metrics.Lease(b, metrics.Options{Namespace: "app", Subsystem: "seats"})))
		n, err := testutil.GatherAndCount(reg, "app_lease_budget_units", "app_seats_budget_units")
		require.NoError(t, err)
		assert.Equal(t, 2, n)
	})
}

// acquireKey acquires an item from key's pool of g.
func acquireKey[K comparable, T any](ctx context.Context, g *pool.Group[K, T], key K) (*pool.Handle[T], error) {
	p, err := g.Pool(key)
	if err != nil {
		return nil, err
	}
	return p.Acquire(ctx)
}

// table is a ttl.Store of entities all created at one time, in the phase
// the rules watch.
type table struct {
	mu      sync.Mutex
	created time.Time
	desired map[string]string // by id
}

func (t *table) Add(context.Context, []ttl.Activity) error { return nil }

func (t *table) Apply(_ context.Context, r ttl.Rule) ([]ttl.Expiry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	var out []ttl.Expiry
	for id, d := range t.desired {
		if d != r.Then && r.Since == ttl.SinceCreated && now.Sub(t.created) > r.After {
			t.desired[id] = r.Then
			out = append(out, ttl.Expiry{ID: id, Rule: r.String(), Then: r.Then, LastActivityAt: t.created, DecidedAt: now})
		}
	}
	return out, nil
}
