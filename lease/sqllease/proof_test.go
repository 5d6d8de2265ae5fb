package sqllease_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/internal/leasecheck"
)

// proofBudget is small and proofHolders few, so that the budget and the
// holder rule decide often.
const (
	proofBudget  = 6
	proofHolders = 6
)

// newManagers returns one Manager per store, each recording into h under its
// own client id, with TTL and grace far longer than a run (the history
// checker has no server clock), and the background sweep off: the workers
// sweep by hand.
func newManagers(t *testing.T, h *leasecheck.History, stores []lease.Store) []*lease.Manager {
	t.Helper()
	var ms []*lease.Manager
	for i, s := range stores {
		m, err := lease.New(proofBudget, lease.Options{
			Store: h.Store(i, s), TTL: 10 * time.Minute, Grace: 10 * time.Minute, ManualSweep: true, SweepBatch: 3,
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close(ctx) })
		ms = append(ms, m)
	}
	return ms
}

// workload runs ops random operations on m (seeded by seed). It returns the
// errors that are not rule outcomes, and the leases it was granted and
// neither released nor tried to release with a failed call: they must still
// be there. Every List it sees is checked against the budget and the holder
// rule; with lists false it calls Usage instead.
func workload(t *testing.T, m *lease.Manager, seed uint64, ops int, lists bool) (failed []error, kept []string) {
	r := rand.New(rand.NewPCG(seed, 11))
	var mine []string
	uncertain := map[string]bool{}
	pick := func() string {
		if len(mine) == 0 || r.IntN(10) == 0 {
			return lease.NewID()
		}
		return mine[r.IntN(len(mine))]
	}
	for range ops {
		var err error
		switch n := r.IntN(100); {
		case n < 35:
			req := lease.Request{Holder: fmt.Sprint("h", r.IntN(proofHolders)), Cost: 2, Fallback: []int{1}}
			if r.IntN(4) == 0 {
				req = lease.Request{Holder: fmt.Sprint("h", r.IntN(proofHolders)), Cost: 1 + r.IntN(3)}
			}
			var l lease.Lease
			if l, err = m.Grant(ctx, req); err == nil {
				mine = append(mine, l.ID)
			}
		case n < 55:
			_, err = m.Heartbeat(ctx, pick())
		case n < 75:
			id := pick()
			if _, err = m.Release(ctx, id); err != nil {
				uncertain[id] = true
			} else {
				for i, x := range mine {
					if x == id {
						mine = append(mine[:i], mine[i+1:]...)
						break
					}
				}
			}
		case n < 82:
			_, err = m.Get(ctx, pick())
		case n < 88:
			var u lease.Usage
			if u, err = m.Usage(ctx); err == nil && u.Units > proofBudget {
				t.Errorf("Usage %d units > budget %d", u.Units, proofBudget)
			}
		case n < 94 && !lists:
			_, err = m.Usage(ctx)
		case n < 94:
			var ls []lease.Lease
			if ls, err = m.List(ctx); err == nil {
				checkSnapshot(t, ls)
			}
		default:
			_, err = m.Sweep(ctx)
		}
		var re *lease.RejectedError
		if err != nil && !errors.As(err, &re) && !errors.Is(err, lease.ErrNotFound) && !errors.Is(err, lease.ErrExpired) {
			failed = append(failed, err)
		}
	}
	for _, id := range mine {
		if !uncertain[id] {
			kept = append(kept, id)
		}
	}
	return failed, kept
}

// checkSnapshot checks one List: within the budget, one lease per holder,
// tokens ascending.
func checkSnapshot(t *testing.T, ls []lease.Lease) {
	t.Helper()
	sum, seen := 0, map[string]bool{}
	for i, l := range ls {
		sum += l.Cost
		if seen[l.Holder] {
			t.Errorf("List shows two live leases for holder %s", l.Holder)
		}
		seen[l.Holder] = true
		if i > 0 && l.Token <= ls[i-1].Token {
			t.Errorf("List not ordered by token: %d after %d", l.Token, ls[i-1].Token)
		}
	}
	if sum > proofBudget {
		t.Errorf("List holds %d units, budget %d", sum, proofBudget)
	}
}

// proveMultiInstance runs workers goroutines over three Managers, one per
// store (each store with its own connections to the same tables), and
// checks the recorded history against the sequential model of the Store
// contract: a linearizable history never oversubscribed the budget nor gave
// a holder two live leases.
func proveMultiInstance(t *testing.T, stores []lease.Store, workers, ops int) {
	h := leasecheck.New(nil)
	h.Dir = t.TempDir()
	ms := newManagers(t, h, stores)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			if errs, _ := workload(t, ms[w%len(ms)], uint64(w), ops, true); len(errs) > 0 {
				t.Errorf("worker %d: %d operations failed with store errors, first: %v", w, len(errs), errs[0])
			}
		})
	}
	wg.Wait()
	var granted, rejected uint64
	for _, m := range ms {
		st := m.Stats()
		granted += st.Granted
		rejected += st.RejectedHolderHasLease + st.RejectedOverCapacity
	}
	assert.NotZero(t, granted)
	assert.NotZero(t, rejected, "the run must exercise the budget and the holder rule")
	require.GreaterOrEqual(t, h.Len(), workers*ops)
	t.Logf("granted %d, rejected %d", granted, rejected)
	h.Check(t, 60*time.Second)
}
