package pool_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/shared"
)

func acquireN(t *testing.T, p *pool.Pool[box], n int) []*pool.Handle[box] {
	t.Helper()
	var hs []*pool.Handle[box]
	for range n {
		h, err := p.Acquire(context.Background())
		require.NoError(t, err)
		hs = append(hs, h)
	}
	return hs
}

func releaseAll(hs []*pool.Handle[box]) {
	for _, h := range hs {
		h.Release()
	}
}

// A serverless gateway's scale to zero: with MinIdle 0, idle items go after IdleTimeout.
func TestIdlePrunedToZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MaxSize: 5, IdleTimeout: 300 * time.Second, JanitorInterval: 30 * time.Second})
		releaseAll(acquireN(t, p, 3))
		time.Sleep(270 * time.Second)
		synctest.Wait()
		assert.Equal(t, 3, p.Stats().Idle, "not idle long enough yet")
		hs := acquireN(t, p, 1) // used again: its idle clock restarts
		releaseAll(hs)
		time.Sleep(60 * time.Second)
		synctest.Wait()
		assert.Equal(t, 1, p.Stats().Idle)
		assert.Equal(t, []string{hs[0].ID()}, f.liveIDs())
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		s := p.Stats()
		assert.Equal(t, 0, s.Idle)
		assert.Equal(t, 0, s.Size)
		assert.Equal(t, uint64(3), s.Destroyed["idle"])
		assert.Empty(t, f.liveIDs())
	})
}

// IdleTimeout applies only above MinIdle.
func TestIdlePrunedDownToMinIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MinIdle: 2, MaxSize: 6, IdleTimeout: time.Minute, JanitorInterval: 10 * time.Second})
		releaseAll(acquireN(t, p, 6))
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		s := p.Stats()
		assert.Equal(t, 2, s.Idle)
		assert.Equal(t, uint64(4), s.Destroyed["idle"])
	})
}

func TestMaxLifetime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MaxSize: 4, MaxLifetime: 8 * time.Hour, LifetimeJitter: 30 * time.Minute, IdleTimeout: -1, JanitorInterval: time.Minute})
		hs := acquireN(t, p, 2)
		hs[1].Release()
		time.Sleep(8*time.Hour + time.Second)
		synctest.Wait()
		// The janitor destroyed the idle one; the held one goes on release.
		s := p.Stats()
		assert.Equal(t, uint64(1), s.Destroyed["lifetime"])
		assert.Equal(t, 1, s.InUse)
		hs[0].Release()
		synctest.Wait()
		s = p.Stats()
		assert.Equal(t, uint64(2), s.Destroyed["lifetime"])
		assert.Equal(t, 0, s.Size)
		assert.Empty(t, f.liveIDs())
	})
}

// Zero means the default and a negative duration switches the behaviour
// off: an idle item goes after 30 minutes by default, and an item after an
// hour; -1 keeps them.
func TestZeroIsDefaultNegativeIsOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		byDefault := newPool(t, newFake(), pool.Options{MaxSize: 2})
		off := newPool(t, newFake(), pool.Options{MaxSize: 2, IdleTimeout: -1, MaxLifetime: -1, WarmTTL: -1, OrphanGracePeriod: -1})
		for _, p := range []*pool.Pool[box]{byDefault, off} {
			releaseAll(acquireN(t, p, 2))
		}
		time.Sleep(30*time.Minute + time.Minute)
		synctest.Wait()
		assert.Equal(t, uint64(2), byDefault.Stats().Destroyed["idle"], "idle for 30 minutes")
		assert.Equal(t, 2, off.Stats().Idle, "IdleTimeout -1 keeps idle items")

		h, err := byDefault.Acquire(context.Background())
		require.NoError(t, err)
		time.Sleep(time.Hour)
		h.Release()
		synctest.Wait()
		assert.Equal(t, uint64(1), byDefault.Stats().Destroyed["lifetime"], "an hour's lifetime")
		time.Sleep(10 * time.Hour)
		synctest.Wait()
		assert.Equal(t, 2, off.Stats().Idle, "MaxLifetime -1 keeps items for good")
		assert.Zero(t, off.Stats().Destroyed["lifetime"]+off.Stats().Destroyed["warm_ttl"])
	})
}

// An idle item whose lifetime ends between janitor passes is never handed
// out; jitter shortens lifetimes, never lengthens them.
func TestLifetimeOnAcquireWithJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MaxSize: 8, MaxLifetime: time.Hour, LifetimeJitter: 20 * time.Minute, JanitorInterval: -1})
		hs := acquireN(t, p, 8)
		ids := map[string]bool{}
		for _, h := range hs {
			ids[h.ID()] = true
		}
		releaseAll(hs)
		time.Sleep(40 * time.Minute)
		assert.Equal(t, 8, p.Stats().Idle, "jitter is below 20 minutes")
		time.Sleep(20 * time.Minute)
		h, err := p.Acquire(context.Background())
		require.NoError(t, err)
		assert.False(t, ids[h.ID()], "an expired item was handed out")
		h.Release()
		synctest.Wait()
		assert.Equal(t, uint64(8), p.Stats().Destroyed["lifetime"])
	})
}

