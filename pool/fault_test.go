package pool_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/shared"
)

var errLostReply = errors.New("connection reset: reply lost")

// lossyInv wraps an Inventory with faults. A Put or Add counted in putLost
// or addLost goes through and then returns an error, as when the reply is
// lost; one counted in putFail or addFail returns an error without going
// through. While addGate is set, Add waits for it to close before it goes
// through (a call still in flight).
type lossyInv struct {
	shared.Inventory
	mu                                            sync.Mutex
	putLost, putFail, addLost, addFail, touchFail int
	addGate                                       chan struct{}
}

func (l *lossyInv) set(fn func(l *lossyInv)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn(l)
}

func (l *lossyInv) take(n *int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if *n > 0 {
		*n--
		return true
	}
	return false
}

func (l *lossyInv) Put(ctx context.Context, rec shared.Record, maxIdle int, ttl time.Duration) (bool, error) {
	if l.take(&l.putFail) {
		return false, errLostReply
	}
	ok, err := l.Inventory.Put(ctx, rec, maxIdle, ttl)
	if err == nil && l.take(&l.putLost) {
		return false, errLostReply
	}
	return ok, err
}

func (l *lossyInv) Touch(ctx context.Context, owner string, ids []string, ttl time.Duration) ([]string, error) {
	if l.take(&l.touchFail) {
		return nil, errLostReply
	}
	return l.Inventory.Touch(ctx, owner, ids, ttl)
}

func (l *lossyInv) Add(ctx context.Context, rec shared.Record, ttl time.Duration) error {
	l.mu.Lock()
	gate := l.addGate
	l.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if l.take(&l.addFail) {
		return errLostReply
	}
	err := l.Inventory.Add(ctx, rec, ttl)
	if err == nil && l.take(&l.addLost) {
		return errLostReply
	}
	return err
}

// guarded is a fakeProv that checks, on every Destroy, that the item is not
// idle in the shared inventory (another instance could pop it), and lets
// tests act in the middle of List and Destroy.
type guarded struct {
	*fakeProv
	inv       shared.Inventory // nil: no check
	mu        sync.Mutex
	problems  []string
	onList    func()
	onDestroy func(box)
}

func guard(f *fakeProv, inv shared.Inventory) *guarded { return &guarded{fakeProv: f, inv: inv} }

func (g *guarded) List(ctx context.Context) ([]pool.Listed[box], error) {
	l, err := g.fakeProv.List(ctx)
	g.mu.Lock()
	hook := g.onList
	g.onList = nil
	g.mu.Unlock()
	if hook != nil {
		hook()
	}
	return l, err
}

func (g *guarded) Destroy(ctx context.Context, b box) error {
	if g.inv != nil {
		recs, err := g.inv.Records(ctx)
		g.mu.Lock()
		if err != nil {
			g.problems = append(g.problems, err.Error())
		}
		for _, r := range recs {
			if r.ID == b.ID && r.Owner == "" {
				g.problems = append(g.problems, fmt.Sprintf("%s destroyed while idle in the shared inventory", b.ID))
			}
		}
		g.mu.Unlock()
	}
	g.mu.Lock()
	hook := g.onDestroy
	g.mu.Unlock()
	if hook != nil {
		hook(b)
	}
	return g.fakeProv.Destroy(ctx, b)
}

func (g *guarded) set(fn func(g *guarded)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fn(g)
}

func (g *guarded) problemList() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.problems...)
}

// recordOf returns the live record id in inv.
func recordOf(t *testing.T, inv shared.Inventory, id string) (shared.Record, bool) {
	t.Helper()
	recs, err := inv.Records(context.Background())
	require.NoError(t, err)
	for _, r := range recs {
		if r.ID == id {
			return r, true
		}
	}
	return shared.Record{}, false
}

