package sqllease_test

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/internal/leasecheck"
)

// proveFault runs the multi-instance workload (ops per worker) while kill
// cuts the stores' server connections every interval, then checks: calls failed with
// wrapped store errors that match no lease sentinel, every Manager works
// again without a restart, every acknowledged grant not released is still
// there, and the whole history (failed writes count as ambiguous) is
// linearizable. The workload calls List too, and the final Lists are part
// of the recorded history.
func proveFault(t *testing.T, stores []lease.Store, every time.Duration, ops int, kill func() (int, error)) {
	h := leasecheck.New(nil)
	h.Dir = t.TempDir()
	ms := newManagers(t, h, stores)
	// One lease acknowledged before the faults start, so that the
	// nothing-lost check below never runs empty.
	anchor, err := ms[0].Grant(ctx, lease.Request{Holder: "anchor", Cost: 1})
	require.NoError(t, err)

	stop := make(chan struct{})
	var killed atomic.Int64
	var killer sync.WaitGroup
	killer.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				n, err := kill()
				if err != nil {
					t.Errorf("kill: %v", err)
					return
				}
				killed.Add(int64(n))
			}
		}
	})
	var (
		mu     sync.Mutex
		failed []error
		kept   []string
		wg     sync.WaitGroup
	)
	for w := range 6 {
		wg.Go(func() {
			errs, ids := workload(t, ms[w%len(ms)], uint64(100+w), ops, true)
			mu.Lock()
			failed = append(failed, errs...)
			kept = append(kept, ids...)
			mu.Unlock()
		})
	}
	wg.Wait()
	close(stop)
	killer.Wait()

	require.NotZero(t, killed.Load(), "no connection was killed")
	require.NotEmpty(t, failed, "no call failed although %d connections were killed", killed.Load())
	for _, err := range failed {
		var re *lease.RejectedError
		if errors.As(err, &re) || errors.Is(err, lease.ErrNotFound) || errors.Is(err, lease.ErrExpired) ||
			errors.Is(err, lease.ErrInvalid) || errors.Is(err, lease.ErrClosed) || !strings.HasPrefix(err.Error(), "sqllease: ") {
			t.Errorf("store error %q matches a lease sentinel or is not wrapped", err)
		}
		if errors.Is(err, lease.ErrNotApplied) == errors.Is(err, lease.ErrUnknownOutcome) {
			t.Errorf("store error %q matches not exactly one of ErrNotApplied and ErrUnknownOutcome", err)
		}
	}
	t.Logf("%d connections killed, %d calls failed, e.g. %v", killed.Load(), len(failed), failed[0])

	// Recovery without restart: the pools replace the dead connections.
	// The first call on a dead idle connection may still fail.
	for i, m := range ms {
		require.Eventually(t, func() bool { _, err := m.Usage(ctx); return err == nil }, 10*time.Second, 20*time.Millisecond,
			"manager %d does not recover", i)
	}
	// Nothing acknowledged was lost (TTL and grace outlast the run).
	for _, id := range append(kept, anchor.ID) {
		_, err := stores[0].Get(ctx, id)
		assert.NoError(t, err, "acknowledged lease %s", id)
	}
	t.Logf("%d acknowledged leases checked", len(kept)+1)

	// Free the budget: release every live lease, the acknowledged ones and
	// any that a grant with a lost reply left, through each Manager in turn.
	var live []lease.Lease
	require.Eventually(t, func() bool { live, err = ms[0].List(ctx); return err == nil }, 10*time.Second, 20*time.Millisecond)
	require.NotEmpty(t, live, "the anchor lease at least is live")
	checkSnapshot(t, live)
	for i, l := range live {
		_, err := ms[i%len(ms)].Release(ctx, l.ID)
		require.NoError(t, err, "Release of %s after the faults", l.ID)
	}
	// With the budget free, every call must succeed on every Manager: a
	// failure here is a Manager that did not recover.
	const rounds = 5
	granted := 0
	for i, m := range ms {
		for range rounds {
			l, err := m.Grant(ctx, lease.Request{Holder: "recovery", Cost: 1})
			require.NoError(t, err, "manager %d after recovery", i)
			granted++
			_, err = m.Heartbeat(ctx, l.ID)
			require.NoError(t, err, "manager %d after recovery", i)
			_, err = m.Release(ctx, l.ID)
			require.NoError(t, err, "manager %d after recovery", i)
		}
		ls, err := m.List(ctx)
		require.NoError(t, err, "manager %d after recovery", i)
		assert.Empty(t, ls, "manager %d: every lease was released", i)
	}
	assert.Equal(t, rounds*len(ms), granted, "grants after the faults")
	assert.Greater(t, h.Len(), 3*ops) // failed reads are not recorded
	h.Check(t, 60*time.Second)
}
