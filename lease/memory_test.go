package lease_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/internal/leasecheck"
	"github.com/ttlkit/ttlkit/lease/leasetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	leasetest.Run(t, leasetest.Harness{
		New:        func(t *testing.T) lease.Store { return lease.NewMemoryStore(nil) },
		Peer:       func(t *testing.T, s lease.Store) lease.Store { return s },
		Unit:       time.Second,
		LocalClock: true,
		Wrap:       func(t *testing.T, body func(t *testing.T)) { synctest.Test(t, body) },
	})
}

// TestMemoryStoreConformanceRealTime runs the suite as a server store runs
// it: real time, short units, no synctest.
func TestMemoryStoreConformanceRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	leasetest.Run(t, leasetest.Harness{
		New:        func(t *testing.T) lease.Store { return lease.NewMemoryStore(nil) },
		Peer:       func(t *testing.T, s lease.Store) lease.Store { return s },
		Unit:       250 * time.Millisecond, // margins of Unit/2 survive a loaded CI machine
		LocalClock: true,
	})
}

// TestMemoryStoreMatchesModel drives one MemoryStore with thousands of random
// operations while time jumps around deadlines, and checks every answer
// against the sequential model of the Store contract. It exercises the
// deadline heap and the holder index far beyond the conformance suite.
func TestMemoryStoreMatchesModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := leasecheck.New(time.Now)
		s := h.Store(0, lease.NewMemoryStore(nil))
		r := rand.New(rand.NewPCG(3, 5))
		var ids []string
		pick := func() string {
			if len(ids) == 0 || r.IntN(10) == 0 {
				return lease.NewID()
			}
			return ids[r.IntN(len(ids))]
		}
		for range 4000 {
			switch n := r.IntN(100); {
			case n < 35:
				a := lease.GrantArgs{
					ID: lease.NewID(), Holder: fmt.Sprint("h", r.IntN(40)), Costs: []int{1 + r.IntN(3), 1},
					TTL: time.Duration(1+r.IntN(30)) * time.Second, Grace: time.Duration(1+r.IntN(10)) * time.Second,
					Budget: 50, OnePerHolder: r.IntN(5) != 0, Overloaded: r.IntN(20) == 0,
				}
				if l, err := s.Grant(ctx, a); err == nil {
					ids = append(ids, l.ID)
				}
			case n < 60:
				_, _ = s.Heartbeat(ctx, pick(), "")
			case n < 70:
				_, _ = s.Release(ctx, pick(), "")
			case n < 78:
				_, _ = s.Get(ctx, pick())
			case n < 84:
				_, _, _ = s.Usage(ctx)
			case n < 88:
				_, _ = s.List(ctx)
			default:
				_, _ = s.Sweep(ctx, 1+r.IntN(4))
			}
			if r.IntN(4) == 0 {
				time.Sleep(time.Duration(r.IntN(3000)) * time.Millisecond)
			}
		}
		require.NoError(t, h.Verify(time.Minute))
	})
}
