package pool_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/pool"
)

// CheckHealth takes each idle item out of the idle set while it checks it;
// a destroy finishing meanwhile must still count it towards MinIdle, or it
// starts a create the pool does not need. The race is between goroutines,
// so the scenario runs many times.
func TestCheckHealthKeepsItemsCountedAsIdle(t *testing.T) {
	for i := range 300 {
		synctest.Test(t, func(t *testing.T) {
			f := newFake()
			p := newPool(t, f, pool.Options{MinIdle: 2, MaxSize: 6, JanitorInterval: -1, HealthCheckInterval: -1})
			hs := acquireN(t, p, 4)
			synctest.Wait() // the warm refill, up to MaxSize
			require.Equal(t, 2, p.Stats().Idle)
			creates := f.counts().creates
			go func() { _, _ = p.CheckHealth(context.Background()) }()
			for _, h := range hs {
				go h.Destroy("evicted")
			}
			synctest.Wait()
			require.Equal(t, creates, f.counts().creates, "run %d: a create started while two items were idle", i)
			require.Equal(t, 2, p.Stats().Idle)
		})
	}
}
