package lease_test

import (
	"slices"
	"testing"
	"time"

	"github.com/bsm/redislock"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/redislease"
)

// The Redis backend: lease/redislease against bsm/redislock (a lock is a
// lease with cost 1, no budget, no holder rule) and bare PINGs, the round
// trips that one grant and one release (or one heartbeat) cannot avoid.
// It needs TTLKIT_TEST_REDIS_URL and skips without it; every run uses a
// fresh key prefix and deletes its keys.
func init() {
	backends = append(backends, backend{
		name:  "redis",
		store: redisStore,
		grantRelease: []peer{
			{"redislock", func(b *testing.B) {
				r := redistest.OpenRedis(b)
				locker := redislock.New(r.Client)
				key := r.Prefix + "cam_2f_19"
				for b.Loop() {
					l, err := locker.Obtain(ctx, key, 300*time.Second, nil)
					if err != nil {
						b.Fatal(err)
					}
					if err := l.Release(ctx); err != nil {
						b.Fatal(err)
					}
				}
			}},
			{"ping", func(b *testing.B) { pings(b, 2) }},
		},
		heartbeat: []peer{
			{"redislock", func(b *testing.B) {
				r := redistest.OpenRedis(b)
				l, err := redislock.New(r.Client).Obtain(ctx, r.Prefix+"cam_2f_19", time.Hour, nil)
				if err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if err := l.Refresh(ctx, time.Hour, nil); err != nil {
						b.Fatal(err)
					}
				}
			}},
			{"ping", func(b *testing.B) { pings(b, 1) }},
		},
	})
}

// redisStore returns a redislease store under a fresh prefix.
func redisStore(b *testing.B) lease.Store {
	r := redistest.OpenRedis(b)
	s, err := redislease.New(r.Client, redislease.Options{Prefix: r.Prefix + "{lease}:"})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// pings runs n PINGs per operation: the round-trip floor.
func pings(b *testing.B, n int) {
	r := redistest.OpenRedis(b)
	for b.Loop() {
		for range n {
			if err := r.Client.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkLeaseRedisInterleaved runs one grant+release of each
// implementation per iteration, in turn, and reports each one's median and
// 10th-percentile latency. On a shared machine, load that comes and goes
// between separate benchmarks skews their ratios; interleaved, every
// implementation sees the same load, so the ratios hold.
func BenchmarkLeaseRedisInterleaved(b *testing.B) {
	b.Run("backend=redis/op=grantrelease", func(b *testing.B) {
		b.ReportAllocs()
		r := redistest.OpenRedis(b)
		s, err := redislease.New(r.Client, redislease.Options{Prefix: r.Prefix + "{lease}:"})
		if err != nil {
			b.Fatal(err)
		}
		m := newManager(b, s)
		req := lease.Request{Holder: "session-1", Resource: "cam_2f_19", Cost: 2, Fallback: []int{1}}
		locker := redislock.New(r.Client)
		key := r.Prefix + "cam_2f_19"
		impls := []impl{
			{"ttlkit", func() error {
				l, err := m.Grant(ctx, req)
				if err != nil {
					return err
				}
				_, err = m.Release(ctx, l.ID, "")
				return err
			}},
			{"redislock", func() error {
				l, err := locker.Obtain(ctx, key, 300*time.Second, nil)
				if err != nil {
					return err
				}
				return l.Release(ctx)
			}},
			{"ping", func() error {
				if err := r.Client.Ping(ctx).Err(); err != nil {
					return err
				}
				return r.Client.Ping(ctx).Err()
			}},
		}
		interleave(b, impls)
	})
}

// impl is one implementation of an operation in an interleaved benchmark.
type impl struct {
	name string
	op   func() error
}

// interleave runs one op of each implementation per iteration, in turn,
// and reports each one's median and 10th-percentile latency, and the
// ratio of each one's median to the first one's.
func interleave(b *testing.B, impls []impl) {
	lat := make([][]time.Duration, len(impls))
	for b.Loop() {
		for i, im := range impls {
			start := time.Now()
			if err := im.op(); err != nil {
				b.Fatal(err)
			}
			lat[i] = append(lat[i], time.Since(start))
		}
	}
	p50 := make([]time.Duration, len(impls))
	for i, im := range impls {
		d := lat[i]
		slices.Sort(d)
		p50[i] = d[len(d)/2]
		b.ReportMetric(float64(p50[i].Nanoseconds()), im.name+"-p50-ns")
		b.ReportMetric(float64(d[len(d)/10].Nanoseconds()), im.name+"-p10-ns")
	}
	for i := 1; i < len(impls); i++ {
		b.ReportMetric(float64(p50[0])/float64(p50[i]), impls[0].name+"/"+impls[i].name+"-p50-x")
	}
}
