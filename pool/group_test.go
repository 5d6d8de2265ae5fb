package pool_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/pool"
)

// Seed 001: one pool per function, MaxSize from its reserved concurrency,
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
			return f, pool.Options{MaxSize: n, IdleTimeout: 300 * time.Second}, nil
		}, pool.GroupOptions{JanitorInterval: 30 * time.Second})
		require.NoError(t, err)
		ctx := context.Background()
		assert.Empty(t, g.Keys(), "pools are created lazily")

		r1, err := g.Acquire(ctx, "resize")
		require.NoError(t, err)
		r2, err := g.Acquire(ctx, "resize")
		require.NoError(t, err)
		th, err := g.Acquire(ctx, "thumbnail")
		require.NoError(t, err)
		_, err = g.Acquire(ctx, "nope")
		assert.ErrorContains(t, err, "unknown function")

		// resize is at its reserved concurrency: the next call waits.
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = g.Acquire(tctx, "resize")
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

		h, err := g.Acquire(ctx, "thumbnail")
		require.NoError(t, err)
		closed := make(chan error, 1)
		go func() { closed <- g.Close(ctx) }()
		synctest.Wait()
		_, err = g.Acquire(ctx, "resize")
		assert.ErrorIs(t, err, pool.ErrClosed)
		h.Release()
		require.NoError(t, <-closed)
		assert.Empty(t, provs["thumbnail"].liveIDs())
		require.NoError(t, g.Close(ctx))
	})
}