// A release whose Put fails, whether or not the call went through, never
// destroys an item that may sit in the shared idle set, where another
// instance can pop it; the item goes back to the fleet.
func TestSharedReleasePutFails(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(l *lossyInv)
	}{
		{"reply lost", func(l *lossyInv) { l.putLost = 1 }},
		{"call failed", func(l *lossyInv) { l.putFail = 1 }},
		{"failed then reply lost", func(l *lossyInv) { l.putFail, l.putLost = 1, 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				mem := shared.NewMemoryInventory(nil)
				lossy := &lossyInv{Inventory: mem}
				f := newFake()
				g := guard(f, mem)
				opts := pool.Options{MaxSize: 2, JanitorInterval: -1, Inventory: lossy, Instance: "a"}
				a := newPool(t, g, opts)
				opts.Inventory, opts.Instance = mem, "b"
				b := newPool(t, g, opts)

				h, err := a.Acquire(ctx)
				require.NoError(t, err)
				id := h.ID()
				lossy.set(tc.fault)
				h.Release()
				synctest.Wait()
				assert.Empty(t, g.problemList())
				assert.Equal(t, []string{id}, f.liveIDs(), "the item is not destroyed")
				r, ok := recordOf(t, mem, id)
				require.True(t, ok)
				assert.Empty(t, r.Owner, "the item is in the shared idle set")

				hb, err := b.Acquire(ctx)
				require.NoError(t, err)
				assert.Equal(t, id, hb.ID())
				hb.Release()
				synctest.Wait()
				assert.Zero(t, f.counts().bad)
				assert.Equal(t, 1, f.counts().creates)
				assert.Zero(t, a.Stats().Destroyed[pool.ReasonLost])
			})
		})
	}
}

// A release whose Put keeps failing: while the Inventory says the record is
// still this instance's, the item is destroyed (nobody else can have it);
// when it cannot say, the item is left to its record's ttl and to
// Reconcile, which destroys it as an orphan once the record expired.
func TestSharedReleasePutKeepsFailing(t *testing.T) {
	for _, touchFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("touch_fails=%v", touchFails), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				mem := shared.NewMemoryInventory(nil)
				lossy := &lossyInv{Inventory: mem}
				f := newFake()
				g := guard(f, mem)
				opts := pool.Options{MaxSize: 2, JanitorInterval: -1, OrphanGracePeriod: time.Minute, Inventory: lossy, Instance: "a"}
				a := newPool(t, g, opts)
				opts.Inventory, opts.Instance = mem, "b"
				b := newPool(t, g, opts)
				h, err := a.Acquire(ctx)
				require.NoError(t, err)
				id := h.ID()
				lossy.set(func(l *lossyInv) {
					l.putFail = 3
					if touchFails {
						l.touchFail = 3
					}
				})
				h.Release()
				synctest.Wait()
				assert.Empty(t, g.problemList())
				if !touchFails {
					assert.Empty(t, f.liveIDs())
					assert.Equal(t, uint64(1), a.Stats().Destroyed[pool.ReasonLost])
					_, recorded := recordOf(t, mem, id)
					assert.False(t, recorded)
					return
				}
				assert.Equal(t, []string{id}, f.liveIDs(), "not destroyed: its record may be idle")
				r, ok := recordOf(t, mem, id)
				require.True(t, ok)
				assert.Equal(t, "a", r.Owner)
				assert.Zero(t, a.Stats().Size, "forgotten by a")
				time.Sleep(91 * time.Second) // the in-use record expires
				require.NoError(t, errOf(b.Reconcile(ctx)))
				assert.Empty(t, f.liveIDs())
				assert.Equal(t, uint64(1), b.Stats().Orphans)
				assert.Zero(t, f.counts().bad)
			})
		})
	}
}

// The warm create's Add and Put: a failed call that went through is
// noticed, and the new item is never destroyed while it may be idle.
func TestSharedWarmCreateInventoryFails(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(l *lossyInv)
	}{
		{"add reply lost", func(l *lossyInv) { l.addLost = 1 }},
		{"add failed", func(l *lossyInv) { l.addFail = 1 }},
		{"put reply lost", func(l *lossyInv) { l.putLost = 1 }},
		{"put failed", func(l *lossyInv) { l.putFail = 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := shared.NewMemoryInventory(nil)
				lossy := &lossyInv{Inventory: mem}
				tc.fault(lossy)
				f := newFake()
				g := guard(f, mem)
				a := newPool(t, g, pool.Options{MinIdle: 1, MaxSize: 2, JanitorInterval: -1, Inventory: lossy, Instance: "a"})
				synctest.Wait()
				assert.Empty(t, g.problemList())
				c, err := mem.Counts(context.Background())
				require.NoError(t, err)
				assert.Equal(t, shared.Counts{Idle: 1}, c)
				assert.Equal(t, counts{live: 1, creates: 1, maxLive: 1}, f.counts(), "one create, nothing destroyed")
				assert.Equal(t, uint64(1), a.Stats().Creates)
			})
		})
	}
}

