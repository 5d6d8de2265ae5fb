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

// TestCoarseTimeNeverExpiresEarly: with a coarse clock, Record's time must
// never be earlier than the true time of the activity, or a TTL fires
// before it has elapsed. Activity at 1.9 s, recorded as 1 s, expired an
// 8 s TTL at 9.5 s, 7.6 s after it. Rounded up, it expires within
// TTL + Resolution, and never before TTL.
func TestCoarseTimeNeverExpiresEarly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New(memstore.Options{})
		buf := new(ttl.MemoryBuffer)
		tr := newTracker(t, buf, ttl.TrackerOptions{FlushInterval: time.Hour, Resolution: time.Second})
		r := newRunner(t, st, workspaceRules(8*time.Second, time.Hour), ttl.RunnerOptions{Buffer: buf, Interval: time.Hour})
		defer r.Close(context.Background())
		defer tr.Close(ctx)
		t0 := time.Now()
		create(t, st, memstore.Entity{ID: "ws", Phase: "RUNNING", CreatedAt: t0})

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

// starvedClock is the real clock (the bubble's, under synctest) whose
// tickers shorter than a minute tick only every every: the coarse clock's
// refresh of a Tracker on a machine too loaded to run it on time. Longer
// tickers, such as an hour's FlushInterval, tick as asked.
type starvedClock struct {
	clock.Clock
	every time.Duration
}

func (c starvedClock) Ticker(d time.Duration) *clock.Ticker {
	if d < time.Minute {
		d = c.every
	}
	return c.Clock.Ticker(d)
}

// TestCoarseTimeStarvedRefresh: on a loaded machine the goroutine that
// refreshes the coarse clock runs late, here every 5 s instead of twice a
// second. Before, Record then used a reading seconds old: activity 3.9 s
// after the last refresh was recorded at that refresh + 1 s, and a 4 s
// idle rule fired 1.1 s after it. Now the time sent on is never earlier
// than the activity, whether a flush or the late refresh comes first, and
// later only by as long as the refresh was late.
func TestCoarseTimeStarvedRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New(memstore.Options{})
		buf := new(ttl.MemoryBuffer)
		const late = 5 * time.Second
		tr := newTracker(t, buf, ttl.TrackerOptions{FlushInterval: time.Hour, Resolution: time.Second,
			Clock: starvedClock{Clock: clock.New(), every: late}})
		r := newRunner(t, st, workspaceRules(4*time.Second, time.Hour), ttl.RunnerOptions{Buffer: buf, Interval: time.Hour})
		defer r.Close(context.Background())
		defer tr.Close(ctx)
		t0 := time.Now()

		// The incident: activity 3.9 s after the last refresh, flushed
		// before the next one.
		create(t, st, memstore.Entity{ID: "ws", Phase: "RUNNING", CreatedAt: t0})
		tr.Record("ws")
		time.Sleep(3900 * time.Millisecond)
		synctest.Wait()
		active := time.Now()
		tr.Record("ws")
		require.NoError(t, flushErr(tr.Flush(ctx)))
		assert.Equal(t, active, contents(t, buf)["ws"], "the flush found the coarse clock passed and read the clock")
		var decided time.Time
		for time.Since(t0) < 20*time.Second {
			res, err := r.Tick(ctx)
			require.NoError(t, err)
			if len(res.Expired) > 0 {
				decided = time.Now()
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		require.False(t, decided.IsZero(), "never decided")
		assert.GreaterOrEqual(t, decided.Sub(active), 4*time.Second, "decided %v after the last activity, before its TTL", decided.Sub(active))

		// Activity at every 0.7 s for 30 s, flushed every third time: the
		// late refresh settles some of it, the flushes the rest.
		start := time.Now()
		activity := map[string]time.Time{}
		for i := 0; time.Since(start) < 30*time.Second; i++ {
			id := fmt.Sprint("id", i)
			activity[id] = time.Now()
			tr.Record(id)
			tr.Record("all")
			activity["all"] = time.Now()
			// A time buffered just before the activity, past the passed
			// reading: Record must not take it as covering the activity.
			tr.RecordAt("behind", time.Now().Add(-100*time.Millisecond))
			tr.Record("behind")
			activity["behind"] = time.Now()
			if i%3 == 2 {
				require.NoError(t, flushErr(tr.Flush(ctx)))
			}
			time.Sleep(700 * time.Millisecond)
			synctest.Wait()
		}
		require.NoError(t, flushErr(tr.Flush(ctx)))
		got := contents(t, buf)
		for id, at := range activity {
			require.Contains(t, got, id)
			assert.False(t, got[id].Before(at), "%s recorded at %v, before its activity at %v", id, got[id], at)
			assert.LessOrEqual(t, got[id].Sub(at), late+time.Second, "%s recorded %v after its activity", id, got[id].Sub(at))
		}
	})
}
