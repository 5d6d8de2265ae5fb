package leasecheck_test

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/internal/leasecheck"
)

var ctx = context.Background()

// gate is a lease.Gate the test flips.
type gate struct{ over atomic.Bool }

func (g *gate) Overloaded() bool { return g.over.Load() }

func newManager(t *testing.T, budget int, o lease.Options) *lease.Manager {
	t.Helper()
	m, err := lease.New(budget, o)
	require.NoError(t, err)
	storeOf.Store(m, o.Store)
	t.Cleanup(func() { _ = m.Close(ctx); storeOf.Delete(m) })
	return m
}

// storeOf holds the store of each Manager newManager made, for the list of
// live leases, which is the store's to read.
var storeOf sync.Map // *lease.Manager → lease.Store

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
				return crand.Text()
			}
			return ids[r.IntN(len(ids))]
		}
		for range 4000 {
			switch n := r.IntN(100); {
			case n < 35:
				a := lease.GrantArgs{
					ID: crand.Text(), Holder: fmt.Sprint("h", r.IntN(40)), Costs: []int{1 + r.IntN(3), 1},
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

// TestConcurrentHistoryLinearizable runs 8 goroutines over 3 Managers that
// share one MemoryStore (each with its sweep loop), doing random grants,
// heartbeats, releases, reads and sweeps while time passes and the gate
// flips, and checks the recorded history against the sequential model of the
// Store contract: budget, one lease per holder, decision order, tokens,
// expiry and exactly-once sweeps.
func TestConcurrentHistoryLinearizable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			managers = 3
			workers  = 8
			ops      = 150
			budget   = 6
		)
		store := lease.NewMemoryStore(nil)
		h := leasecheck.New(time.Now)
		g := &gate{}
		var ms []*lease.Manager
		for i := range managers {
			ms = append(ms, newManager(t, budget, lease.Options{
				Store: h.Store(i, store), Gate: g,
				TTL: 20 * time.Second, Grace: 5 * time.Second, SweepInterval: 3 * time.Second, SweepBatch: 2,
			}))
		}
		var wg sync.WaitGroup
		wg.Go(func() { // the gate flips now and then
			r := rand.New(rand.NewPCG(1, 99))
			for range 40 {
				time.Sleep(time.Duration(r.IntN(5000)) * time.Millisecond)
				g.over.Store(r.IntN(4) == 0)
			}
			g.over.Store(false)
		})
		for w := range workers {
			m := ms[w%managers]
			r := rand.New(rand.NewPCG(uint64(w), 7))
			wg.Go(func() {
				var mine []string
				pick := func() string {
					if len(mine) == 0 {
						return crand.Text()
					}
					return mine[r.IntN(len(mine))]
				}
				for range ops {
					switch n := r.IntN(100); {
					case n < 30:
						req := lease.Request{Holder: fmt.Sprint("h", r.IntN(6)), Cost: 2, Fallback: []int{1}}
						if r.IntN(4) == 0 {
							req = lease.Request{Holder: fmt.Sprint("h", r.IntN(6)), Cost: 1 + r.IntN(3)}
						}
						if l, err := m.Grant(ctx, req); err == nil {
							mine = append(mine, l.ID)
						}
					case n < 55:
						_, _ = m.Heartbeat(ctx, pick(), "")
					case n < 70:
						_, _ = m.Release(ctx, pick(), "")
					case n < 78:
						_, _ = m.Get(ctx, pick())
					case n < 86:
						_, _, _ = m.Usage(ctx)
					case n < 92:
						if s, ok := storeOf.Load(m); ok {
							_, _ = s.(lease.Store).List(ctx)
						}
					default:
						_, _ = m.Sweep(ctx)
					}
					if r.IntN(3) == 0 {
						time.Sleep(time.Duration(r.IntN(2500)) * time.Millisecond)
					}
				}
			})
		}
		wg.Wait()
		assert.Greater(t, h.Len(), workers*ops)
		var granted, expired, released uint64
		for _, m := range ms {
			st := m.Stats()
			granted += st.Granted
			expired += st.Expired
			released += st.Released
		}
		assert.NotZero(t, expired, "the run must exercise expiry")
		assert.NotZero(t, released)
		t.Logf("granted %d, released %d, expired (swept) %d", granted, released, expired)
		h.Check(t, 60*time.Second)
	})
}
