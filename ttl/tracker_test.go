package ttl_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/ttl"
)

// contents peeks a whole memory buffer into a map.
func contents(t *testing.T, b *ttl.MemoryBuffer) map[string]time.Time {
	t.Helper()
	acts, err := b.Peek(context.Background(), ttl.Activity{}, 1<<20)
	require.NoError(t, err)
	m := make(map[string]time.Time, len(acts))
	for _, a := range acts {
		m[a.ID] = a.At
	}
	return m
}

func assertTimes(t *testing.T, want, got map[string]time.Time) {
	t.Helper()
	require.Len(t, got, len(want), "got %v", got)
	for id, w := range want {
		assert.True(t, w.Equal(got[id]), "%s at %v, want %v", id, got[id], w)
	}
}

// flushErr drops the result of a Flush, for assertions on its error.
func flushErr(_ ttl.FlushResult, err error) error { return err }

// eventLog collects the events delivered to an OnEvent callback, which runs
// on the reporter's own goroutine.
type eventLog struct {
	mu     sync.Mutex
	events []ttl.Event
}

func (l *eventLog) add(e ttl.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) all() []ttl.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

func newTracker(t *testing.T, sink ttl.Sink, opts ttl.TrackerOptions) *ttl.Tracker {
	t.Helper()
	tr, err := ttl.NewTracker(sink, opts)
	require.NoError(t, err)
	return tr
}

func TestTrackerRecordAndFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		buf := new(ttl.MemoryBuffer)
		tr := newTracker(t, buf, ttl.TrackerOptions{FlushInterval: time.Hour})
		defer tr.Close(ctx)
		t0 := time.Now()

		tr.Record("a")
		tr.Record("b")
		time.Sleep(5 * time.Second)
		synctest.Wait() // let the coarse clock catch up
		tr.Record("a")
		assert.Empty(t, contents(t, buf), "nothing before a flush")

		require.NoError(t, flushErr(tr.Flush(ctx)))
		// Coarse times are rounded up: the default Resolution (1 s) later.
		assertTimes(t, map[string]time.Time{"a": t0.Add(6 * time.Second), "b": t0.Add(time.Second)}, contents(t, buf))
		st := tr.Stats()
		assert.Equal(t, uint64(3), st.Records)
		assert.Equal(t, uint64(2), st.Flushed)
		assert.Equal(t, uint64(1), st.Flushes)
		assert.Equal(t, 0, st.Pending)
		assert.Equal(t, 2, st.Buffered)
		assert.Equal(t, t0.Add(5*time.Second), st.LastFlush)

		// A flush with nothing new sends nothing and drops the idle ids.
		require.NoError(t, flushErr(tr.Flush(ctx)))
		st = tr.Stats()
		assert.Equal(t, uint64(1), st.Flushes)
		assert.Equal(t, 0, st.Buffered)
	})
}

// TestTrackerResolution shows the coarse clock: times are the last reading
// (taken twice per Resolution) plus Resolution, never earlier than the
// truth and later by at most Resolution; a negative Resolution reads the
// clock every time.
func TestTrackerResolution(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		coarseBuf, exactBuf := new(ttl.MemoryBuffer), new(ttl.MemoryBuffer)
		coarse := newTracker(t, coarseBuf, ttl.TrackerOptions{Resolution: time.Second})
		exact := newTracker(t, exactBuf, ttl.TrackerOptions{Resolution: -1})
		t0 := time.Now()
		time.Sleep(1700 * time.Millisecond)
		synctest.Wait() // the refresh at 1.5 s has run
		coarse.Record("a")
		exact.Record("a")
		require.NoError(t, coarse.Close(ctx))
		require.NoError(t, exact.Close(ctx))
		assertTimes(t, map[string]time.Time{"a": t0.Add(2500 * time.Millisecond)}, contents(t, coarseBuf))
		assertTimes(t, map[string]time.Time{"a": t0.Add(1700 * time.Millisecond)}, contents(t, exactBuf))
	})
}

func TestTrackerLoopAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		buf := new(ttl.MemoryBuffer)
		tr := newTracker(t, buf, ttl.TrackerOptions{}) // FlushInterval 30 s
		t0 := time.Now()
		tr.Record("a")
		time.Sleep(29 * time.Second)
		synctest.Wait()
		assert.Empty(t, contents(t, buf), "flushed before FlushInterval")
		time.Sleep(time.Second)
		synctest.Wait()
		// Rounded up by the default Resolution (1 s).
		assertTimes(t, map[string]time.Time{"a": t0.Add(time.Second)}, contents(t, buf))

		tr.Record("b")
		require.NoError(t, tr.Close(ctx))
		assertTimes(t, map[string]time.Time{"a": t0.Add(time.Second), "b": t0.Add(31 * time.Second)}, contents(t, buf))
		require.NoError(t, tr.Close(ctx), "Close is idempotent")

		// After Close the loop is gone; Record still works, read from the clock.
		time.Sleep(time.Minute)
		tr.Record("c")
		synctest.Wait()
		assert.NotContains(t, contents(t, buf), "c")
		require.NoError(t, flushErr(tr.Flush(ctx)))
		assert.Equal(t, t0.Add(90*time.Second), contents(t, buf)["c"])
	})
}