// A sandbox system: a warm item never used within WarmTTL (30 min) is replaced.
func TestWarmTTLReplaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MinIdle: 2, MaxSize: 10, WarmTTL: 30 * time.Minute, JanitorInterval: time.Minute})
		synctest.Wait()
		first := f.liveIDs()
		require.Len(t, first, 2)
		h := acquireN(t, p, 1)[0]
		h.Release() // used: WarmTTL no longer applies to it
		synctest.Wait()
		time.Sleep(31 * time.Minute)
		synctest.Wait()
		s := p.Stats()
		assert.Equal(t, uint64(2), s.Destroyed["warm_ttl"], "the two never-used warm items")
		assert.Contains(t, f.liveIDs(), h.ID(), "the used item stays")
		assert.Equal(t, 2, s.Idle, "the used one and one replacement")
	})
}

// A sandbox system: health checks every 30 s replace unhealthy idle items.
func TestUnhealthyReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MinIdle: 2, MaxSize: 4, HealthCheckInterval: 30 * time.Second})
		synctest.Wait()
		ids := f.liveIDs()
		require.Len(t, ids, 2)
		f.set(func(f *fakeProv) { f.unhealthy[ids[0]] = true })
		time.Sleep(31 * time.Second)
		synctest.Wait()
		s := p.Stats()
		assert.Equal(t, uint64(1), s.Destroyed[pool.ReasonUnhealthy])
		assert.Equal(t, 2, s.Idle, "replaced")
		assert.NotContains(t, f.liveIDs(), ids[0])
		assert.Contains(t, f.liveIDs(), ids[1])
	})
}

// A serverless gateway: an item the provider lists but the pool does not know is
// destroyed, but only after the orphan grace period.
func TestOrphanDestroyedAfterGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MaxSize: 4, JanitorInterval: 10 * time.Second, OrphanGracePeriod: 60 * time.Second})
		h := acquireN(t, p, 1)[0]
		f.adopt("orphan-1", time.Now())
		time.Sleep(55 * time.Second)
		synctest.Wait()
		assert.Contains(t, f.liveIDs(), "orphan-1", "protected by the grace period")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		assert.NotContains(t, f.liveIDs(), "orphan-1")
		assert.Contains(t, f.liveIDs(), h.ID(), "known items are never orphans")
		s := p.Stats()
		assert.Equal(t, uint64(1), s.Orphans)
		assert.Equal(t, uint64(1), s.Destroyed[pool.ReasonOrphan])
		h.Release()
	})
}

// An orphan without a creation time is timed from when Reconcile first saw
// it.
func TestOrphanWithoutCreatedTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{JanitorInterval: -1, OrphanGracePeriod: time.Minute})
		f.adopt("x", time.Time{})
		ctx := context.Background()
		require.NoError(t, errOf(p.Reconcile(ctx)))
		time.Sleep(59 * time.Second)
		require.NoError(t, errOf(p.Reconcile(ctx)))
		assert.Contains(t, f.liveIDs(), "x")
		time.Sleep(time.Second)
		require.NoError(t, errOf(p.Reconcile(ctx)))
		assert.NotContains(t, f.liveIDs(), "x")
	})
}

// A known item the provider no longer lists is dropped and replaced.
func TestLostItemDroppedAndReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MinIdle: 2, MaxSize: 4, JanitorInterval: -1})
		synctest.Wait()
		ids := f.liveIDs()
		require.Len(t, ids, 2)
		busy := acquireN(t, p, 1)[0]
		synctest.Wait() // refilled to 2 idle
		f.vanish(busy.ID())
		idle := f.liveIDs()
		f.vanish(idle[0])
		time.Sleep(time.Second)
		require.NoError(t, errOf(p.Reconcile(context.Background())))
		synctest.Wait()
		s := p.Stats()
		assert.Equal(t, uint64(1), s.Destroyed[pool.ReasonLost], "the idle one is dropped at once")
		assert.Equal(t, 2, s.Idle, "and replaced")
		busy.Release() // the busy one is dropped on release
		synctest.Wait()
		assert.Equal(t, uint64(2), p.Stats().Destroyed[pool.ReasonLost])
		assert.Equal(t, 2, p.Stats().Idle)
	})
}

// A serverless gateway's start-up cleanup: leftovers of an earlier process are destroyed
// before warm items are created, which are kept.
func TestCleanupOnStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		f.prefix = "new"
		for _, id := range []string{"old1", "old2", "old3"} {
			f.adopt(id, time.Now().Add(-time.Hour))
		}
		f.adopt("old-unknown-age", time.Time{})
		time.Sleep(time.Second)
		p := newPool(t, f, pool.Options{MinIdle: 2, MaxSize: 4, CleanupOnStart: true})
		synctest.Wait()
		assert.Equal(t, []string{"new1", "new2"}, f.liveIDs())
		s := p.Stats()
		assert.Equal(t, uint64(4), s.Destroyed[pool.ReasonOrphan])
		assert.Equal(t, 2, s.Idle)
	})
}

