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
		st := ttl.NewMemoryStore(ttl.MemoryStoreOptions{})
		buf := &flakyBuffer{b: ttl.NewMemoryBuffer()}
		r := newRunner(t, st, ttl.WorkspaceRules(5*time.Second, time.Hour),
			ttl.RunnerOptions{Buffer: buf, Interval: time.Hour, BatchSize: 100})
		defer r.Close(context.Background())
		now := time.Now()
		const n = 300
		older, newer := make([]ttl.Activity, n), make([]ttl.Activity, n)
		for i := range n {
			id := fmt.Sprintf("ws-%03d", i)
			create(t, st, ttl.Entity{ID: id, Phase: "RUNNING", CreatedAt: now.Add(-7 * time.Second)})
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
	st := ttl.NewMemoryStore(ttl.MemoryStoreOptions{Clock: mock})
	buf := slowBuffer{ttl.NewMemoryBuffer(), mock, 4 * time.Second}
	r := newRunner(t, st, ttl.WorkspaceRules(time.Minute, time.Hour),
		ttl.RunnerOptions{Buffer: buf, Interval: 10 * time.Second, BatchSize: 10, Clock: mock})
	defer r.Close(context.Background())
	var acts []ttl.Activity
	for i := range 50 {
		id := fmt.Sprintf("ws-%02d", i)
		create(t, st, ttl.Entity{ID: id, Phase: "RUNNING", CreatedAt: t0.Add(-time.Hour)})
		acts = append(acts, ttl.Activity{ID: id, At: t0})
	}
	require.NoError(t, buf.Add(ctx, acts))
	res, err := r.Tick(ctx)
	require.NoError(t, err)
	assert.Equal(t, 30, res.Synced, "three pages in 12 s, then the Interval (10 s) is over")
	assert.False(t, res.Drained)
	assert.Equal(t, ttl.ReasonDrainIncomplete, res.SkipReason)
	assert.Equal(t, []string{"standby"}, res.Skipped)
	assert.Empty(t, res.Expired)

	// The loop's tick, due at 10 s, drains the rest; then the rule runs.
	require.Eventually(t, func() bool { return buf.Len() == 0 && r.Stats().Ticks >= 2 }, 5*time.Second, 10*time.Millisecond)
	s := r.Stats()
	assert.Equal(t, uint64(50), s.Synced)
	assert.Equal(t, uint64(1), s.IncompleteDrains)
	assert.Zero(t, s.Expired, "every entity's activity reached the store first")
}
