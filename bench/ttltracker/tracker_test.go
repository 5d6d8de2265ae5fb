// Package ttltracker benchmarks ttl.Tracker.Record, the per-request hot path
// of a cloud-IDE workspace proxy, against the buffers a service writes by hand: one map
// behind one mutex (the hand-written `_buffer[ws_id] = now()`), and a sync.Map.
package ttltracker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/ttl"
)

// recorder is what every implementation offers the benchmark.
type recorder interface{ Record(id string) }

// mutexMap is the hand-written buffer: one map, one lock, the clock read per call.
type mutexMap struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func (b *mutexMap) Record(id string) {
	now := time.Now()
	b.mu.Lock()
	b.m[id] = now
	b.mu.Unlock()
}

// syncMap stores the time per id in a sync.Map.
type syncMap struct{ m sync.Map }

func (b *syncMap) Record(id string) { b.m.Store(id, time.Now()) }

func BenchmarkTrackerRecord(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("workspace-%08d", i*7919)
		}
		impls := []struct {
			name string
			make func(b *testing.B) recorder
		}{
			{"ttlkit", func(b *testing.B) recorder {
				// The sink is never called: the flush interval outlasts the run.
				var sink nopSink
				tr, err := ttl.NewTracker(sink, ttl.TrackerOptions{FlushInterval: time.Hour})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = tr.Close(context.Background()) })
				return tr
			}},
			{"mutexmap", func(*testing.B) recorder { return &mutexMap{m: make(map[string]time.Time)} }},
			{"syncmap", func(*testing.B) recorder { return &syncMap{} }},
		}
		for _, impl := range impls {
			b.Run(fmt.Sprintf("ids=%d/impl=%s", n, impl.name), func(b *testing.B) {
				r := impl.make(b)
				// Every id is known before timing starts: the steady state
				// of a proxy whose workspaces are in use.
				for _, id := range ids {
					r.Record(id)
				}
				var next atomic.Uint64
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					// Each goroutine walks the ids from its own offset.
					i := int(next.Add(1)*uint64(n/7+1)) % n
					for pb.Next() {
						r.Record(ids[i])
						if i++; i == n {
							i = 0
						}
					}
				})
			})
		}
	}
}

// nopSink takes every flush and drops it.
type nopSink struct{}

func (nopSink) Add(context.Context, []ttl.Activity) error { return nil }
