package pool_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/shared"
)

// owners is an application's record of the items it detached: the
// assignments a sandbox system keeps in its database.
type owners struct {
	mu   sync.Mutex
	ids  map[string]bool
	fail error
}

func (o *owners) add(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ids[id] = true
}

func (o *owners) owned(_ context.Context, ids []string) ([]string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.fail != nil {
		return nil, o.fail
	}
	var out []string
	for _, id := range ids {
		if o.ids[id] {
			out = append(out, id)
		}
	}
	return out, nil
}

// A detached item leaves the pool for good: capacity and the warm target
// are refilled, and neither the janitor's Reconcile (on any instance of a
// shared pool) nor a later instance's start-up Cleanup destroys it while
// Options.Owned reports it; once the application stops owning it, it is an
// orphan like any other.
func TestDetach(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFake()
		own := &owners{ids: map[string]bool{}}
		inv := shared.NewMemoryInventory(nil)
		var mu sync.Mutex
		var kinds []pool.EventKind
		opts := pool.Options{MinIdle: 1, MaxSize: 2, Inventory: inv, Instance: "a", Owned: own.owned,
			OrphanGracePeriod: time.Minute, JanitorInterval: 10 * time.Second,
			OnEvent: func(e pool.Event) { mu.Lock(); kinds = append(kinds, e.Kind); mu.Unlock() }}
		a := newPool(t, f, opts)
		opts.Instance, opts.OnEvent = "b", nil
		b := newPool(t, f, opts)
		synctest.Wait()

		h, err := a.Acquire(ctx)
		require.NoError(t, err)
		id := h.ID()
		own.add(id) // recorded before it is detached
		got := h.Detach()
		assert.Equal(t, id, got.ID)
		assert.Panics(t, func() { h.Release() }, "a detached handle is released")
		synctest.Wait()

		s := a.Stats()
		assert.Equal(t, uint64(1), s.Detached)
		assert.Zero(t, s.InUse)
		c, err := inv.Counts(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, c.Idle, "the warm target is refilled")
		recs, err := inv.Records(ctx)
		require.NoError(t, err)
		for _, r := range recs {
			assert.NotEqual(t, id, r.ID, "the detached item's record is removed")
		}
		// Capacity is free again: two more items can be in use at once.
		hs := acquireN(t, a, 2)
		releaseAll(hs)

		time.Sleep(5 * time.Minute) // many janitor passes, far past the grace period
		synctest.Wait()
		assert.Contains(t, f.liveIDs(), id, "an owned item is never an orphan")
		assert.Positive(t, a.Stats().Spared+b.Stats().Spared)
		assert.Zero(t, a.Stats().Orphans+b.Stats().Orphans)

		// A new instance's start-up cleanup spares it too.
		opts.Instance, opts.CleanupOnStart = "c", true
		newPool(t, f, opts)
		synctest.Wait()
		assert.Contains(t, f.liveIDs(), id)

		// If the owner cannot be asked, no orphan is destroyed.
		f.adopt("stray", time.Now().Add(-time.Hour))
		own.mu.Lock()
		own.fail = errors.New("database down")
		own.mu.Unlock()
		_, err = a.Reconcile(ctx)
		assert.ErrorContains(t, err, "database down")
		assert.Contains(t, f.liveIDs(), "stray")

		// The application destroys it when done, or lets it go: then it is
		// an orphan.
		own.mu.Lock()
		own.fail = nil
		delete(own.ids, id)
		own.mu.Unlock()
		res, err := a.Reconcile(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, res.Orphans)
		assert.NotContains(t, f.liveIDs(), id)
		assert.NotContains(t, f.liveIDs(), "stray")
		mu.Lock()
		assert.Contains(t, kinds, pool.EventDetached)
		mu.Unlock()
		assert.Equal(t, "detached", pool.EventDetached.String())
	})
}

// Close does not wait for, or destroy, a detached item.
func TestDetachSurvivesClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p, err := pool.New[box](f, pool.Options{MaxSize: 1})
		require.NoError(t, err)
		h, err := p.Acquire(context.Background())
		require.NoError(t, err)
		item := h.Detach()
		require.NoError(t, p.Close(context.Background()))
		assert.Equal(t, []string{item.ID}, f.liveIDs())
	})
}
