package redispool_test

import (
	"context"
	"fmt"
	"math/rand/v2"
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

const minIdle, maxIdle = 2, 4

// newFleet starts n pool instances on prov, each with its own Redis
// connection and Inventory over one shared prefix. Close is the caller's.
func newFleet(t *testing.T, r *redistest.Redis, prov *provider, n int, opts pool.Options) ([]*pool.Pool[box], []*redispool.Inventory) {
	t.Helper()
	invs := openViews(t, r, n)
	return startPools(t, prov, invs, opts), invs
}

// startPools starts one pool instance "gw-<i>" on prov per inventory, with
// opts and prov's event recorder. Close is the caller's.
func startPools(t *testing.T, prov *provider, invs []*redispool.Inventory, opts pool.Options) []*pool.Pool[box] {
	t.Helper()
	pools := make([]*pool.Pool[box], len(invs))
	for i, inv := range invs {
		o := opts
		o.Inventory = inv
		o.Instance = fmt.Sprintf("gw-%d", i)
		o.OnEvent = prov.onEvent(o.Instance)
		p, err := pool.New[box](prov, o)
		require.NoError(t, err)
		pools[i] = p
	}
	return pools
}

func closeAll(t *testing.T, pools []*pool.Pool[box]) {
	t.Helper()
	for _, p := range pools {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		assert.NoError(t, p.Close(cctx))
		cancel()
	}
}

// TestFleetSharesOneWarmPool runs three pool instances on separate Redis
// connections, sharing one inventory, under concurrent load (a sandbox system, issue
// 5). No item is ever handed to two holders at once, none is destroyed
// while held, even though instance 0 reconciles against the provider's
// list all along with a short orphan grace while the others hold items
// longer than it; the shared idle set never exceeds MaxIdle; and once the
// load stops the shared warm count settles within MinIdle..MaxIdle.
func TestFleetSharesOneWarmPool(t *testing.T) {
	const instances, workers, load = 3, 4, 1500 * time.Millisecond
	r := redistest.OpenRedis(t)
	prov := newProvider()
	pools, invs := newFleet(t, r, prov, instances, pool.Options{
		MinIdle: minIdle, MaxIdle: maxIdle, MaxSize: 6,
		IdleTimeout:         200 * time.Millisecond,
		JanitorInterval:     time.Second, // records in use live 3 s between heartbeats
		OrphanGracePeriod:   100 * time.Millisecond,
		HealthCheckInterval: -1,
	})
	defer closeAll(t, pools)

	var (
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		maxSeen atomic.Int64
		fails   errLog
	)
	acquired := fleetLoad(pools, prov, workers, 400*time.Millisecond, stop, &fails)
	wg.Go(func() { // the reconciler, and the idle limit watcher
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			assert.NoError(t, errOf(pools[0].Reconcile(ctx)))
			c, err := invs[1].Counts(ctx)
			if assert.NoError(t, err) && int64(c.Idle) > maxSeen.Load() {
				maxSeen.Store(int64(c.Idle))
			}
		}
	})
	time.Sleep(load)
	close(stop)
	wg.Wait()
	n := acquired()
	fails.none(t)

	assert.Empty(t, prov.report())
	// Reconcile reads the records before it lists the provider, so an item
	// another instance destroys and forgets meanwhile is never taken for an
	// orphan and destroyed again.
	assert.Zero(t, prov.destroyedTwice(), prov.twiceHistory())
	assert.Greater(t, n, int64(100), "too little load to mean anything")
	assert.LessOrEqual(t, maxSeen.Load(), int64(maxIdle), "shared idle set above MaxIdle")
	for _, p := range pools {
		assert.Zero(t, p.Stats().InUse)
	}

	// Settling: janitor passes on every instance prune the idle items above
	// MinIdle once IdleTimeout passes, and replenish to MinIdle.
	require.Eventually(t, func() bool {
		for _, p := range pools {
			_, _ = p.Tick(ctx)
		}
		c, err := invs[2].Counts(ctx)
		return err == nil && c.InUse == 0 && c.Reserved == 0 && c.Idle >= minIdle && c.Idle <= maxIdle
	}, 10*time.Second, 100*time.Millisecond)
	// Nothing leaked: every item the provider still has is a shared idle
	// record (reconcile destroys none of them), and vice versa.
	recs, err := invs[0].Records(ctx)
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, rec := range recs {
		ids[rec.ID] = true
		assert.Empty(t, rec.Owner)
	}
	assert.Equal(t, prov.liveIDs(), ids)
	assert.Empty(t, prov.report())
}

