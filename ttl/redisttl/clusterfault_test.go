package redisttl_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/redisttl"
)

// TestClusterSlotMigration moves the buffer's slot from master to master,
// one key per MIGRATE, again and again while four writers (each with a
// client of its own) add activity and a drainer peeks and removes it, as
// a Runner does. No call fails, and once the writers stop and the buffer is
// drained, the drained times are exactly the latest time written for each
// id: nothing lost, nothing moved back.
func TestClusterSlotMigration(t *testing.T) {
	bufferLoad(t, func(c *redistest.ClusterServer, slot int, stop <-chan struct{}) error {
		moves, err := c.MigrateUntil(context.Background(), slot, redistest.MigrateOptions{Batch: 1, Pause: 2 * time.Millisecond}, stop)
		t.Logf("%d migrations of slot %d", moves, slot)
		if err == nil && moves < 2 {
			err = fmt.Errorf("the load ended before the slot moved twice")
		}
		return err
	})
}

// TestClusterGracefulFailover has the replica of the buffer's master take
// over (CLUSTER FAILOVER) under the same load: no call fails, nothing is
// lost.
func TestClusterGracefulFailover(t *testing.T) {
	bufferLoad(t, func(c *redistest.ClusterServer, slot int, stop <-chan struct{}) error {
		ctx := context.Background()
		time.Sleep(500 * time.Millisecond)
		master, err := c.Master(ctx, slot)
		if err != nil {
			return err
		}
		replica, err := c.ReplicaOf(ctx, master)
		if err != nil {
			return err
		}
		if _, err := c.Do(ctx, replica, "cluster", "failover"); err != nil {
			return err
		}
		return c.WaitMaster(ctx, replica)
	})
}

// bufferLoad runs four writers and a drainer on a buffer of a cluster of
// its own for two seconds while disturb runs (until stop is closed), then
// drains the buffer and checks that no call failed and that the drained
// times are exactly the latest written for each id.
func bufferLoad(t *testing.T, disturb func(c *redistest.ClusterServer, slot int, stop <-chan struct{}) error) {
	ctx := context.Background()
	c := redistest.StartRedisCluster(t, redistest.ClusterServerOptions{})
	buffer := func() *redisttl.Buffer {
		b, err := redisttl.New(c.Client(t, nil), redisttl.Options{Prefix: "codehub"})
		require.NoError(t, err)
		return b
	}
	drainer := buffer()
	slot, err := c.Slot(ctx, drainer.Key())
	require.NoError(t, err)

	var (
		mu      sync.Mutex
		latest  = map[string]time.Time{} // written
		drained = map[string]time.Time{} // merged, greater wins
		failed  []error
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		derr    error
	)
	fail := func(err error) {
		mu.Lock()
		failed = append(failed, err)
		mu.Unlock()
	}
	wg.Go(func() { derr = disturb(c, slot, stop) })
	base := time.Now().UTC().Truncate(time.Millisecond)
	for w := range 4 {
		b := buffer()
		rnd := rand.New(rand.NewPCG(uint64(w), 5))
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				acts := make([]ttl.Activity, 1+rnd.IntN(20))
				for j := range acts {
					acts[j] = ttl.Activity{ID: fmt.Sprint("ws", rnd.IntN(200)), At: base.Add(time.Duration(rnd.IntN(100000)) * time.Millisecond)}
				}
				if err := b.Add(ctx, acts); err != nil {
					fail(err)
					continue
				}
				mu.Lock()
				for _, a := range acts {
					if a.At.After(latest[a.ID]) {
						latest[a.ID] = a.At
					}
				}
				mu.Unlock()
			}
		})
	}
	drain := func() int {
		n := 0
		var after ttl.Activity
		for {
			page, err := drainer.Peek(ctx, after, 50)
			if err != nil {
				fail(err)
				return n
			}
			if len(page) == 0 {
				return n
			}
			mu.Lock()
			for _, a := range page {
				if a.At.After(drained[a.ID]) {
					drained[a.ID] = a.At
				}
			}
			mu.Unlock()
			if _, err := drainer.Remove(ctx, page); err != nil {
				fail(err)
			}
			n += len(page)
			after = page[len(page)-1]
		}
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			drain()
		}
	})
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	require.NoError(t, derr)
	for drain() > 0 {
	}
	n, err := drainer.Len(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "activity left after draining")
	t.Logf("%d ids written", len(latest))
	assert.Empty(t, failed, "calls failed")
	assert.Equal(t, latest, drained, "drained times differ from the latest written")
}