func TestTrackerOutOfOrderNeverMovesBack(t *testing.T) {
	ctx := context.Background()
	buf := new(ttl.MemoryBuffer)
	tr := newTracker(t, buf, ttl.TrackerOptions{FlushInterval: time.Hour})
	defer tr.Close(ctx)
	t0 := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)

	tr.RecordAt("a", t0.Add(2*time.Second))
	tr.RecordAt("a", t0.Add(time.Second))
	require.NoError(t, flushErr(tr.Flush(ctx)))
	// Older activity after a flush, then a second tracker's older batch:
	// neither moves time back anywhere.
	tr.RecordAt("a", t0)
	require.NoError(t, flushErr(tr.Flush(ctx)))
	require.NoError(t, buf.Add(ctx, []ttl.Activity{{ID: "a", At: t0.Add(-time.Hour)}}))
	assertTimes(t, map[string]time.Time{"a": t0.Add(2 * time.Second)}, contents(t, buf))
}

// TestTrackerRecordAtOutOfRange: a time int64 nanoseconds cannot hold
// would wrap around (the year 1600 to 2184) and pin the entity active; it
// is ignored.
func TestTrackerRecordAtOutOfRange(t *testing.T) {
	ctx := context.Background()
	buf := new(ttl.MemoryBuffer)
	tr := newTracker(t, buf, ttl.TrackerOptions{FlushInterval: time.Hour})
	defer tr.Close(ctx)
	t0 := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)
	tr.RecordAt("a", t0)
	tr.RecordAt("a", time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC))
	tr.RecordAt("a", time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC))
	tr.RecordAt("b", time.Time{})
	tr.RecordAt("b", time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC))
	require.NoError(t, flushErr(tr.Flush(ctx)))
	assertTimes(t, map[string]time.Time{"a": t0}, contents(t, buf))
}

// failingSink fails every Add while failing is set, and otherwise passes
// batches to a MemoryBuffer.
type failingSink struct {
	buf     *ttl.MemoryBuffer
	mu      sync.Mutex
	failing bool
	failAt  int // fail the failAt-th call (1-based) when > 0
	calls   int
}

var errDown = errors.New("sink down")

func (s *failingSink) Add(ctx context.Context, acts []ttl.Activity) error {
	s.mu.Lock()
	s.calls++
	fail := s.failing || s.calls == s.failAt
	s.mu.Unlock()
	if fail {
		return errDown
	}
	return s.buf.Add(ctx, acts)
}

func TestTrackerFailedFlushKeepsActivity(t *testing.T) {
	ctx := context.Background()
	sink := &failingSink{buf: new(ttl.MemoryBuffer), failing: true}
	var log eventLog
	tr := newTracker(t, sink, ttl.TrackerOptions{FlushInterval: time.Hour, OnEvent: log.add})
	defer tr.Close(ctx)
	t0 := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)

	tr.RecordAt("a", t0.Add(time.Second))
	tr.RecordAt("b", t0)
	_, err := tr.Flush(ctx)
	require.ErrorIs(t, err, errDown)
	assert.Equal(t, 2, tr.Stats().Pending)

	// Newer and older activity while the sink is down: greater wins.
	tr.RecordAt("a", t0)
	tr.RecordAt("b", t0.Add(3*time.Second))
	sink.mu.Lock()
	sink.failing = false
	sink.mu.Unlock()
	require.NoError(t, flushErr(tr.Flush(ctx)))
	assertTimes(t, map[string]time.Time{"a": t0.Add(time.Second), "b": t0.Add(3 * time.Second)}, contents(t, sink.buf))

	st := tr.Stats()
	assert.Equal(t, uint64(1), st.FlushErrors)
	assert.Equal(t, uint64(2), st.Flushed)
	require.NoError(t, tr.Close(ctx)) // delivers the queued events
	events := log.all()
	require.Len(t, events, 2)
	assert.Equal(t, ttl.EventFlush, events[0].Kind)
	assert.ErrorIs(t, events[0].Err, errDown)
	assert.Equal(t, 2, events[0].Count)
	assert.NoError(t, events[1].Err)
}