// TestReconcileSparesOtherInstancesItems: an item instance B holds, listed
// by the provider and far past the orphan grace, survives reconciliation on
// instance A; so does B's item after B's heartbeat kept its record alive.
func TestReconcileSparesOtherInstancesItems(t *testing.T) {
	r := redistest.OpenRedis(t)
	prov := newProvider()
	pools, _ := newFleet(t, r, prov, 2, pool.Options{
		JanitorInterval: -1, OrphanGracePeriod: time.Millisecond, HealthCheckInterval: -1,
	})
	defer closeAll(t, pools)
	a, b := pools[0], pools[1]
	h, err := b.Acquire(ctx)
	require.NoError(t, err)
	prov.hold(h.Value(), "b")
	time.Sleep(5 * time.Millisecond)
	require.NoError(t, errOf(a.Reconcile(ctx)))
	require.NoError(t, errOf(b.Tick(ctx))) // B's heartbeat (its prune step)
	require.NoError(t, errOf(a.Reconcile(ctx)))
	assert.True(t, prov.isLive(h.Value().ID), "A destroyed B's busy item")
	assert.Zero(t, a.Stats().Orphans)
	prov.unhold(h.Value())
	h.Release()
	require.NoError(t, errOf(a.Reconcile(ctx)))
	assert.True(t, prov.isLive(h.Value().ID), "A destroyed a shared idle item")
	assert.Empty(t, prov.report())
}

// TestCrashedInstanceRecordsExpire: an instance that dies holding an item
// leaves a record that protects the item only until its ttl passes (no
// heartbeat); then reconciliation anywhere destroys the item as an orphan.
func TestCrashedInstanceRecordsExpire(t *testing.T) {
	const ttl = 500 * time.Millisecond
	r := redistest.OpenRedis(t)
	prov := newProvider()
	pools, invs := newFleet(t, r, prov, 1, pool.Options{
		JanitorInterval: -1, OrphanGracePeriod: time.Millisecond, HealthCheckInterval: -1,
	})
	defer closeAll(t, pools)
	// The crashed instance registered its item, then died: no Touch.
	prov.add("dead-1", time.Now().Add(-time.Hour))
	crashed := newInventory(t, r.NewClient(t), poolPrefix(r))
	require.NoError(t, crashed.Add(ctx, shared.Record{ID: "dead-1", Owner: "gw-dead", Data: []byte(`{"id":"dead-1"}`)}, ttl))

	require.NoError(t, errOf(pools[0].Reconcile(ctx)))
	assert.True(t, prov.isLive("dead-1"), "destroyed while its record was live")
	require.Eventually(t, func() bool {
		c, err := invs[0].Counts(ctx)
		return err == nil && c.InUse == 0
	}, 5*time.Second, 20*time.Millisecond, "the crashed instance's record never expired")
	require.NoError(t, errOf(pools[0].Reconcile(ctx)))
	assert.False(t, prov.isLive("dead-1"), "the crashed instance's item leaked")
	assert.Equal(t, uint64(1), pools[0].Stats().Orphans)
	ok, err := r.Client.HExists(ctx, crashed.Keys()[3], "dead-1").Result()
	require.NoError(t, err)
	assert.False(t, ok, "the crashed instance's record is still stored")
}

// fleetLoad runs workers goroutines per pool until stop is closed, each
// acquiring an item, holding it a few milliseconds (worker 0: hold) and
// releasing it (one in ten: destroying it), every handout checked by prov.
// Failed acquires go to fails. The returned function waits for the
// workers and returns how many items they acquired.
func fleetLoad(pools []*pool.Pool[box], prov *provider, workers int, hold time.Duration, stop <-chan struct{}, fails *errLog) func() int64 {
	var (
		wg       sync.WaitGroup
		acquired atomic.Int64
	)
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
						fails.note(holder, err)
						time.Sleep(10 * time.Millisecond)
						continue
					}
					acquired.Add(1)
					prov.hold(h.Value(), holder)
					d := time.Duration(rnd.IntN(3)) * time.Millisecond
					if w == 0 {
						d = hold
					}
					time.Sleep(d)
					prov.unhold(h.Value())
					if rnd.IntN(10) == 0 {
						h.Destroy("evicted")
					} else {
						h.Release()
					}
				}
			})
		}
	}
	return func() int64 { wg.Wait(); return acquired.Load() }
}

// errLog records failed calls with their time.
type errLog struct {
	mu   sync.Mutex
	errs []timedErr
}

type timedErr struct {
	at   time.Time
	what string
	err  error
}

func (l *errLog) note(what string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, timedErr{time.Now(), what, err})
}

func (l *errLog) all() []timedErr {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]timedErr(nil), l.errs...)
}

// none fails t for every recorded failure.
func (l *errLog) none(t *testing.T) {
	t.Helper()
	for _, e := range l.all() {
		t.Errorf("%s failed at %s: %v", e.what, e.at.Format(time.StampMilli), e.err)
	}
}