// Same for an item created for a waiter: an Add whose reply was lost
// leaves the item in use by its caller, not destroyed.
func TestSharedCreateAddReplyLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := shared.NewMemoryInventory(nil)
		lossy := &lossyInv{Inventory: mem, addLost: 1}
		f := newFake()
		a := newPool(t, guard(f, mem), pool.Options{MaxSize: 2, JanitorInterval: -1, Inventory: lossy, Instance: "a"})
		h, err := a.Acquire(context.Background())
		require.NoError(t, err)
		r, ok := recordOf(t, mem, h.ID())
		require.True(t, ok)
		assert.Equal(t, "a", r.Owner)
		h.Release()
		synctest.Wait()
		assert.Equal(t, counts{live: 1, creates: 1, maxLive: 1}, f.counts())
	})
}

// CheckHealth puts a healthy item back; if that Put's reply is lost the
// item is in the shared idle set and must not be destroyed.
func TestSharedCheckHealthPutReplyLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := shared.NewMemoryInventory(nil)
		lossy := &lossyInv{Inventory: mem}
		f := newFake()
		g := guard(f, mem)
		a := newPool(t, g, pool.Options{MaxSize: 2, JanitorInterval: -1, HealthCheckInterval: -1, Inventory: lossy, Instance: "a"})
		releaseAll(acquireN(t, a, 2))
		synctest.Wait()
		lossy.set(func(l *lossyInv) { l.putLost = 2 })
		require.NoError(t, errOf(a.CheckHealth(ctx)))
		synctest.Wait()
		assert.Empty(t, g.problemList())
		c, err := mem.Counts(ctx)
		require.NoError(t, err)
		assert.Equal(t, shared.Counts{Idle: 2}, c)
		assert.Len(t, f.liveIDs(), 2)
	})
}

// An item its owner destroys while Reconcile runs (between the provider's
// list and the pool's own records) is not taken for an orphan and
// destroyed a second time, locally or on another instance.
func TestReconcileSparesItemDestroyedMeanwhile(t *testing.T) {
	for _, isShared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", isShared), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				f := newFake()
				var inv shared.Inventory
				if isShared {
					inv = shared.NewMemoryInventory(nil)
				}
				g := guard(f, inv)
				// In-use records live 90 s without heartbeats (JanitorInterval
				// -1 stands for the default 30 s).
				opts := pool.Options{MaxSize: 2, JanitorInterval: -1, OrphanGracePeriod: 30 * time.Second, Inventory: inv, Instance: "a"}
				a := newPool(t, g, opts)
				r := a
				if isShared {
					opts.Instance = "b"
					r = newPool(t, g, opts)
				}
				h, err := a.Acquire(ctx)
				require.NoError(t, err)
				time.Sleep(time.Minute) // older than the grace period
				g.set(func(g *guarded) {
					g.onList = func() {
						h.Destroy(pool.ReasonUnhealthy)
						synctest.Wait()
					}
				})
				require.NoError(t, errOf(r.Reconcile(ctx)))
				time.Sleep(2 * time.Second)
				synctest.Wait()
				assert.Equal(t, counts{creates: 1, destroys: 1, maxLive: 1}, f.counts(), "destroyed once")
				assert.Zero(t, r.Stats().Orphans)
			})
		})
	}
}

// Two Reconcile passes at once destroy an orphan once.
func TestConcurrentReconcileDestroysOrphanOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		g := guard(f, nil)
		g.onDestroy = func(box) { time.Sleep(time.Second) }
		p := newPool(t, g, pool.Options{JanitorInterval: -1, OrphanGracePeriod: time.Minute})
		f.adopt("orphan-1", time.Now().Add(-time.Hour))
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { assert.NoError(t, errOf(p.Reconcile(context.Background()))) })
		}
		wg.Wait()
		assert.Equal(t, counts{destroys: 1, maxLive: 0}, f.counts())
		assert.Equal(t, uint64(1), p.Stats().Orphans)
	})
}