// With a shared Inventory, a new instance's start-up cleanup leaves the
// items another instance is still creating (listed by the provider, not
// yet recorded) and takes only the leftovers older than the grace period.
func TestCleanupOnStartShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		f.startDelay = 3 * time.Second
		f.adopt("leftover", time.Now().Add(-time.Hour))
		inv := shared.NewMemoryInventory(nil)
		opts := pool.Options{MinIdle: 1, MaxSize: 2, Inventory: inv, Instance: "a", OrphanGracePeriod: 10 * time.Second, JanitorInterval: time.Minute}
		newPool(t, f, opts)
		time.Sleep(time.Second) // a's warm create is under way: its item is listed
		creating := f.liveIDs()
		require.Len(t, creating, 2)

		opts.Instance, opts.CleanupOnStart = "b", true
		b := newPool(t, f, opts)
		synctest.Wait()
		assert.NotContains(t, f.liveIDs(), "leftover")
		for _, id := range creating {
			if id != "leftover" {
				assert.Contains(t, f.liveIDs(), id, "a's create in flight is spared")
			}
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		c, err := inv.Counts(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 1, c.Idle, "a's create finished and is the warm item")
		assert.Equal(t, uint64(1), b.Stats().Orphans)
	})
}

// The janitor steps work on a clock.Mock too (injection path; no synctest).
func TestClockMock(t *testing.T) {
	mock := clock.NewMock()
	f := newFake()
	p, err := pool.New[box](f, pool.Options{MaxSize: 3, IdleTimeout: time.Minute, MaxLifetime: time.Hour, JanitorInterval: -1, Clock: mock})
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Close(context.Background())) }()
	ctx := context.Background()
	releaseAll(acquireN(t, p, 2))
	mock.Add(30 * time.Second)
	require.NoError(t, errOf(p.Prune(ctx)))
	assert.Equal(t, 2, p.Stats().Idle)
	mock.Add(31 * time.Second)
	require.NoError(t, errOf(p.Prune(ctx)))
	assert.Equal(t, 0, p.Stats().Idle)
	require.Eventually(t, func() bool { return p.Stats().Destroyed["idle"] == 2 }, 5*time.Second, time.Millisecond)
	assert.Empty(t, f.liveIDs())
	h, err := p.Acquire(ctx)
	require.NoError(t, err)
	assert.Equal(t, mock.Now(), h.CreatedAt())
	h.Release()
}

// An item the provider already lists while its Create is still running is
// not an orphan, however long the create takes: a 3 s start, a 1 s grace
// period and a janitor every 200 ms must not destroy the new worker.
func TestReconcileSparesCreateInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		f.startDelay = 3 * time.Second
		p := newPool(t, f, pool.Options{MaxSize: 2, OrphanGracePeriod: time.Second, JanitorInterval: 200 * time.Millisecond})
		h, err := p.Acquire(context.Background())
		require.NoError(t, err)
		assert.Equal(t, []string{h.ID()}, f.liveIDs())
		s := p.Stats()
		assert.Zero(t, s.Orphans)
		assert.Zero(t, s.Destroyed[pool.ReasonOrphan])
		h.Destroy("evicted")

		// Real orphans are still destroyed: one older than the create in
		// flight at once, one listed during it once the create has ended
		// and its grace period has passed.
		f.adopt("orphan-old", time.Now().Add(-time.Hour))
		f.adopt("orphan-new", time.Now())
		done := make(chan struct{})
		go func() {
			defer close(done)
			h, err := p.Acquire(context.Background())
			if assert.NoError(t, err) {
				h.Release()
			}
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		assert.NotContains(t, f.liveIDs(), "orphan-old")
		assert.Contains(t, f.liveIDs(), "orphan-new")
		<-done
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.NotContains(t, f.liveIDs(), "orphan-new")
		assert.Len(t, f.liveIDs(), 1)
		assert.Equal(t, uint64(2), p.Stats().Orphans)
	})
}

// A provider may date an item a little before its create began (a process
// dated to clock ticks from a boot time read to 10 ms): neither start-up
// Cleanup nor Reconcile may take the item of a create still running for a
// leftover or an orphan because of that.
func TestCoarseProviderClockSparesCreateInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		f.startDelay = 2 * time.Second
		f.dateEarly = 20 * time.Millisecond
		p := newPool(t, f, pool.Options{MaxSize: 2, OrphanGracePeriod: time.Millisecond, JanitorInterval: -1})
		done := make(chan struct{})
		go func() {
			defer close(done)
			h, err := p.Acquire(context.Background())
			if assert.NoError(t, err, "the create's item survived") {
				h.Release()
			}
		}()
		synctest.Wait() // the item is listed; its create waits for it to start
		require.Len(t, f.liveIDs(), 1)
		_, err := p.Cleanup(context.Background())
		require.NoError(t, err)
		time.Sleep(100 * time.Millisecond) // older than the grace period
		_, err = p.Reconcile(context.Background())
		require.NoError(t, err)
		assert.Len(t, f.liveIDs(), 1, "neither step destroyed the item being created")
		assert.Zero(t, p.Stats().Orphans)
		<-done
	})
}
