package pool_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/shared"
)

// An idle item whose Provisioner reports it dead is destroyed at once, with
// the default options: no Check on acquire, no janitor pass, and no caller
// is ever handed it.
func TestDeadIdleItemIsNeverHandedOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{})
		hs := acquireN(t, p, 3)
		releaseAll(hs)
		synctest.Wait()
		require.Equal(t, 3, p.Stats().Idle)
		assert.Equal(t, 3, f.watches(), "every item held is watched")

		dead := map[string]bool{hs[0].ID(): true, hs[2].ID(): true}
		for id := range dead {
			f.die(id)
		}
		synctest.Wait()
		s := p.Stats()
		assert.Equal(t, uint64(2), s.Destroyed[pool.ReasonDied])
		assert.Equal(t, 1, s.Idle)
		assert.Equal(t, 1, s.Size, "destroyed at once, not at the next acquire")
		assert.Equal(t, 1, f.watches(), "the watches of destroyed items ended")

		for i := range 5 {
			h, err := p.Acquire(context.Background())
			require.NoError(t, err)
			require.False(t, dead[h.ID()], "acquire %d got dead item %s", i, h.ID())
			h.Release()
		}
		assert.Equal(t, uint64(2), p.Stats().Destroyed[pool.ReasonDied])
	})
}

// A warm pool replaces a dead idle item at once, and a waiter gets a live
// item when the idle one it was sent dies on the way.
func TestDeadWarmItemIsReplaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MinIdle: 2, MaxSize: 2, JanitorInterval: -1})
		synctest.Wait()
		require.Equal(t, 2, p.Stats().Idle)
		ids := f.liveIDs()
		for _, id := range ids {
			f.die(id)
		}
		synctest.Wait()
		s := p.Stats()
		assert.Equal(t, uint64(2), s.Destroyed[pool.ReasonDied])
		assert.Equal(t, 2, s.Idle, "refilled to MinIdle")
		assert.Equal(t, uint64(4), s.Creates)
		for range 2 {
			h, err := p.Acquire(context.Background())
			require.NoError(t, err)
			assert.NotContains(t, ids, h.ID())
			defer h.Release()
		}
	})
}

// An item that dies in use stays with its holder (the pool never destroys
// an item under a caller) and is destroyed when released, instead of going
// back to the idle set.
func TestDeadItemInUseIsDestroyedOnRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MaxSize: 1})
		h, err := p.Acquire(context.Background())
		require.NoError(t, err)
		f.die(h.ID())
		synctest.Wait()
		s := p.Stats()
		assert.Equal(t, 1, s.InUse)
		assert.Zero(t, s.Destroyed[pool.ReasonDied])

		// A waiter meanwhile gets a new item once the dead one is released.
		got := make(chan string, 1)
		go func() {
			h2, err := p.Acquire(context.Background())
			if assert.NoError(t, err) {
				got <- h2.ID()
				h2.Release()
			}
		}()
		synctest.Wait()
		h.Release()
		synctest.Wait()
		assert.NotEqual(t, h.ID(), <-got)
		s = p.Stats()
		assert.Equal(t, uint64(1), s.Destroyed[pool.ReasonDied])
		assert.Equal(t, 1, s.Idle)
		assert.Equal(t, 1, f.watches())
	})
}

// A detached item is no longer watched, and Close ends every watch.
func TestWatchesEndWithTheItemOrThePool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p, err := pool.New(f, pool.Options{MinIdle: 2, JanitorInterval: -1})
		require.NoError(t, err)
		synctest.Wait()
		h, err := p.Acquire(context.Background())
		require.NoError(t, err)
		synctest.Wait()
		assert.Equal(t, 3, f.watches())
		v := h.Detach()
		synctest.Wait()
		assert.Equal(t, 2, f.watches(), "a detached item is the caller's")
		f.die(v.ID)
		synctest.Wait()
		assert.Zero(t, p.Stats().Destroyed[pool.ReasonDied])
		h, err = p.Acquire(context.Background())
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		go func() {
			time.Sleep(100 * time.Millisecond)
			h.Release()
		}()
		require.NoError(t, p.Close(ctx))
		synctest.Wait()
		assert.Zero(t, f.watches())
	})
}

// With a shared Inventory, an item that died while idle in the Inventory
// (watched by nobody) is found dead when an instance pops it, and is
// destroyed instead of handed out.
func TestDeadItemPoppedFromInventoryIsDestroyed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inv := shared.NewMemoryInventory(nil)
		f := newFake()
		a := newPool(t, f, pool.Options{MaxSize: 2, Inventory: inv, Instance: "a", JanitorInterval: -1})
		b := newPool(t, f, pool.Options{MaxSize: 2, Inventory: inv, Instance: "b", JanitorInterval: -1})
		h, err := a.Acquire(context.Background())
		require.NoError(t, err)
		id := h.ID()
		h.Release() // to the shared idle set: a no longer holds it
		synctest.Wait()
		assert.Zero(t, f.watches())
		f.die(id)

		h, err = b.Acquire(context.Background())
		require.NoError(t, err)
		assert.NotEqual(t, id, h.ID(), "the dead item was handed out")
		h.Release()
		synctest.Wait()
		assert.Equal(t, uint64(1), b.Stats().Destroyed[pool.ReasonDied])
	})
}