// The sandbox system's orphan grace race: a warm item whose Add is still in flight
// when another instance's Reconcile takes it for an orphan. Whether the Add
// lands while the orphan is being destroyed (ErrExists) or after its claim
// is gone, the creator neither destroys it again nor offers it to the fleet.
func TestSharedOrphanClaimedWhileAddInFlight(t *testing.T) {
	for _, landsAfterRemove := range []bool{false, true} {
		t.Run(fmt.Sprintf("lands_after_remove=%v", landsAfterRemove), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				mem := shared.NewMemoryInventory(nil)
				gate := make(chan struct{})
				lossy := &lossyInv{Inventory: mem, addGate: gate}
				f := newFake()
				g := guard(f, mem)
				opts := pool.Options{MaxSize: 2, JanitorInterval: -1, OrphanGracePeriod: time.Minute}
				opts.MinIdle, opts.Inventory, opts.Instance = 1, lossy, "a"
				a := newPool(t, g, opts)
				opts.MinIdle, opts.Inventory, opts.Instance = 0, mem, "b"
				b := newPool(t, g, opts)
				synctest.Wait() // a's Add is held
				ids := f.liveIDs()
				require.Len(t, ids, 1)
				id := ids[0]
				var opened atomic.Bool
				open := func() {
					if opened.CompareAndSwap(false, true) {
						lossy.set(func(l *lossyInv) { l.addGate = nil })
						close(gate)
						synctest.Wait()
					}
				}
				if !landsAfterRemove {
					g.set(func(g *guarded) { g.onDestroy = func(box) { open() } })
				}
				time.Sleep(2 * time.Minute)
				require.NoError(t, errOf(b.Reconcile(ctx)))
				if landsAfterRemove {
					open()
				}
				synctest.Wait()
				assert.Equal(t, uint64(1), b.Stats().Orphans)
				assert.NotContains(t, f.liveIDs(), id)
				_, recorded := recordOf(t, mem, id)
				assert.False(t, recorded, "the destroyed item is not in the inventory")
				assert.Zero(t, f.counts().bad, "destroyed once")
				assert.Equal(t, 1, f.counts().destroys)
				assert.Zero(t, a.Stats().DestroyErrors+b.Stats().DestroyErrors)
				assert.Empty(t, g.problemList())
				_, _ = a.Replenish(ctx) // a warm item again
				synctest.Wait()
				h, err := b.Acquire(ctx)
				require.NoError(t, err)
				assert.NotEqual(t, id, h.ID())
				assert.Contains(t, f.liveIDs(), h.ID())
				h.Release()
			})
		})
	}
}

// An item whose Create returned after CreateTimeout is destroyed by its
// pool; a Reconcile meanwhile (locally, or on another instance) does not
// take it for an orphan and destroy it a second time.
func TestLateCreateDestroyedOnce(t *testing.T) {
	for _, isShared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", isShared), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				f := newFake()
				var inv shared.Inventory
				if isShared {
					inv = shared.NewMemoryInventory(nil)
				}
				g := guard(f, inv)
				hang := make(chan struct{})
				f.hang = hang
				opts := pool.Options{MaxSize: 1, CreateTimeout: 10 * time.Second, JanitorInterval: -1,
					OrphanGracePeriod: time.Millisecond, Inventory: inv, Instance: "a"}
				a := newPool(t, g, opts)
				r := a
				if isShared {
					opts.Instance = "b"
					r = newPool(t, g, opts)
				}
				_, err := a.Acquire(ctx)
				require.ErrorIs(t, err, pool.ErrCreateTimeout)
				f.set(func(f *fakeProv) { f.hang = nil })
				g.set(func(g *guarded) { g.onDestroy = func(box) { time.Sleep(time.Second) } })
				close(hang) // the late item is being destroyed for a second
				time.Sleep(10 * time.Millisecond)
				require.Len(t, f.liveIDs(), 1)
				require.NoError(t, errOf(r.Reconcile(ctx)))
				time.Sleep(2 * time.Second)
				synctest.Wait()
				assert.Equal(t, counts{creates: 1, destroys: 1, maxLive: 1}, f.counts(), "destroyed once")
				assert.Zero(t, r.Stats().Orphans)
				assert.Equal(t, uint64(1), a.Stats().Destroyed[pool.ReasonOrphan])
			})
		})
	}
}