func TestTrackerPartialFlushFailure(t *testing.T) {
	ctx := context.Background()
	sink := &failingSink{buf: new(ttl.MemoryBuffer), failAt: 2}
	tr := newTracker(t, sink, ttl.TrackerOptions{FlushInterval: time.Hour, BatchSize: 2})
	defer tr.Close(ctx)
	t0 := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)
	want := map[string]time.Time{}
	for i := range 5 {
		id := fmt.Sprint("id", i)
		tr.RecordAt(id, t0.Add(time.Duration(i)*time.Second))
		want[id] = t0.Add(time.Duration(i) * time.Second)
	}
	require.ErrorIs(t, flushErr(tr.Flush(ctx)), errDown)
	assert.Len(t, contents(t, sink.buf), 2, "the first batch went through")
	assert.Equal(t, 3, tr.Stats().Pending, "the failed batch and the one after it are kept")
	require.NoError(t, flushErr(tr.Flush(ctx)))
	assertTimes(t, want, contents(t, sink.buf))
}

// TestTrackerCrashLosesAtMostOneInterval: at any moment, what the next stage
// holds is at most FlushInterval behind the activity recorded, so a crash
// loses at most one interval.
func TestTrackerCrashLosesAtMostOneInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		buf := new(ttl.MemoryBuffer)
		const interval = 30 * time.Second
		tr := newTracker(t, buf, ttl.TrackerOptions{FlushInterval: interval})
		defer tr.Close(ctx)
		t0 := time.Now()
		for i := 1; i <= 180; i++ {
			tr.Record("ws")
			time.Sleep(time.Second)
			synctest.Wait()
			// Crash here: the buffer is all that survives.
			last := time.Now().Add(-time.Second) // the Record above
			if i > int(interval/time.Second) {
				got := contents(t, buf)["ws"]
				require.False(t, got.Before(last.Add(-interval)),
					"after %v the buffer holds %v, more than %v behind %v", time.Since(t0), got, interval, last)
			}
		}
	})
}

func TestTrackerConcurrentRecord(t *testing.T) {
	ctx := context.Background()
	buf := new(ttl.MemoryBuffer)
	tr := newTracker(t, buf, ttl.TrackerOptions{FlushInterval: time.Hour, Shards: 4})
	defer tr.Close(ctx)
	t0 := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)
	const workers, rounds, ids = 8, 200, 50
	wsIDs, otherIDs := make([]string, ids), make([]string, ids)
	for i := range ids {
		wsIDs[i], otherIDs[i] = fmt.Sprint("ws", i), fmt.Sprint("other", i)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	flushed := make(chan error, 1)
	go func() {
		var err error
		for {
			select {
			case <-stop:
				flushed <- err
				return
			default:
				err = errors.Join(err, flushErr(tr.Flush(ctx)))
			}
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				for i := range ids {
					tr.RecordAt(wsIDs[i], t0.Add(time.Duration(r*workers+w)*time.Millisecond))
					tr.Record(otherIDs[i])
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	require.NoError(t, <-flushed)
	require.NoError(t, flushErr(tr.Flush(ctx)))
	got := contents(t, buf)
	for i := range ids {
		want := t0.Add(time.Duration((rounds-1)*workers+workers-1) * time.Millisecond)
		assert.True(t, want.Equal(got[fmt.Sprint("ws", i)]), "ws%d at %v, want %v", i, got[fmt.Sprint("ws", i)], want)
		assert.Contains(t, got, fmt.Sprint("other", i))
	}
	assert.Equal(t, uint64(workers*rounds*ids*2), tr.Stats().Records)
}

func TestTrackerRecordDoesNotAllocate(t *testing.T) {
	ctx := context.Background()
	tr := newTracker(t, new(ttl.MemoryBuffer), ttl.TrackerOptions{FlushInterval: time.Hour})
	defer tr.Close(ctx)
	id := "workspace-0123456789"
	tr.Record(id)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { tr.Record(id) }))
	// A flushed id stays allocation-free in the next interval.
	require.NoError(t, flushErr(tr.Flush(ctx)))
	assert.Zero(t, testing.AllocsPerRun(1000, func() { tr.Record(id) }))
}

// TestTrackerMockClock drives a Tracker with a clock.Mock, as users who
// inject one do.
func TestTrackerMockClock(t *testing.T) {
	ctx := context.Background()
	mock := clock.NewMock()
	t0 := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)
	mock.Set(t0)
	buf := new(ttl.MemoryBuffer)
	tr := newTracker(t, buf, ttl.TrackerOptions{Clock: mock, Resolution: -1, FlushInterval: 30 * time.Second})
	defer tr.Close(ctx)
	tr.Record("a")
	mock.Add(10 * time.Second)
	tr.Record("b")
	mock.Add(20 * time.Second) // the loop's flush fires
	require.Eventually(t, func() bool { return len(contents(t, buf)) == 2 }, 5*time.Second, time.Millisecond)
	assertTimes(t, map[string]time.Time{"a": t0, "b": t0.Add(10 * time.Second)}, contents(t, buf))
}

