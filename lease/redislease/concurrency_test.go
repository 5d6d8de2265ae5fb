package redislease_test

import (
	crand "crypto/rand"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/internal/leasecheck"
	"github.com/ttlkit/ttlkit/lease/leasetest"
)

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

// list returns the live leases of m's store.
func list(m *lease.Manager) ([]lease.Lease, error) {
	s, _ := storeOf.Load(m)
	return s.(lease.Store).List(ctx)
}

// clients returns n clients with their own connections to r's server.
func clients(t *testing.T, r *redistest.Redis, n int) []redis.UniversalClient {
	out := []redis.UniversalClient{r.Client}
	for len(out) < n {
		out = append(out, r.NewClient(t))
	}
	return out
}

// TestManagersHistoryLinearizable runs 3 Managers, each on its own Redis
// connection and sharing one prefix, under 6 goroutines doing a few thousand
// random grants, heartbeats, releases, reads and sweeps while the gate
// flips, and checks the recorded history against the sequential model of
// the Store contract (lease/internal/leasecheck): the budget, one live lease
// per holder, decision order, fallback costs and strictly increasing tokens.
// TTLs outlive the run (the model cannot read the server's clock);
// TestManagersWithExpiry covers expiry.
func TestManagersHistoryLinearizable(t *testing.T) {
	const (
		managers = 3
		workers  = 6
		ops      = 400
		budget   = 8
		holders  = 12
	)
	r := redistest.OpenRedis(t)
	h := leasecheck.New(nil)
	h.Dir = t.TempDir()
	g := &gate{}
	var ms []*lease.Manager
	for i, c := range clients(t, r, managers) {
		ms = append(ms, newManager(t, budget, lease.Options{
			Store: h.Store(i, newStore(t, c, storePrefix(r))), Gate: g,
			TTL: 10 * time.Minute, Grace: 10 * time.Minute, SweepInterval: 250 * time.Millisecond,
		}))
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		m := ms[w%managers]
		rnd := rand.New(rand.NewPCG(uint64(w), 11))
		wg.Go(func() {
			var mine []string
			pick := func() string {
				if len(mine) == 0 || rnd.IntN(10) == 0 {
					return crand.Text()
				}
				return mine[rnd.IntN(len(mine))]
			}
			for range ops {
				switch n := rnd.IntN(100); {
				case n < 3:
					g.over.Store(rnd.IntN(4) == 0)
				case n < 35:
					req := lease.Request{Holder: fmt.Sprint("h", rnd.IntN(holders)), Cost: 2, Fallback: []int{1}}
					if rnd.IntN(4) == 0 {
						req = lease.Request{Holder: fmt.Sprint("h", rnd.IntN(holders)), Cost: 1 + rnd.IntN(3)}
					}
					if l, err := m.Grant(ctx, req); err == nil {
						mine = append(mine, l.ID)
					}
				case n < 55:
					_, _ = m.Heartbeat(ctx, pick(), "")
				case n < 75:
					if len(mine) > 0 && rnd.IntN(8) != 0 {
						i := rnd.IntN(len(mine))
						_, _ = m.Release(ctx, mine[i], "")
						mine = append(mine[:i], mine[i+1:]...)
					} else {
						_, _ = m.Release(ctx, pick(), "")
					}
				case n < 82:
					_, _ = m.Get(ctx, pick())
				case n < 88:
					_, _, _ = m.Usage(ctx)
				case n < 94:
					_, _ = list(m)
				default:
					_, _ = m.Sweep(ctx)
				}
			}
		})
	}
	wg.Wait()
	for _, m := range ms {
		require.NoError(t, m.Close(ctx))
	}
	var granted, rejected uint64
	for _, m := range ms {
		st := m.Stats()
		granted += st.Granted
		rejected += st.RejectedOverCapacity + st.RejectedHolderHasLease + st.RejectedOverloaded
		assert.Zero(t, st.StoreErrors)
	}
	assert.Greater(t, granted, uint64(100), "the run must grant")
	assert.Greater(t, rejected, uint64(100), "the run must reject")
	require.GreaterOrEqual(t, h.Len(), workers*ops/2)
	t.Logf("granted %d, rejected %d in %v", granted, rejected, time.Since(start))
	checked := time.Now()
	h.Check(t, 60*time.Second)
	t.Logf("checked in %v", time.Since(checked))
}

