package pool_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/shared"
)

// Three instances share a MemoryInventory under real concurrent load while
// one of them reconciles all along with a short orphan grace: no item is
// handed to two holders, none is handed out or destroyed while dead or
// held. (Real time on purpose: the races are between goroutines.)
func TestSharedFleetConcurrentReconcile(t *testing.T) {
	inv := shared.NewMemoryInventory(nil)
	f := newFake()
	var mu sync.Mutex
	holders := map[string]string{}
	var problems []string
	var pools []*pool.Pool[box]
	for i := range 3 {
		p, err := pool.New[box](f, pool.Options{MinIdle: 2, MaxIdle: 4, MaxSize: 6, IdleTimeout: 200 * time.Millisecond,
			JanitorInterval: time.Second, OrphanGracePeriod: 100 * time.Millisecond, HealthCheckInterval: -1,
			Inventory: inv, Instance: fmt.Sprintf("gw-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		pools = append(pools, p)
	}
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, p := range pools {
		for w := range 4 {
			rnd := rand.New(rand.NewPCG(uint64(i), uint64(w)))
			holder := fmt.Sprintf("gw-%d/w%d", i, w)
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					h, err := p.Acquire(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					id := h.ID()
					mu.Lock()
					if o, ok := holders[id]; ok {
						problems = append(problems, id+" double "+o+" "+holder)
					}
					if !isLive(f, id) {
						problems = append(problems, id+" handed out dead to "+holder)
					}
					holders[id] = holder
					mu.Unlock()
					hold := time.Duration(rnd.IntN(3)) * time.Millisecond
					if w == 0 {
						hold = 300 * time.Millisecond
					}
					time.Sleep(hold)
					mu.Lock()
					delete(holders, id)
					if !isLive(f, id) {
						problems = append(problems, id+" destroyed while held by "+holder)
					}
					mu.Unlock()
					if rnd.IntN(10) == 0 {
						h.Destroy("evicted")
					} else {
						h.Release()
					}
				}
			})
		}
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := pools[0].Reconcile(ctx); err != nil {
				t.Error(err)
			}
		}
	})
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	for _, p := range pools {
		assert.NoError(t, p.Close(ctx))
	}
	assert.Empty(t, problems)
}

func isLive(f *fakeProv, id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.live[id]
	return ok
}