func TestNewTrackerValidates(t *testing.T) {
	buf := new(ttl.MemoryBuffer)
	for _, c := range []struct {
		sink ttl.Sink
		opts ttl.TrackerOptions
		want string
	}{
		{nil, ttl.TrackerOptions{}, "sink"},
		{buf, ttl.TrackerOptions{Shards: -1}, "Shards"},
		{buf, ttl.TrackerOptions{Shards: 1 << 20}, "Shards"},
		{buf, ttl.TrackerOptions{BatchSize: -1}, "BatchSize"},
		{buf, ttl.TrackerOptions{EventQueue: -1}, "EventQueue"},
		{buf, ttl.TrackerOptions{Retain: -time.Second}, "Retain"},
	} {
		tr, err := ttl.NewTracker(c.sink, c.opts)
		assert.Nil(t, tr)
		assert.ErrorIs(t, err, ttl.ErrInvalid)
		assert.ErrorContains(t, err, c.want)
	}
}

// blockingSink blocks every Add until its context ends, while block is set.
type blockingSink struct {
	buf   *ttl.MemoryBuffer
	block atomic.Bool
}

func (s *blockingSink) Add(ctx context.Context, acts []ttl.Activity) error {
	if s.block.Load() {
		<-ctx.Done()
		return context.Cause(ctx)
	}
	return s.buf.Add(ctx, acts)
}

// TestTrackerCloseDuringStuckFlush: Close cancels a loop flush stuck on a
// dead sink, and the final flush still delivers that flush's activity.
func TestTrackerCloseDuringStuckFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &blockingSink{buf: new(ttl.MemoryBuffer)}
		sink.block.Store(true)
		tr := newTracker(t, sink, ttl.TrackerOptions{})
		t0 := time.Now()
		tr.Record("a")
		time.Sleep(31 * time.Second) // the loop's flush is now stuck
		synctest.Wait()
		assert.Equal(t, uint64(0), tr.Stats().Flushed)
		sink.block.Store(false)
		require.NoError(t, tr.Close(context.Background()))
		assertTimes(t, map[string]time.Time{"a": t0.Add(time.Second)}, contents(t, sink.buf)) // rounded up by Resolution
		assert.Equal(t, uint64(1), tr.Stats().FlushErrors, "the cancelled loop flush")
	})
}

// BenchmarkTrackerRecord measures Record on ids already buffered, the
// steady state of a proxy, with the coarse clock (the default) and with a
// clock read on every call (Resolution -1): what the coarse clock saves.
func BenchmarkTrackerRecord(b *testing.B) {
	for _, c := range []struct {
		name       string
		resolution time.Duration
	}{{"coarse", 0}, {"exact", -1}} {
		b.Run(c.name, func(b *testing.B) {
			tr, err := ttl.NewTracker(new(ttl.MemoryBuffer), ttl.TrackerOptions{FlushInterval: time.Hour, Resolution: c.resolution})
			require.NoError(b, err)
			defer tr.Close(context.Background())
			ids := make([]string, 1000)
			for i := range ids {
				ids[i] = fmt.Sprintf("workspace-%08d", i)
				tr.Record(ids[i])
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(397)) % len(ids)
				for pb.Next() {
					tr.Record(ids[i])
					if i++; i == len(ids) {
						i = 0
					}
				}
			})
		})
	}
}

// TestTrackerNegativeFlushIntervalHasNoLoop: a negative FlushInterval
// switches the loop off; Flush by hand still sends what was recorded.
func TestTrackerNegativeFlushIntervalHasNoLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		buf := new(ttl.MemoryBuffer)
		tr, err := ttl.NewTracker(buf, ttl.TrackerOptions{FlushInterval: -1, Resolution: -1})
		require.NoError(t, err)
		tr.Record("a")
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		assert.Zero(t, tr.Stats().Flushes, "no loop flushed")
		res, err := tr.Flush(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, res.Flushed)
		got, err := buf.Peek(ctx, ttl.Activity{}, 10)
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, "a", got[0].ID)
		require.NoError(t, tr.Close(ctx))
	})
}
