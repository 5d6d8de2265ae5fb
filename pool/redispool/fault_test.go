package redispool_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/redispool"
	"github.com/ttlkit/ttlkit/pool/shared"
)

// killer kills the connections named name every 15 ms until stop is
// closed, and returns how many it killed.
func killer(t *testing.T, r *redistest.Redis, name string, stop <-chan struct{}) func() int64 {
	var kills atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(15 * time.Millisecond):
			}
			n, err := r.KillClients(ctx, name)
			if err != nil {
				t.Errorf("killing clients: %v", err)
				return
			}
			kills.Add(int64(n))
		}
	})
	return func() int64 { wg.Wait(); return kills.Load() }
}

// checkWrapped fails t unless err comes from the inventory (wrapped with its
// prefix) and matches none of the inventory's conditions.
func checkWrapped(t *testing.T, op string, err error) {
	t.Helper()
	for _, s := range []error{shared.ErrExists, shared.ErrNotHeld, redispool.ErrInvalid} {
		if errors.Is(err, s) {
			t.Errorf("%s: %v matches %v", op, err, s)
		}
	}
	if !strings.Contains(err.Error(), "redispool: ") {
		t.Errorf("%s: %v is not wrapped by the inventory", op, err)
	}
}

// TestConnectionKilledPool kills one instance's Redis connections (CLIENT
// KILL, found by their client name) again and again while both instances
// of a fleet hand items out. The killed instance's calls fail with wrapped
// errors or succeed once go-redis has reconnected and resent them (resends
// act once: replay markers); no item is ever held twice or destroyed while
// held; once the kills stop the pool works again, and after the stray
// records of calls whose every attempt failed have expired and been
// reconciled, the provider's items and the inventory's records are the
// same set: nothing leaked.
//
// It runs with go-redis's default retries, and with none: the Inventory's
// own resends (Options.Resends) then settle the calls whose connection
// broke.
func TestConnectionKilledPool(t *testing.T) {
	t.Run("retries=default", func(t *testing.T) { testConnectionKilledPool(t, 0) })
	t.Run("retries=off", func(t *testing.T) { testConnectionKilledPool(t, -1) })
}

func testConnectionKilledPool(t *testing.T, maxRetries int) {
	const workers, load = 4, time.Second
	r := redistest.OpenRedis(t)
	prov := newProvider()
	killed, name := r.NamedClient(t, "pool", maxRetries)
	invA := newInventory(t, killed, poolPrefix(r))
	invB := newInventory(t, r.NewClient(t), poolPrefix(r))
	opts := pool.Options{
		MinIdle: minIdle, MaxIdle: maxIdle, MaxSize: 6,
		JanitorInterval: 300 * time.Millisecond, // held records live 900 ms without heartbeat
		// Longer than a create's inventory Add can take under the kills:
		// the Pool does not count a warm item whose Add is in flight as
		// known to Reconcile.
		OrphanGracePeriod:   time.Second,
		HealthCheckInterval: -1,
		DestroyTimeout:      2 * time.Second,
	}
	pools := startPools(t, prov, []*redispool.Inventory{invA, invB}, opts)
	defer closeAll(t, pools)

	stop := make(chan struct{})
	kills := killer(t, r, name, stop)
	var wg sync.WaitGroup
	var acquired, failed atomic.Int64
	for i, p := range pools {
		for w := range workers {
			rnd := rand.New(rand.NewPCG(uint64(i), uint64(w)))
			holder := fmt.Sprintf("gw-%d/w%d", i, w)
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					actx, cancel := context.WithTimeout(ctx, 5*time.Second)
					h, err := p.Acquire(actx)
					cancel()
					if err != nil {
						failed.Add(1)
						checkWrapped(t, "Acquire", err)
						time.Sleep(time.Millisecond)
						continue
					}
					acquired.Add(1)
					prov.hold(h.Value(), holder)
					time.Sleep(time.Duration(rnd.IntN(2)) * time.Millisecond)
					prov.unhold(h.Value())
					h.Release()
				}
			})
		}
	}
	time.Sleep(load)
	close(stop)
	wg.Wait()
	n := kills()
	require.Positive(t, n, "no connection was killed")
	t.Logf("killed %d connections; %d acquires, %d failed", n, acquired.Load(), failed.Load())
	assert.Empty(t, prov.report())
	assert.Greater(t, acquired.Load(), int64(50))

	// The killed instance works again.
	h, err := pools[0].Acquire(ctx)
	require.NoError(t, err)
	h.Release()

	// Settle: stray in-use records expire; reconcile destroys their items.
	require.Eventually(t, func() bool {
		for _, p := range pools {
			_, _ = p.Tick(ctx)
		}
		recs, err := invB.Records(ctx)
		if err != nil {
			return false
		}
		ids := map[string]bool{}
		for _, rec := range recs {
			if rec.Owner != "" {
				return false
			}
			ids[rec.ID] = true
		}
		live := prov.liveIDs()
		if len(live) != len(ids) {
			return false
		}
		for id := range live {
			if !ids[id] {
				return false
			}
		}
		return true
	}, 10*time.Second, 100*time.Millisecond, "provider items and records differ")
	assert.Empty(t, prov.report())
	assert.LessOrEqual(t, uint64(prov.destroyedTwice()), pools[0].Stats().Orphans+pools[1].Stats().Orphans, prov.twiceHistory())
}

