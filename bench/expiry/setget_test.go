package expiry_test

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// keyCount is the keyspace of the Set and Get benchmarks.
const keyCount = 100_000

// workload is the pre-generated keys and TTLs (fixed seed) shared by all
// implementations.
type workload struct {
	keys []string
	ttls []time.Duration
}

func newWorkload(n int, minTTL, maxTTL time.Duration, seed uint64) workload {
	r := rand.New(rand.NewPCG(seed, 0x7e57))
	w := workload{keys: make([]string, n), ttls: make([]time.Duration, n)}
	for i := range w.keys {
		w.keys[i] = fmt.Sprintf("key:%06d:%04x", i, r.Uint32()%0x10000)
		w.ttls[i] = minTTL + time.Duration(r.Int64N(int64(maxTTL-minTTL)+1))
	}
	return w
}

// setGetWorkload: TTLs of one to two hours, so nothing expires during the
// benchmark and every Get is a hit.
var setGetWorkload = newWorkload(keyCount, time.Hour, 2*time.Hour, 1)

// start gives each parallel goroutine its own position in the keyspace.
var start atomic.Uint64

func BenchmarkExpirySet(b *testing.B) {
	w := setGetWorkload
	for _, im := range impls {
		b.Run(fmt.Sprintf("keys=%d/impl=%s", keyCount, im.name), func(b *testing.B) {
			c := im.new(w.ttls)
			defer c.Close()
			for i, k := range w.keys { // preloaded: Set overwrites
				c.Set(k, i, w.ttls[i])
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				i := int(start.Add(7919) % keyCount)
				for pb.Next() {
					c.Set(w.keys[i], i, w.ttls[i])
					if i++; i == keyCount {
						i = 0
					}
				}
			})
			reportCPU(b, cpu)
		})
	}
}

func BenchmarkExpiryGet(b *testing.B) {
	w := setGetWorkload
	for _, im := range impls {
		b.Run(fmt.Sprintf("keys=%d/impl=%s", keyCount, im.name), func(b *testing.B) {
			c := im.new(w.ttls)
			defer c.Close()
			for i, k := range w.keys {
				c.Set(k, i, w.ttls[i])
			}
			var misses atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				i := int(start.Add(7919) % keyCount)
				miss := 0
				for pb.Next() {
					if _, ok := c.Get(w.keys[i]); !ok {
						miss++
					}
					if i++; i == keyCount {
						i = 0
					}
				}
				misses.Add(int64(miss))
			})
			reportCPU(b, cpu)
			if n := misses.Load(); n > 0 {
				b.Fatalf("%d misses on a preloaded keyspace", n)
			}
		})
	}
}

// reportCPU reports the process CPU time per operation since start
// (cpu-ns/op): with every processor busy it is about GOMAXPROCS × ns/op,
// and it does not count the time the process waited for a processor, so it
// stays comparable when the machine is shared.
func reportCPU(b *testing.B, start time.Duration) {
	if d := cpuTime() - start; d > 0 {
		b.ReportMetric(float64(d.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}
