package hysteresis

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/hysteresis"
)

var allSignals = []hysteresis.Signal{
	{Name: "cpu", Warn: 70, Trip: 85, Recover: 60},
	{Name: "memory", Warn: 75, Trip: 90, Recover: 70},
	{Name: "swap", Warn: 50, Trip: 100, Recover: 50},
}

// gate is what both implementations offer to the benchmark.
type gate interface {
	Observe(name string, v float64) error
	Overloaded() bool
}

// naive is the hand-written check from the camera server's design: trip when
// any value is above its trip level, recover when the hold has passed since
// the last overload and every value is below its recover level.
type naive struct {
	hold    time.Duration
	signals []hysteresis.Signal
	index   map[string]int

	mu             sync.Mutex
	values         []float64
	overloaded     bool
	lastOverloadAt time.Time
}

func newNaive(signals []hysteresis.Signal, hold time.Duration) *naive {
	n := &naive{hold: hold, signals: signals, index: map[string]int{}, values: make([]float64, len(signals))}
	for i, s := range signals {
		n.index[s.Name] = i
	}
	return n
}

func (n *naive) Observe(name string, v float64) error {
	i, ok := n.index[name]
	if !ok {
		return hysteresis.ErrInvalid
	}
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	n.values[i] = v
	hot, calm := false, true
	for j, s := range n.signals {
		hot = hot || n.values[j] >= s.Trip
		calm = calm && n.values[j] < s.Recover
	}
	switch {
	case hot:
		n.overloaded, n.lastOverloadAt = true, now
	case n.overloaded && now.Sub(n.lastOverloadAt) > n.hold && calm:
		n.overloaded = false
	}
	return nil
}

func (n *naive) Overloaded() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.overloaded
}

// values pre-generates samples with a fixed seed: "calm" stays between 10 and
// 55 (no transitions: the steady hot path); "noisy" is uniform in 0-100, so
// the gate trips and recovers (Hold 0) all the time.
func values(kind string) []float64 {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]float64, 4096)
	for i := range out {
		if kind == "calm" {
			out[i] = 10 + r.Float64()*45
		} else {
			out[i] = r.Float64() * 100
		}
	}
	return out
}

func impls(b *testing.B, signals []hysteresis.Signal) map[string]gate {
	g, err := hysteresis.New(signals, hysteresis.Options{StaleAfter: -1, Hold: -1})
	if err != nil {
		b.Fatal(err)
	}
	return map[string]gate{"ttlkit": g, "naive": newNaive(signals, 0)}
}

func BenchmarkGateObserve(b *testing.B) {
	for _, n := range []int{1, 3} {
		signals := allSignals[:n]
		for _, kind := range []string{"calm", "noisy"} {
			vs := values(kind)
			gates := impls(b, signals)
			for _, impl := range []string{"ttlkit", "naive"} {
				g := gates[impl]
				b.Run(fmt.Sprintf("signals=%d/values=%s/impl=%s", n, kind, impl), func(b *testing.B) {
					b.ReportAllocs()
					i := 0
					for b.Loop() {
						if err := g.Observe(signals[i%n].Name, vs[i&4095]); err != nil {
							b.Fatal(err)
						}
						i++
					}
				})
			}
		}
	}
}

// BenchmarkGateOverloaded is the admission check: one read per request, from
// many goroutines, while a sampler feeds the gate.
func BenchmarkGateOverloaded(b *testing.B) {
	vs := values("calm")
	gates := impls(b, allSignals)
	for _, impl := range []string{"ttlkit", "naive"} {
		g := gates[impl]
		b.Run("signals=3/parallel=true/impl="+impl, func(b *testing.B) {
			for i, v := range vs[:3] {
				_ = g.Observe(allSignals[i].Name, v)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if g.Overloaded() {
						b.Fatal("calm values tripped the gate")
					}
				}
			})
		})
	}
}