// TestConnectionKilledNoRetries pops and puts through an inventory whose
// client does not retry, and that does not resend, while its connections
// are killed: every kill fails
// the calls in flight with a wrapped error, nothing is popped twice, and no
// record is lost or duplicated (a call whose reply was lost either took
// effect or not, but the set of records is intact).
func TestConnectionKilledNoRetries(t *testing.T) {
	const workers, items, load = 6, 20, 700 * time.Millisecond
	r := redistest.OpenRedis(t)
	c, name := r.NamedClient(t, "pool", -1)
	inv, err := redispool.New(c, redispool.Options{Prefix: poolPrefix(r), Resends: -1})
	require.NoError(t, err)
	check := newInventory(t, r.NewClient(t), poolPrefix(r))
	for i := range items {
		require.NoError(t, check.Add(ctx, shared.Record{ID: fmt.Sprintf("i%02d", i), Data: []byte("{}")}, 0))
	}
	var mu sync.Mutex
	held := map[string]string{}
	var errs atomic.Int64
	stop := make(chan struct{})
	kills := killer(t, r, name, stop)
	var wg sync.WaitGroup
	for w := range workers {
		owner := fmt.Sprintf("w%d", w)
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				rec, ok, err := inv.Pop(ctx, owner, time.Minute)
				if err != nil {
					errs.Add(1)
					checkWrapped(t, "Pop", err)
					continue
				}
				if !ok {
					continue
				}
				mu.Lock()
				if h, dup := held[rec.ID]; dup {
					t.Errorf("%s popped by %s while held by %s", rec.ID, owner, h)
				}
				held[rec.ID] = owner
				mu.Unlock()
				time.Sleep(time.Duration(rand.IntN(2)) * time.Millisecond)
				mu.Lock()
				delete(held, rec.ID) // given up before Put: Put may take effect at once
				mu.Unlock()
				if _, err := inv.Put(ctx, rec, 0, 0); err != nil {
					errs.Add(1)
					checkWrapped(t, "Put", err)
				}
			}
		})
	}
	time.Sleep(load)
	close(stop)
	wg.Wait()
	n := kills()
	require.Positive(t, n)
	require.Positive(t, errs.Load(), "no call saw a killed connection")
	t.Logf("killed %d connections; %d errors", n, errs.Load())
	recs, err := check.Records(ctx)
	require.NoError(t, err)
	assert.Len(t, recs, items)
	assert.Equal(t, items, len(uniqueIDs(recs)))
	cnt, err := inv.Counts(ctx) // the killed client reconnects
	require.NoError(t, err)
	assert.Equal(t, items, cnt.Idle+cnt.InUse)
}

func uniqueIDs(recs []shared.Record) map[string]bool {
	ids := map[string]bool{}
	for _, r := range recs {
		ids[r.ID] = true
	}
	return ids
}
