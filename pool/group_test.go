package pool_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/pool"
)

// A serverless gateway: one pool per function, MaxSize from its reserved concurrency,
// created on first use; one janitor prunes them all; Close drains all.
func TestGroupPerFunctionPools(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reserved := map[string]int{"resize": 2, "thumbnail": 1}
		provs := map[string]*fakeProv{}
		g, err := pool.NewGroup(func(fn string) (pool.Provisioner[box], pool.Options, error) {
			n, ok := reserved[fn]
			if !ok {
				return nil, pool.Options{}, errors.New("unknown function")
			}
			f := newFake()
			f.prefix = fn + "-"
			provs[fn] = f
			return f, pool.Options{MaxSize: n, IdleTimeout: 300 * time.Second, JanitorInterval: 30 * time.Second}, nil
		})
		require.NoError(t, err)
		ctx := context.Background()
		assert.Empty(t, keys(g), "pools are created lazily")

		r1, err := acquireKey(ctx, g, "resize")
		require.NoError(t, err)
		r2, err := acquireKey(ctx, g, "resize")
		require.NoError(t, err)
		th, err := acquireKey(ctx, g, "thumbnail")
		require.NoError(t, err)
		_, err = acquireKey(ctx, g, "nope")
		assert.ErrorContains(t, err, "unknown function")

		// resize is at its reserved concurrency: the next call waits.
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = acquireKey(tctx, g, "resize")
		cancel()
		assert.ErrorIs(t, err, context.DeadlineExceeded)

		r1.Release()
		r2.Release()
		th.Release()
		stats := g.Stats()
		assert.Equal(t, 2, stats["resize"].Idle)
		assert.Equal(t, 1, stats["thumbnail"].Idle)

		time.Sleep(6 * time.Minute) // the group's janitor scales both to zero
		synctest.Wait()
		for fn, s := range g.Stats() {
			assert.Equal(t, 0, s.Size, fn)
			assert.Empty(t, provs[fn].liveIDs(), fn)
		}

		h, err := acquireKey(ctx, g, "thumbnail")
		require.NoError(t, err)
		closed := make(chan error, 1)
		go func() { closed <- g.Close(ctx) }()
		synctest.Wait()
		_, err = acquireKey(ctx, g, "resize")
		assert.ErrorIs(t, err, pool.ErrClosed)
		h.Release()
		require.NoError(t, <-closed)
		assert.Empty(t, provs["thumbnail"].liveIDs())
		require.NoError(t, g.Close(ctx))
	})
}

// Keys known up front get their pool, janitor and start-up cleanup at
// Start, not on their first request.
func TestGroupStartCleansUpDeclaredKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		provs := map[string]*fakeProv{"resize": newFake(), "thumbnail": newFake()}
		for fn, f := range provs {
			f.prefix = fn + "-"
			f.adopt(fn+"-leftover", time.Now().Add(-time.Hour))
		}
		g, err := pool.NewGroup(func(fn string) (pool.Provisioner[box], pool.Options, error) {
			return provs[fn], pool.Options{MaxSize: 2, MinIdle: 1, CleanupOnStart: true}, nil
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = g.Close(context.Background()) })
		require.NoError(t, g.Start(context.Background(), "resize", "thumbnail"))
		assert.ElementsMatch(t, []string{"resize", "thumbnail"}, keys(g))
		for fn, f := range provs {
			assert.NotContains(t, f.liveIDs(), fn+"-leftover", "cleaned up before any request")
		}
		synctest.Wait()
		for fn, s := range g.Stats() {
			assert.Equal(t, 1, s.Idle, "%s is warm before any request", fn)
			assert.Equal(t, uint64(1), s.Destroyed[pool.ReasonOrphan], fn)
		}
	})
}

// A Group has no default capacity: a key whose options leave MaxSize zero
// is an error that names the key.
func TestGroupRequiresMaxSize(t *testing.T) {
	g, err := pool.NewGroup(func(fn string) (pool.Provisioner[box], pool.Options, error) {
		return newFake(), pool.Options{MinIdle: 1}, nil
	})
	require.NoError(t, err)
	_, err = acquireKey(context.Background(), g, "resize")
	require.ErrorIs(t, err, pool.ErrInvalid)
	assert.Contains(t, err.Error(), "resize")
	assert.Contains(t, err.Error(), "MaxSize")
	assert.Empty(t, keys(g))
	require.NoError(t, g.Close(context.Background()))
}

// One pool's slow janitor work (five orphans whose Destroy takes a second
// each) does not delay another pool's idle pruning, and the orphans are
// destroyed concurrently.
func TestGroupPoolsDoNotStallEachOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := guard(newFake(), nil)
		slow.onDestroy = func(box) { time.Sleep(time.Second) }
		for i := range 5 {
			slow.adopt(fmt.Sprintf("orphan-%d", i), time.Now().Add(-time.Hour))
		}
		quick := newFake()
		g, err := pool.NewGroup(func(fn string) (pool.Provisioner[box], pool.Options, error) {
			if fn == "slow" {
				return slow, pool.Options{MaxSize: 2, JanitorInterval: time.Second, HealthCheckInterval: -1}, nil
			}
			return quick, pool.Options{MaxSize: 2, IdleTimeout: 3 * time.Second, JanitorInterval: time.Second, HealthCheckInterval: -1}, nil
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = g.Close(context.Background()) })
		require.NoError(t, g.Start(context.Background(), "slow", "quick"))
		h, err := acquireKey(context.Background(), g, "quick")
		require.NoError(t, err)
		h.Release()
		time.Sleep(3*time.Second + time.Millisecond)
		synctest.Wait()
		assert.Empty(t, slow.liveIDs(), "five 1 s destroys run concurrently")
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Zero(t, g.Stats()["quick"].Idle, "pruned on time")
		assert.Empty(t, quick.liveIDs())
	})
}

// acquireKey acquires an item from key's pool of g.
func acquireKey[K comparable, T any](ctx context.Context, g *pool.Group[K, T], key K) (*pool.Handle[T], error) {
	p, err := g.Pool(key)
	if err != nil {
		return nil, err
	}
	return p.Acquire(ctx)
}

// keys returns the keys of g that have a pool.
func keys[K comparable, T any](g *pool.Group[K, T]) []K {
	return slices.Collect(maps.Keys(g.Stats()))
}