// TestManagersWithExpiry runs 3 Managers on 3 connections over one prefix
// with leases that expire during the run (short graces, some holders never
// heartbeat) and sweep loops on every Manager. Every snapshot stays within
// the budget with one lease per holder, and at the end every granted lease
// was either released by its holder or reported expired by exactly one
// sweep, never both, never twice.
func TestManagersWithExpiry(t *testing.T) {
	const (
		managers = 3
		workers  = 9
		ops      = 200
		budget   = 5
		holders  = 7
	)
	r := redistest.OpenRedis(t)
	var (
		mu       sync.Mutex
		expired  = map[string]int{}
		released = map[string]int{}
		granted  = map[string]lease.Lease{}
	)
	var ms []*lease.Manager
	for _, c := range clients(t, r, managers) {
		ms = append(ms, newManager(t, budget, lease.Options{
			Store: newStore(t, c, storePrefix(r)),
			TTL:   400 * time.Millisecond, Grace: 60 * time.Millisecond, SweepInterval: 15 * time.Millisecond,
			OnEvent: func(e lease.Event) {
				if e.Kind == lease.EventExpired {
					mu.Lock()
					expired[e.Lease.ID]++
					mu.Unlock()
				}
			},
		}))
	}
	var wg sync.WaitGroup
	for w := range workers {
		m := ms[w%managers]
		rnd := rand.New(rand.NewPCG(uint64(w), 23))
		wg.Go(func() {
			var mine []string
			for range ops {
				switch n := rnd.IntN(100); {
				case n < 35:
					l, err := m.Grant(ctx, lease.Request{Holder: fmt.Sprint("h", rnd.IntN(holders)), Cost: 2, Fallback: []int{1}})
					var re *lease.RejectedError
					switch {
					case err == nil:
						mu.Lock()
						granted[l.ID] = l
						mu.Unlock()
						mine = append(mine, l.ID)
					case !errors.As(err, &re):
						t.Errorf("Grant: %v", err)
					}
				case n < 60 && len(mine) > 0:
					// Heartbeat the newest lease only: the older ones are
					// abandoned and expire by grace.
					if _, err := m.Heartbeat(ctx, mine[len(mine)-1], ""); err != nil &&
						!errors.Is(err, lease.ErrExpired) && !errors.Is(err, lease.ErrNotFound) {
						t.Errorf("Heartbeat: %v", err)
					}
				case n < 80 && len(mine) > 0:
					i := rnd.IntN(len(mine))
					id := mine[i]
					mine = append(mine[:i], mine[i+1:]...)
					_, err := m.Release(ctx, id, "")
					switch {
					case err == nil:
						mu.Lock()
						released[id]++
						mu.Unlock()
					case !errors.Is(err, lease.ErrExpired) && !errors.Is(err, lease.ErrNotFound):
						t.Errorf("Release: %v", err)
					}
				default:
					ls, err := list(m)
					if err != nil {
						t.Errorf("List: %v", err)
						continue
					}
					leasetest.CheckList(t, ls, budget)
				}
				time.Sleep(time.Duration(rnd.IntN(3)) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	// The workers release most of their leases; two more that nobody
	// heartbeats make sure some expire, whatever the machine's speed.
	time.Sleep(100 * time.Millisecond) // past every grace
	for i := range 2 {
		l, err := ms[i].Grant(ctx, lease.Request{Holder: fmt.Sprint("abandoned", i), Cost: 1})
		require.NoError(t, err)
		mu.Lock()
		granted[l.ID] = l
		mu.Unlock()
	}
	time.Sleep(450 * time.Millisecond) // past every ExpiresAt
	for _, m := range ms {
		_, err := m.Sweep(ctx)
		require.NoError(t, err)
		require.NoError(t, m.Close(ctx)) // delivers the queued events
	}
	u, n, err := newStore(t, r.Client, storePrefix(r)).Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, [2]int{0, 0}, [2]int{u, n})

	mu.Lock()
	defer mu.Unlock()
	require.Greater(t, len(granted), 50)
	require.NotEmpty(t, released)
	require.NotEmpty(t, expired)
	for id := range granted {
		if released[id]+expired[id] != 1 {
			t.Errorf("lease %s: released %d times, reported expired %d times; want once in all", id, released[id], expired[id])
		}
	}
	for id := range expired {
		if _, ok := granted[id]; !ok {
			t.Errorf("sweep reported %s, never granted", id)
		}
	}
	t.Logf("granted %d, released %d, expired %d", len(granted), len(released), len(expired))
}
