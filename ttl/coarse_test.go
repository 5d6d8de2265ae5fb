package ttl_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/ttl"
)

// TestCoarseTimeNeverExpiresEarly: with a coarse clock, Record's time must
// never be earlier than the true time of the activity, or a TTL fires
// before it has elapsed. Activity at 1.9 s, recorded as 1 s, expired an
// 8 s TTL at 9.5 s, 7.6 s after it. Rounded up, it expires within
// TTL + Resolution, and never before TTL.
func TestCoarseTimeNeverExpiresEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := ttl.NewMemoryStore(ttl.MemoryStoreOptions{})
		buf := ttl.NewMemoryBuffer()
		tr := newTracker(t, buf, ttl.TrackerOptions{FlushInterval: time.Hour, Resolution: time.Second})
		r := newRunner(t, st, ttl.WorkspaceRules(8*time.Second, time.Hour), ttl.RunnerOptions{Buffer: buf, Interval: time.Hour})
		defer r.Close(context.Background())
		defer tr.Close(ctx)
		t0 := time.Now()
		create(t, st, ttl.Entity{ID: "ws", Phase: "RUNNING", CreatedAt: t0})

		time.Sleep(1900 * time.Millisecond)
		synctest.Wait()
		active := time.Now()
		tr.Record("ws")
		require.NoError(t, flushErr(tr.Flush(ctx)))
		recorded := contents(t, buf)["ws"]
		assert.False(t, recorded.Before(active), "recorded %v, before the activity at %v", recorded, active)
		assert.False(t, recorded.After(active.Add(time.Second)), "recorded %v, more than Resolution after %v", recorded, active)

		var expiredAt time.Time
		for time.Since(t0) < 20*time.Second {
			res, err := r.Tick(ctx)
			require.NoError(t, err)
			if len(res.Expired) > 0 {
				expiredAt = time.Now()
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		require.False(t, expiredAt.IsZero(), "never expired")
		idle := expiredAt.Sub(active)
		assert.Greater(t, idle, 8*time.Second, "expired %v after the activity, before its TTL", idle)
		assert.LessOrEqual(t, idle, 9*time.Second+100*time.Millisecond, "expired later than TTL + Resolution (+ one tick)")
	})
}
