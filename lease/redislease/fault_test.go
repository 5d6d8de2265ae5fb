package redislease_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/lease"
)

// TestConnectionKilled kills the store's connections (CLIENT KILL, found by
// their client name) again and again while 8 goroutines grant, heartbeat
// and release through one Manager. Calls fail with wrapped errors that match
// no lease rule, or succeed once go-redis has reconnected; every grant that
// was acknowledged and not released is still there afterwards; the Manager
// keeps working without a restart, and no goroutine leaks (TestMain). It
// runs with go-redis's default retries (which hide most kills) and without
// retries (every kill fails the calls in flight).
func TestConnectionKilled(t *testing.T) {
	t.Run("retries=default", func(t *testing.T) { testConnectionKilled(t, 0) })
	t.Run("retries=off", func(t *testing.T) { testConnectionKilled(t, -1) })
}

func testConnectionKilled(t *testing.T, maxRetries int) {
	const workers, ops, budget = 8, 150, 1000
	r := redistest.OpenRedis(t)
	c, name := r.NamedClient(t, "store", maxRetries)
	m := newManager(t, budget, lease.Options{
		Store: newStore(t, c, storePrefix(r)),
		TTL:   10 * time.Minute, Grace: 10 * time.Minute, SweepInterval: 10 * time.Millisecond,
	})

	var (
		mu        sync.Mutex
		held      = map[string]lease.Lease{} // acknowledged, not released
		unsure    = map[string]bool{}        // held, with a release that failed
		failed    atomic.Int64               // grants that returned an error
		storeErrs atomic.Int64
		done      = make(chan struct{})
		killer    sync.WaitGroup
		kills     atomic.Int64
	)
	killer.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(15 * time.Millisecond):
			}
			n, err := r.KillClients(ctx, name)
			if err != nil {
				t.Errorf("killing clients: %v", err)
				return
			}
			kills.Add(int64(n))
		}
	})
	checkErr := func(op string, err error) {
		if err == nil {
			return
		}
		for _, s := range []error{lease.ErrExpired, lease.ErrInvalid, lease.ErrClosed,
			lease.ErrOverCapacity, lease.ErrHolderHasLease, lease.ErrOverloaded} {
			if errors.Is(err, s) {
				t.Errorf("%s: %v matches %v", op, err, s)
			}
		}
		if !errors.Is(err, lease.ErrNotFound) {
			if errors.Is(err, lease.ErrNotApplied) == errors.Is(err, lease.ErrUnknownOutcome) {
				t.Errorf("%s: %v matches not exactly one of ErrNotApplied and ErrUnknownOutcome", op, err)
			}
			storeErrs.Add(1)
			if !strings.Contains(err.Error(), "redislease: ") {
				t.Errorf("%s: %v is not wrapped by the store", op, err)
			}
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		rnd := rand.New(rand.NewPCG(uint64(w), 5))
		wg.Go(func() {
			var mine []string
			for i := range ops {
				switch {
				case len(mine) == 0 || rnd.IntN(3) == 0:
					l, err := m.Grant(ctx, lease.Request{Holder: fmt.Sprintf("w%d-%d", w, i), Cost: 1})
					checkErr("Grant", err)
					if err != nil {
						failed.Add(1)
						continue
					}
					mu.Lock()
					held[l.ID] = l
					mu.Unlock()
					mine = append(mine, l.ID)
				case rnd.IntN(2) == 0:
					_, err := m.Heartbeat(ctx, mine[rnd.IntN(len(mine))], "")
					checkErr("Heartbeat", err)
				default:
					id := mine[0]
					_, err := m.Release(ctx, id, "")
					checkErr("Release", err)
					// Our leases outlive the test, so ErrNotFound means an
					// earlier attempt whose reply was lost (or the client's
					// own retry of this one) released it.
					mu.Lock()
					if err == nil || errors.Is(err, lease.ErrNotFound) {
						delete(held, id)
						delete(unsure, id)
						mine = mine[1:]
					} else {
						unsure[id] = true // the release may have taken effect
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(done)
	killer.Wait()
	require.Positive(t, kills.Load(), "no connection was killed")
	if maxRetries < 0 {
		require.Positive(t, storeErrs.Load(), "no call saw a killed connection")
	}
	t.Logf("killed %d connections; %d store errors; %d grants failed", kills.Load(), storeErrs.Load(), failed.Load())

	// The Manager recovered: every acknowledged grant not released is live,
	// and the only other leases are grants whose reply was lost.
	ls, err := list(m)
	require.NoError(t, err)
	live := map[string]lease.Lease{}
	for _, l := range ls {
		live[l.ID] = l
	}
	mu.Lock()
	defer mu.Unlock()
	for id, l := range held {
		got, ok := live[id]
		if unsure[id] {
			continue
		}
		if assert.True(t, ok, "acknowledged lease %s lost", id) {
			assert.Equal(t, l.Token, got.Token)
			assert.Equal(t, l.ExpiresAt, got.ExpiresAt)
		}
	}
	assert.LessOrEqual(t, len(live)-len(held), int(failed.Load()), "leases nobody was told about")
	_, err = m.Get(ctx, ls[0].ID)
	require.NoError(t, err)
	l, err := m.Grant(ctx, lease.Request{Holder: "after", Cost: 1})
	require.NoError(t, err)
	_, err = m.Release(ctx, l.ID, "")
	require.NoError(t, err)
	assert.Zero(t, m.Stats().Expired)
}
