package pool_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/pool"
)

// A serverless gateway: raising a function's reserved concurrency serves a
// request that was waiting for capacity, without a restart.
func TestSetLimitsGrowServesWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		f.createDelay = time.Second
		p := newPool(t, f, pool.Options{MaxSize: 1, MaxIdle: 1, JanitorInterval: -1, HealthCheckInterval: -1})
		h1, err := p.Acquire(context.Background())
		require.NoError(t, err)
		got := make(chan *pool.Handle[box])
		go func() {
			h, err := p.Acquire(context.Background())
			assert.NoError(t, err)
			got <- h
		}()
		synctest.Wait()
		require.Equal(t, 1, p.Stats().Waiting)
		require.NoError(t, p.SetLimits(2, 0))
		h2 := <-got
		assert.Equal(t, 2, f.counts().creates)
		assert.Equal(t, 2, p.Stats().MaxSize)
		h1.Release()
		h2.Release()
		synctest.Wait()
		// MaxIdle stays 1: the second item is beyond it.
		assert.Equal(t, 1, p.Stats().Idle)
	})
}

// Shrinking never takes a worker from its user: busy items above the new
// capacity are destroyed when released, idle ones at once.
func TestSetLimitsShrinkSparesBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MaxSize: 4, JanitorInterval: -1, HealthCheckInterval: -1})
		var hs []*pool.Handle[box]
		for range 3 {
			h, err := p.Acquire(context.Background())
			require.NoError(t, err)
			hs = append(hs, h)
		}
		h, err := p.Acquire(context.Background())
		require.NoError(t, err)
		h.Release() // one idle, three busy
		synctest.Wait()

		require.NoError(t, p.SetLimits(2, 0))
		synctest.Wait()
		st := p.Stats()
		assert.Equal(t, uint64(1), st.Destroyed["idle"], "the idle item goes at once")
		assert.Equal(t, 3, st.InUse, "no busy item is destroyed")
		assert.Equal(t, 3, f.counts().live)

		hs[0].Release()
		synctest.Wait()
		assert.Equal(t, 2, f.counts().live, "a release above capacity destroys the item")
		assert.Equal(t, 0, p.Stats().Idle)
		hs[1].Release()
		hs[2].Release()
		synctest.Wait()
		st = p.Stats()
		assert.Equal(t, 2, st.Size)
		assert.Equal(t, 2, st.Idle, "within capacity, releases keep their items")
		assert.Equal(t, uint64(2), st.Destroyed["idle"])

		// The new capacity holds: a third acquirer waits.
		a, err := p.Acquire(context.Background())
		require.NoError(t, err)
		b, err := p.Acquire(context.Background())
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err = p.Acquire(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		a.Release()
		b.Release()
	})
}

// Raising the warm target creates warm items; lowering capacity below the
// idle items destroys the longest idle first.
func TestSetLimitsWarmTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MaxSize: 3, JanitorInterval: -1, HealthCheckInterval: -1})
		require.NoError(t, p.SetLimits(3, 3))
		synctest.Wait()
		assert.Equal(t, 3, p.Stats().Idle)
		require.NoError(t, p.SetLimits(1, 1))
		synctest.Wait()
		st := p.Stats()
		assert.Equal(t, 1, st.Idle)
		assert.Equal(t, 1, st.Size)
		assert.Equal(t, 1, f.counts().live)
	})
}

func TestSetLimitsInvalid(t *testing.T) {
	f := newFake()
	p := newPool(t, f, pool.Options{MaxSize: 2, JanitorInterval: -1, HealthCheckInterval: -1})
	for _, c := range []struct{ max, min int }{{0, 0}, {2, -1}, {2, 3}, {5, 3}} {
		err := p.SetLimits(c.max, c.min)
		require.ErrorIs(t, err, pool.ErrInvalid, "%v", c)
	}
	assert.Equal(t, 2, p.Stats().MaxSize, "a bad call changes nothing")
	require.NoError(t, p.Close(context.Background()))
	require.ErrorIs(t, p.SetLimits(1, 0), pool.ErrClosed)
}

func TestGroupSetLimits(t *testing.T) {
	f := newFake()
	g, err := pool.NewGroup(func(string) (pool.Provisioner[box], pool.Options, error) {
		return f, pool.Options{MaxSize: 1, JanitorInterval: -1, HealthCheckInterval: -1}, nil
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, g.Close(context.Background())) }()
	p, err := g.Pool("fn")
	require.NoError(t, err)
	require.NoError(t, p.SetLimits(4, 0))
	assert.Equal(t, 4, g.Stats()["fn"].MaxSize)
}
