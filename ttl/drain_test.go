package ttl_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/internal/memstore"
)

// TestRunnerDrainsPastRefreshedBatch: a flush lands between the first Peek
// and its Remove and makes every entry of the batch newer, so Remove
// deletes none of them. The drain must still merge what it read, carry on
// past the refreshed entries to the end of the buffer, and only then apply
// the idle rule: no entity whose buffered activity is fresh may expire.
// Before, the drain stopped after that first batch and the rule expired
// every entity it had not reached.
func TestRunnerDrainsPastRefreshedBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New(memstore.Options{})
		buf := &flakyBuffer{b: new(ttl.MemoryBuffer)}
		r := newRunner(t, st, workspaceRules(5*time.Second, time.Hour),
			ttl.RunnerOptions{Buffer: buf, Interval: time.Hour, BatchSize: 100})
		defer r.Close(context.Background())
		now := time.Now()
		const n = 300
		older, newer := make([]ttl.Activity, n), make([]ttl.Activity, n)
		for i := range n {
			id := fmt.Sprintf("ws-%03d", i)
			create(t, st, memstore.Entity{ID: id, Phase: "RUNNING", CreatedAt: now.Add(-7 * time.Second)})
			older[i] = ttl.Activity{ID: id, At: now.Add(-3 * time.Second)}
			newer[i] = ttl.Activity{ID: id, At: now.Add(-time.Second)}
		}
		require.NoError(t, buf.Add(ctx, older))
		buf.afterPeek = func([]ttl.Activity) {
			buf.afterPeek = nil
			require.NoError(t, buf.b.Add(ctx, newer)) // a Tracker's flush
		}

		res, err := r.Tick(ctx)
		require.NoError(t, err)
		assert.Empty(t, res.Expired, "entities with fresh buffered activity expired")
		assert.Empty(t, res.Skipped)
		assert.Equal(t, n+100, res.Synced, "the first batch, then every entry at its newer time")
		assert.Zero(t, buf.b.Len(), "the drain reached the end of the buffer")
		for _, a := range newer {
			assert.Equal(t, a.At, get(t, st, a.ID).LastActivityAt, a.ID)
		}
	})
}

// slowBuffer makes every Peek take a while on a mock clock.
type slowBuffer struct {
	*ttl.MemoryBuffer
	mock  *clock.Mock
	delay time.Duration
}

func (b slowBuffer) Peek(ctx context.Context, after ttl.Activity, max int) ([]ttl.Activity, error) {
	b.mock.Add(b.delay)
	return b.MemoryBuffer.Peek(ctx, after, max)
}

// TestRunnerDrainStopsAfterOneInterval: a drain that has not reached the
// end of the buffer after one Interval stops there, and the tick skips its
// idle rules; the next tick goes on from the oldest entry left. (A mock
// clock, not synctest: the loop's own tick, due meanwhile, waits for the
// one in progress on a mutex.)
func TestRunnerDrainStopsAfterOneInterval(t *testing.T) {
	ctx := context.Background()
	mock := clock.NewMock()
	t0 := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)
	mock.Set(t0)
	st := memstore.New(memstore.Options{Clock: mock})
	buf := slowBuffer{new(ttl.MemoryBuffer), mock, 4 * time.Second}
	r := newRunner(t, st, workspaceRules(time.Minute, time.Hour),
		ttl.RunnerOptions{Buffer: buf, Interval: 10 * time.Second, BatchSize: 10, Clock: mock})
	defer r.Close(context.Background())
	var acts []ttl.Activity
	for i := range 50 {
		id := fmt.Sprintf("ws-%02d", i)
		create(t, st, memstore.Entity{ID: id, Phase: "RUNNING", CreatedAt: t0.Add(-time.Hour)})
		acts = append(acts, ttl.Activity{ID: id, At: t0})
	}
	require.NoError(t, buf.Add(ctx, acts))
	res, err := r.Tick(ctx)
	require.NoError(t, err)
	assert.Equal(t, 30, res.Synced, "three pages in 12 s, then the Interval (10 s) is over")
	assert.False(t, res.Drained)
	assert.False(t, res.Lost)
	assert.True(t, res.HeldUntil.IsZero(), "out of time: no hold")
	assert.Equal(t, []string{"standby"}, res.Skipped)
	assert.Empty(t, res.Expired)

	// The loop's tick, due at 10 s, drains the rest; then the rule runs.
	require.Eventually(t, func() bool { return buf.Len() == 0 && r.Stats().Ticks >= 2 }, 5*time.Second, 10*time.Millisecond)
	s := r.Stats()
	assert.Equal(t, uint64(50), s.Synced)
	assert.Equal(t, uint64(1), s.IncompleteDrains)
	assert.Zero(t, s.Expired, "every entity's activity reached the store first")
}

// stuckPeekBuffer's Peek waits for its context to end, as a call to a
// server that does not answer.
type stuckPeekBuffer struct{ *ttl.MemoryBuffer }

func (stuckPeekBuffer) Peek(ctx context.Context, _ ttl.Activity, _ int) ([]ttl.Activity, error) {
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

// stuckMergeStore's Add waits for its context to end.
type stuckMergeStore struct{ ttl.Store }

func (stuckMergeStore) Add(ctx context.Context, _ []ttl.Activity) error {
	<-ctx.Done()
	return context.Cause(ctx)
}

// TestRunnerDrainCutShortByContext: a tick whose context ends during its
// drain, in a Peek or in a merge, reports the drain incomplete
// (not drained, no hold), not a buffer error:
// neither the buffer nor the store failed, so no hold starts. Before, it
// was buffer_error, with a hold: at once when a Peek was cut, and from
// the generation read after a cut merge.
func TestRunnerDrainCutShortByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New(memstore.Options{})
		create(t, mem, memstore.Entity{ID: "idle", Phase: "RUNNING", CreatedAt: time.Now().Add(-time.Hour)})
		lossy := &lossyBuffer{flakyBuffer: &flakyBuffer{b: new(ttl.MemoryBuffer)}}
		for _, c := range []struct {
			name  string
			store ttl.Store
			buf   ttl.Buffer
		}{
			{"peek", mem, stuckPeekBuffer{new(ttl.MemoryBuffer)}},
			{"merge", stuckMergeStore{mem}, lossy},
		} {
			require.NoError(t, lossy.Add(context.Background(), []ttl.Activity{{ID: "other", At: time.Now()}}))
			var log eventLog
			r := newRunner(t, c.store, workspaceRules(time.Minute, time.Hour),
				ttl.RunnerOptions{Buffer: c.buf, Interval: time.Hour, OnEvent: log.add})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			res, err := r.Tick(ctx)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded, c.name)
			assert.False(t, res.Drained, c.name)
			assert.False(t, res.Lost, c.name)
			assert.Equal(t, []string{"standby"}, res.Skipped, c.name)
			assert.True(t, res.HeldUntil.IsZero(), "%s: no hold", c.name)
			assert.Equal(t, uint64(1), r.Stats().IncompleteDrains, c.name)
			synctest.Wait()
			for _, e := range log.all() {
				if e.Kind == ttl.EventRuleSkipped {
					assert.ErrorIs(t, e.Err, context.DeadlineExceeded, c.name)
				}
			}
			require.NoError(t, r.Close(context.Background()))
		}
		// Both ticks were cut short; the rule has not run.
		assert.Empty(t, get(t, mem, "idle").DesiredState)
	})
}
