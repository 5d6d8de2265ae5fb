package lease_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/internal/leasecheck"
)

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
						return lease.NewID()
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
						_, _ = m.Heartbeat(ctx, pick())
					case n < 70:
						_, _ = m.Release(ctx, pick())
					case n < 78:
						_, _ = m.Get(ctx, pick())
					case n < 86:
						_, _ = m.Usage(ctx)
					case n < 92:
						_, _ = m.List(ctx)
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

// TestConcurrentGrantsNeverOversubscribe hammers one Manager with grants
// and releases from many goroutines and checks the budget after every call.
func TestConcurrentGrantsNeverOversubscribe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const budget, workers = 35, 32
		m := newManager(t, budget, lease.Options{})
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range 200 {
					l, err := m.Grant(ctx, lease.Request{Holder: fmt.Sprint("u", w), Cost: 2, Fallback: []int{1}})
					if err != nil {
						var re *lease.RejectedError
						if !errors.As(err, &re) || re.Reason != lease.ReasonOverCapacity {
							t.Errorf("Grant: %v", err)
						}
						continue
					}
					u, err := m.Usage(ctx)
					require.NoError(t, err)
					if u.Units > budget {
						t.Errorf("%d units in use, budget %d", u.Units, budget)
					}
					if i%2 == 0 {
						_, err = m.Heartbeat(ctx, l.ID)
						require.NoError(t, err)
					}
					_, err = m.Release(ctx, l.ID)
					require.NoError(t, err)
				}
			})
		}
		wg.Wait()
		u, err := m.Usage(ctx)
		require.NoError(t, err)
		assert.Zero(t, u.Units)
		st := m.Stats()
		assert.Equal(t, st.Granted, st.Released)
		assert.Equal(t, uint64(workers*200), st.Granted+st.RejectedOverCapacity)
	})
}
