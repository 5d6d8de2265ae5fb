package pool_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/shared"
)

// A sandbox system: several backend instances share one warm pool. The warm target
// is global, no item is ever held by two instances at once, and the shared
// idle count settles within MinIdle..MaxIdle.
func TestSharedWarmPoolAcrossInstances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inv := shared.NewMemoryInventory(nil)
		f := newFake()
		var pools []*pool.Pool[box]
		for _, name := range []string{"a", "b", "c"} {
			pools = append(pools, newPool(t, f, pool.Options{
				MinIdle: 2, MaxIdle: 4, MaxSize: 5, Inventory: inv, Instance: name, JanitorInterval: 10 * time.Second,
			}))
		}
		synctest.Wait()
		c, err := inv.Counts(context.Background())
		require.NoError(t, err)
		assert.Equal(t, shared.Counts{Idle: 2}, c, "the warm target is global")

		var mu sync.Mutex
		holders := map[string]string{}
		var wg sync.WaitGroup
		for i, p := range pools {
			for g := range 4 {
				wg.Go(func() {
					me := string(rune('a'+i)) + string(rune('0'+g))
					for range 25 {
						h, err := p.Acquire(context.Background())
						if !assert.NoError(t, err) {
							return
						}
						mu.Lock()
						if other, busy := holders[h.ID()]; busy {
							t.Errorf("item %s held by %s and %s", h.ID(), other, me)
						}
						holders[h.ID()] = me
						mu.Unlock()
						time.Sleep(time.Second)
						mu.Lock()
						delete(holders, h.ID())
						mu.Unlock()
						h.Release()
					}
				})
			}
		}
		wg.Wait()
		time.Sleep(11 * time.Second) // a janitor pass returns parked items
		synctest.Wait()
		c, err = inv.Counts(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 0, c.InUse)
		assert.GreaterOrEqual(t, c.Idle, 2)
		assert.LessOrEqual(t, c.Idle, 4)
		live := len(f.liveIDs())
		assert.Equal(t, c.Idle, live, "every live item is in the shared idle set")
		assert.Equal(t, 0, f.counts().bad)
	})
}

// Reconcile on one instance never destroys an item another instance is
// using; the items of an instance that died are cleaned up as orphans once
// their records expire and the grace period has passed.
func TestSharedReconcileRespectsOtherInstances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inv := shared.NewMemoryInventory(nil)
		f := newFake()
		opts := pool.Options{MaxSize: 3, Inventory: inv, JanitorInterval: -1, OrphanGracePeriod: time.Minute}
		opts.Instance = "a"
		a := newPool(t, f, opts)
		opts.Instance = "b"
		opts.JanitorInterval = 10 * time.Second
		b := newPool(t, f, opts)

		h, err := a.Acquire(context.Background()) // a never heartbeats (no janitor)
		require.NoError(t, err)
		held, err := b.Acquire(context.Background())
		require.NoError(t, err)
		time.Sleep(80 * time.Second)
		synctest.Wait()
		assert.Contains(t, f.liveIDs(), h.ID(), "a's record is still live: b must not touch its item")
		assert.Contains(t, f.liveIDs(), held.ID(), "b heartbeats its own item")

		// a's record expires after 3 default janitor intervals (90 s); then
		// the grace period runs.
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		assert.NotContains(t, f.liveIDs(), h.ID(), "a dead instance's item is an orphan")
		assert.Contains(t, f.liveIDs(), held.ID())
		assert.Equal(t, uint64(1), b.Stats().Destroyed[pool.ReasonOrphan])
		held.Release()
		// a comes back: its release finds the record gone and destroys the
		// item (already gone at the provider: Destroy treats that as done).
		h.Release()
		synctest.Wait()
		assert.Equal(t, uint64(1), a.Stats().Destroyed[pool.ReasonLost])
	})
}

// With a shared Inventory the janitors expire and health-check the shared
// idle set, and an acquire never gets an expired item from it.
func TestSharedExpiryAndHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		inv := shared.NewMemoryInventory(nil)
		f := newFake()
		opts := pool.Options{MaxSize: 3, MaxIdle: 4, IdleTimeout: 2 * time.Minute, Inventory: inv,
			JanitorInterval: 10 * time.Second, HealthCheckInterval: 30 * time.Second}
		opts.Instance = "a"
		a := newPool(t, f, opts)
		opts.Instance = "b"
		b := newPool(t, f, opts)
		hs := acquireN(t, a, 3)
		releaseAll(hs)
		synctest.Wait()
		c, err := inv.Counts(ctx)
		require.NoError(t, err)
		require.Equal(t, shared.Counts{Idle: 3}, c)

		h, err := b.TryAcquire(ctx) // pops from the shared set
		require.NoError(t, err)
		assert.Contains(t, []string{hs[0].ID(), hs[1].ID(), hs[2].ID()}, h.ID())
		h.Release()
		f.set(func(f *fakeProv) { f.unhealthy[hs[1].ID()] = true })
		time.Sleep(31 * time.Second)
		synctest.Wait()
		assert.NotContains(t, f.liveIDs(), hs[1].ID())
		assert.Equal(t, uint64(1), a.Stats().Destroyed[pool.ReasonUnhealthy]+b.Stats().Destroyed[pool.ReasonUnhealthy])

		time.Sleep(3 * time.Minute)
		synctest.Wait()
		c, err = inv.Counts(ctx)
		require.NoError(t, err)
		assert.Equal(t, shared.Counts{}, c, "idle records pruned to zero")
		assert.Empty(t, f.liveIDs())
		assert.Equal(t, uint64(2), a.Stats().Destroyed["idle"]+b.Stats().Destroyed["idle"])
	})
}

func TestSharedPopSkipsExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		inv := shared.NewMemoryInventory(nil)
		f := newFake()
		// Two items another instance left in the shared idle set: w never
		// used, u used; both created now, with a lifetime of an hour.
		now := time.Now()
		for _, r := range []shared.Record{
			{ID: "w", Data: []byte(`{"id":"w"}`), Created: now, Deadline: now.Add(time.Hour)},
			{ID: "u", Data: []byte(`{"id":"u"}`), Created: now, Deadline: now.Add(time.Hour), LastUsed: now},
		} {
			f.adopt(r.ID, now)
			require.NoError(t, inv.Add(ctx, r, 0))
		}
		b := newPool(t, f, pool.Options{MaxSize: 2, MaxLifetime: time.Hour, WarmTTL: 10 * time.Minute,
			Inventory: inv, Instance: "b", JanitorInterval: -1})
		time.Sleep(30 * time.Minute) // w is past WarmTTL
		h, err := b.Acquire(ctx)
		require.NoError(t, err)
		assert.Equal(t, "u", h.ID(), "w was skipped")
		h.Release()
		synctest.Wait()
		assert.Equal(t, []string{"u"}, f.liveIDs())
		assert.Equal(t, uint64(1), b.Stats().Destroyed["warm_ttl"])
		time.Sleep(31 * time.Minute) // u is past its lifetime
		h, err = b.Acquire(ctx)
		require.NoError(t, err)
		assert.NotEqual(t, "u", h.ID(), "u was skipped")
		h.Release()
		synctest.Wait()
		assert.NotContains(t, f.liveIDs(), "u")
		assert.Contains(t, f.liveIDs(), h.ID())
		assert.Equal(t, uint64(1), b.Stats().Destroyed["lifetime"])
	})
}
