package ttl_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/ttl"
)

// lossyBuffer is a flakyBuffer with a generation that changes when it
// restarts empty.
type lossyBuffer struct {
	*flakyBuffer
	gen int
}

func (l *lossyBuffer) restart() {
	l.flakyBuffer.restart()
	l.mu.Lock()
	l.gen++
	l.mu.Unlock()
}

func (l *lossyBuffer) Generation(context.Context) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		return "", errDown
	}
	return fmt.Sprint("gen-", l.gen), nil
}

var _ ttl.Lossy = (*lossyBuffer)(nil)

// TestRunnerHoldsIdleRulesAfterLoss: the buffer restarts empty while it
// holds an active entity's only recent activity. The Runner sees the new
// generation and holds its idle rule for Hold; the Tracker sees it at its
// next flush and sends its retained activity again; once the hold is over
// the rule decides on complete activity. An unreachable buffer starts the
// same hold, which lasts past the outage, because the Trackers could not
// flush during it.
func TestRunnerHoldsIdleRulesAfterLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := ttl.NewMemoryStore(ttl.MemoryStoreOptions{})
		buf := &lossyBuffer{flakyBuffer: &flakyBuffer{b: ttl.NewMemoryBuffer()}}
		var log eventLog
		tr := newTracker(t, buf, ttl.TrackerOptions{FlushInterval: time.Hour, Resolution: -1, Retain: 10 * time.Minute, OnEvent: log.add})
		r := newRunner(t, st, ttl.WorkspaceRules(5*time.Minute, time.Hour),
			ttl.RunnerOptions{Buffer: buf, Interval: time.Hour, Hold: 90 * time.Second, OnEvent: log.add})
		defer r.Close(context.Background())
		defer tr.Close(ctx)
		old := time.Now().Add(-4 * time.Minute)
		create(t, st, ttl.Entity{ID: "active", Phase: "RUNNING", CreatedAt: old})
		create(t, st, ttl.Entity{ID: "idle", Phase: "RUNNING", CreatedAt: old})
		_, err := r.Tick(ctx)
		require.NoError(t, err)

		tr.Record("active")
		require.NoError(t, flushErr(tr.Flush(ctx)))
		time.Sleep(2 * time.Minute) // both idle per the store, only idle in truth
		buf.restart()
		res, err := r.Tick(ctx)
		require.NoError(t, err)
		assert.Empty(t, res.Expired)
		assert.Equal(t, []string{"standby"}, res.Skipped)
		assert.Equal(t, ttl.ReasonBufferLost, res.SkipReason)
		assert.Equal(t, time.Now().Add(90*time.Second), res.HeldUntil)

		fr, err := tr.Flush(ctx) // nothing new, but the retained activity goes again
		require.NoError(t, err)
		assert.Equal(t, ttl.FlushResult{Flushed: 1, Resent: 1}, fr)
		time.Sleep(time.Minute)
		res, err = r.Tick(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, res.Synced)
		assert.Equal(t, ttl.ReasonHeld, res.SkipReason, "still within the hold")
		time.Sleep(31 * time.Second)
		res, err = r.Tick(ctx)
		require.NoError(t, err)
		assert.Equal(t, []ttl.Expiry{{ID: "idle", Rule: "standby", Then: "STANDBY", LastActivityAt: old, DecidedAt: time.Now()}}, res.Expired)
		assert.Empty(t, res.Skipped)
		assert.True(t, res.HeldUntil.IsZero())
		assert.Empty(t, get(t, st, "active").DesiredState)

		// Unreachable for 10 minutes: the rule is skipped throughout, and
		// held for Hold after the outage, so the Tracker's kept activity
		// arrives before it runs.
		buf.mu.Lock()
		buf.down = true
		buf.mu.Unlock()
		for range 10 {
			tr.Record("active")
			_, err := tr.Flush(ctx)
			require.ErrorIs(t, err, errDown)
			time.Sleep(time.Minute)
			res, err = r.Tick(ctx)
			require.ErrorIs(t, err, errDown)
			assert.Equal(t, ttl.ReasonBufferError, res.SkipReason)
		}
		buf.mu.Lock()
		buf.down = false
		buf.mu.Unlock()
		res, err = r.Tick(ctx)
		require.NoError(t, err)
		assert.Equal(t, ttl.ReasonHeld, res.SkipReason, "the trackers have not flushed yet")
		assert.Empty(t, get(t, st, "active").DesiredState)
		require.NoError(t, flushErr(tr.Flush(ctx)))
		time.Sleep(91 * time.Second)
		res, err = r.Tick(ctx)
		require.NoError(t, err)
		assert.Empty(t, res.Skipped)
		assert.Empty(t, res.Expired)
		assert.Empty(t, get(t, st, "active").DesiredState)

		s := r.Stats()
		assert.Equal(t, uint64(1), s.BufferLosses)
		assert.Equal(t, uint64(10), s.IncompleteDrains)
		assert.Equal(t, uint64(1), tr.Stats().SinkLosses)
		assert.Equal(t, uint64(1), tr.Stats().Resent)
		require.NoError(t, tr.Close(ctx))
		require.NoError(t, r.Close(ctx))
		var lost []ttl.Event
		for _, e := range log.all() {
			if e.Kind == ttl.EventBufferLost {
				lost = append(lost, e)
			}
		}
		require.Len(t, lost, 2, "one from the runner, one from the tracker")
	})
}

// TestRunnerHoldsWithoutBufferAfterStoreErrors: without a Buffer the
// Trackers write to the Store themselves, and their flushes fail while it
// is down; so after a tick whose rules the Store refused, the idle rules
// wait for Hold, until every Tracker has flushed again.
func TestRunnerHoldsWithoutBufferAfterStoreErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := ttl.NewMemoryStore(ttl.MemoryStoreOptions{})
		st := &failingStore{Store: mem, failRule: "standby"}
		r := newRunner(t, st, ttl.WorkspaceRules(10*time.Minute, time.Hour), ttl.RunnerOptions{Interval: time.Hour, Hold: time.Minute})
		defer r.Close(context.Background())
		create(t, mem, ttl.Entity{ID: "ws", Phase: "RUNNING", CreatedAt: time.Now().Add(-11 * time.Minute)})
		_, err := r.Tick(ctx)
		require.ErrorIs(t, err, errDown)

		st.failRule = "" // the store is back
		res, err := r.Tick(ctx)
		require.NoError(t, err)
		assert.Equal(t, ttl.ReasonHeld, res.SkipReason)
		assert.Empty(t, res.Expired)
		time.Sleep(time.Minute + time.Second)
		res, err = r.Tick(ctx)
		require.NoError(t, err)
		assert.Empty(t, res.Skipped)
		assert.Len(t, res.Expired, 1)
	})
}
