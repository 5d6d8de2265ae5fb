package ttl_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/event"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/internal/memstore"
)

func TestEventKindString(t *testing.T) {
	for k, want := range map[ttl.EventKind]string{
		ttl.EventFlush:       "flush",
		ttl.EventExpire:      "expire",
		ttl.EventRuleError:   "rule_error",
		ttl.EventRuleSkipped: "rule_skipped",
		ttl.EventBufferLost:  "buffer_lost",
		0:                    "EventKind(0)",
		99:                   "EventKind(99)",
	} {
		assert.Equal(t, want, k.String())
	}
}

// TestRunnerEventsDoNotBlockTick: OnEvent runs on the runner's own
// goroutine, so a stuck callback delays no tick; a full queue drops events
// and counts them; Close waits for the callback until its ctx ends and
// delivers what was queued once the callback returns.
func TestRunnerEventsDoNotBlockTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New(memstore.Options{})
		release := make(chan struct{})
		var log eventLog
		r := newRunner(t, st, containerRules(time.Hour, 8*time.Hour), ttl.RunnerOptions{
			Interval: time.Hour, EventQueue: 2,
			OnEvent: func(e ttl.Event) {
				r := e // the callback may block; Tick must not wait for it
				<-release
				log.add(r)
			}})
		old := time.Now().Add(-9 * time.Hour)
		create(t, st, memstore.Entity{ID: "a", Phase: "RUNNING", CreatedAt: old})
		res, err := r.Tick(ctx)
		require.NoError(t, err)
		assert.Len(t, res.Expired, 1)
		synctest.Wait() // the callback has a's event and is stuck
		for _, id := range []string{"b", "c", "d", "e"} {
			create(t, st, memstore.Entity{ID: id, Phase: "RUNNING", CreatedAt: old})
		}
		res, err = r.Tick(ctx)
		require.NoError(t, err)
		assert.Len(t, res.Expired, 4)
		// One event is in the callback, two are queued, the other two
		// dropped.
		assert.Equal(t, uint64(2), r.Stats().EventsDropped)

		stop, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		err = r.Close(stop)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorContains(t, err, "ttl: runner")
		close(release)
		require.NoError(t, r.Close(ctx))
		events := log.all()
		require.Len(t, events, 3)
		for _, e := range events {
			assert.Equal(t, ttl.EventExpire, e.Kind)
			assert.Equal(t, time.Now().Add(-time.Second), e.Time, "on the runner's clock, when it happened")
		}
	})
}

// TestTrackerEventCallbackMayCallTracker: the callback runs outside every
// lock, so it may call back into the Tracker.
func TestTrackerEventCallbackMayCallTracker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		buf := new(ttl.MemoryBuffer)
		var tr *ttl.Tracker
		flushes := make(chan uint64, 1)
		tr = newTracker(t, buf, ttl.TrackerOptions{FlushInterval: time.Hour, OnEvent: func(ttl.Event) {
			flushes <- tr.Stats().Flushes
		}})
		tr.Record("a")
		tr.Record("b")
		res, err := tr.Flush(ctx)
		require.NoError(t, err)
		assert.Equal(t, ttl.FlushResult{Flushed: 2}, res)
		assert.Equal(t, uint64(1), <-flushes)
		require.NoError(t, tr.Close(ctx))
		assert.Zero(t, tr.Stats().EventsDropped)
	})
}

// TestTrackerFlushResultCountsKept: a refused batch is reported as kept.
func TestTrackerFlushResultCountsKept(t *testing.T) {
	ctx := context.Background()
	sink := &failingSink{buf: new(ttl.MemoryBuffer), failAt: 2}
	tr := newTracker(t, sink, ttl.TrackerOptions{FlushInterval: time.Hour, BatchSize: 2})
	defer tr.Close(ctx)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		tr.Record(id)
	}
	res, err := tr.Flush(ctx)
	require.True(t, errors.Is(err, errDown))
	assert.Equal(t, ttl.FlushResult{Flushed: 2, Kept: 3}, res)
}

// TestRunnerEventBurstLeavesRoomForRareEvents: with OnEvent stuck, one
// tick expires 2,000 entities, far more expire events than the queue
// holds; the next tick finds the buffer lost. The expire events fill only
// their share of the queue, so the buffer_lost and rule_skipped events an
// operator needs are still delivered. Before, the expire events filled the
// whole queue and those were dropped.
func TestRunnerEventBurstLeavesRoomForRareEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New(memstore.Options{})
		buf := &lossyBuffer{flakyBuffer: &flakyBuffer{b: new(ttl.MemoryBuffer)}}
		release := make(chan struct{})
		var log eventLog
		r := newRunner(t, st, workspaceRules(time.Minute, time.Hour), ttl.RunnerOptions{
			Buffer: buf, Interval: time.Hour,
			OnEvent: func(e ttl.Event) {
				<-release
				log.add(e)
			}})
		const n = 2000
		for i := range n {
			create(t, st, memstore.Entity{ID: fmt.Sprintf("ws-%04d", i), Phase: "RUNNING", CreatedAt: time.Now().Add(-time.Hour)})
		}
		res, err := r.Tick(ctx)
		require.NoError(t, err)
		require.Len(t, res.Expired, n)
		buf.restart()
		res, err = r.Tick(ctx)
		require.NoError(t, err)
		require.True(t, res.Lost)

		close(release)
		require.NoError(t, r.Close(ctx))
		count := map[ttl.EventKind]int{}
		for _, e := range log.all() {
			count[e.Kind]++
		}
		assert.Equal(t, 1, count[ttl.EventBufferLost])
		assert.Equal(t, 1, count[ttl.EventRuleSkipped])
		assert.LessOrEqual(t, count[ttl.EventExpire], ttl.DefaultEventQueue*7/8+1, "one in the callback, the rest within their share")
		assert.Equal(t, uint64(n-count[ttl.EventExpire]), r.Stats().EventsDropped)
	})
}

// TestDefaultEventQueue: the queue's documented default (1024) is the size
// the shared event queue uses for 0.
func TestDefaultEventQueue(t *testing.T) {
	assert.Equal(t, 1024, ttl.DefaultEventQueue)
	assert.Equal(t, event.DefaultSize, ttl.DefaultEventQueue)
}
