package lease_test

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/ttlkit/ttlkit/lease"
)

// backend is one store under benchmark with the peers measured beside it.
// Files for other backends (redis, postgres) append theirs to backends in
// init; a backend that is not configured skips.
type backend struct {
	name string
	// store returns a fresh, empty store (or b.Skip).
	store func(b *testing.B) lease.Store
	// grantRelease and heartbeat are the peers of the same operation on
	// this backend; impl=ttlkit is added by the benchmark.
	grantRelease, heartbeat []peer
}

// peer runs b.N of its equivalent operations.
type peer struct {
	name string
	run  func(b *testing.B)
}

var backends = []backend{{
	name:  "memory",
	store: func(*testing.B) lease.Store { return lease.NewMemoryStore(nil) },
	grantRelease: []peer{{"semaphore", func(b *testing.B) {
		// Weighted admission with nothing else: the floor.
		ctx := context.Background()
		s := semaphore.NewWeighted(35)
		for b.Loop() {
			if err := s.Acquire(ctx, 2); err != nil {
				b.Fatal(err)
			}
			s.Release(2)
		}
	}}},
}}

var ctx = context.Background()

// measured runs body (which loops b.Loop) and reports, besides the wall
// clock, the process CPU time per operation (cpu-ns/op), steadier on a shared
// machine.
func measured(b *testing.B, body func(b *testing.B)) {
	b.ReportAllocs()
	start := cpuTime()
	body(b)
	if d := cpuTime() - start; d > 0 && b.N > 0 {
		b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func newManager(b *testing.B, s lease.Store) *lease.Manager {
	m, err := lease.New(35, lease.Options{Store: s, SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close(ctx) })
	return m
}

// BenchmarkLeaseGrantRelease: one holder grants a 2-unit lease (a camera's
// main stream, with the sub-stream fallback) and releases it.
func BenchmarkLeaseGrantRelease(b *testing.B) {
	for _, be := range backends {
		b.Run("backend="+be.name+"/impl=ttlkit", func(b *testing.B) {
			m := newManager(b, be.store(b))
			req := lease.Request{Holder: "session-1", Resource: "cam_2f_19", Cost: 2, Fallback: []int{1}}
			measured(b, func(b *testing.B) {
				for b.Loop() {
					l, err := m.Grant(ctx, req)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := m.Release(ctx, l.ID, ""); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		for _, p := range be.grantRelease {
			b.Run("backend="+be.name+"/impl="+p.name, func(b *testing.B) { measured(b, p.run) })
		}
	}
}

// BenchmarkLeaseHeartbeat: heartbeats on one live lease among 35.
func BenchmarkLeaseHeartbeat(b *testing.B) {
	for _, be := range backends {
		b.Run("backend="+be.name+"/impl=ttlkit", func(b *testing.B) {
			m := newManager(b, be.store(b))
			var l lease.Lease
			for i := range 35 {
				var err error
				l, err = m.Grant(ctx, lease.Request{Holder: string(rune('A' + i)), Cost: 1, TTL: time.Hour})
				if err != nil {
					b.Fatal(err)
				}
			}
			measured(b, func(b *testing.B) {
				for b.Loop() {
					if _, err := m.Heartbeat(ctx, l.ID, ""); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		for _, p := range be.heartbeat {
			b.Run("backend="+be.name+"/impl="+p.name, func(b *testing.B) { measured(b, p.run) })
		}
	}
}
