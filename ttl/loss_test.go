package ttl_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/internal/memstore"
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

func (l *lossyBuffer) Generation(ctx context.Context) (string, error) {
	if err := context.Cause(ctx); err != nil {
		return "", err // as a call to a server would
	}
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
		st := memstore.New(memstore.Options{})
		buf := &lossyBuffer{flakyBuffer: &flakyBuffer{b: new(ttl.MemoryBuffer)}}
		var log eventLog
		tr := newTracker(t, buf, ttl.TrackerOptions{FlushInterval: time.Hour, Resolution: -1, Retain: 10 * time.Minute, OnEvent: log.add})
		r := newRunner(t, st, workspaceRules(5*time.Minute, time.Hour),
			ttl.RunnerOptions{Buffer: buf, Interval: time.Hour, Hold: 90 * time.Second, OnEvent: log.add})
		defer r.Close(context.Background())
		defer tr.Close(ctx)
		old := time.Now().Add(-4 * time.Minute)
		create(t, st, memstore.Entity{ID: "active", Phase: "RUNNING", CreatedAt: old})
		create(t, st, memstore.Entity{ID: "idle", Phase: "RUNNING", CreatedAt: old})
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
		assert.True(t, res.Lost)
		assert.Equal(t, time.Now().Add(90*time.Second), res.HeldUntil)

		fr, err := tr.Flush(ctx) // nothing new, but the retained activity goes again
		require.NoError(t, err)
		assert.Equal(t, ttl.FlushResult{Flushed: 1, Resent: 1}, fr)
		time.Sleep(time.Minute)
		res, err = r.Tick(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, res.Synced)
		assert.True(t, res.Drained && !res.Lost && res.HeldUntil.After(time.Now()) && len(res.Skipped) > 0, "held: still within the hold")
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
			assert.True(t, !res.Drained && !res.Lost && res.HeldUntil.After(time.Now()) && len(res.Skipped) > 0, "a buffer error: not drained, and a hold")
		}
		buf.mu.Lock()
		buf.down = false
		buf.mu.Unlock()
		res, err = r.Tick(ctx)
		require.NoError(t, err)
		assert.True(t, res.Drained && !res.Lost && res.HeldUntil.After(time.Now()) && len(res.Skipped) > 0, "held: the trackers have not flushed yet")
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
		mem := memstore.New(memstore.Options{})
		st := &failingStore{Store: mem, failRule: "standby"}
		r := newRunner(t, st, workspaceRules(10*time.Minute, time.Hour), ttl.RunnerOptions{Interval: time.Hour, Hold: time.Minute})
		defer r.Close(context.Background())
		create(t, mem, memstore.Entity{ID: "ws", Phase: "RUNNING", CreatedAt: time.Now().Add(-11 * time.Minute)})
		_, err := r.Tick(ctx)
		require.ErrorIs(t, err, errDown)

		st.failRule = "" // the store is back
		res, err := r.Tick(ctx)
		require.NoError(t, err)
		assert.True(t, res.Drained && !res.Lost && res.HeldUntil.After(time.Now()) && len(res.Skipped) > 0, "held")
		assert.Empty(t, res.Expired)
		time.Sleep(time.Minute + time.Second)
		res, err = r.Tick(ctx)
		require.NoError(t, err)
		assert.Empty(t, res.Skipped)
		assert.Len(t, res.Expired, 1)
	})
}

// pacedBuffer is a lossyBuffer that keeps the Trackers' FlushInterval
// beside the MemoryBuffer it wraps, so that a restart loses the notes with
// the activity.
type pacedBuffer struct {
	*lossyBuffer
	notes *notes
}

// notes holds the longest FlushInterval noted, by the MemoryBuffer that
// was current then.
type notes struct {
	mu sync.Mutex
	m  map[*ttl.MemoryBuffer]time.Duration
}

func (p pacedBuffer) NoteFlushInterval(_ context.Context, d time.Duration) error {
	b, err := p.get()
	if err != nil {
		return err
	}
	p.notes.mu.Lock()
	defer p.notes.mu.Unlock()
	p.notes.m[b] = max(p.notes.m[b], d)
	return nil
}

func (p pacedBuffer) FlushInterval(context.Context) (time.Duration, error) {
	b, err := p.get()
	if err != nil {
		return 0, err
	}
	p.notes.mu.Lock()
	defer p.notes.mu.Unlock()
	return p.notes.m[b], nil
}

var _ ttl.Paced = pacedBuffer{}

func newPacedBuffer() pacedBuffer {
	return pacedBuffer{&lossyBuffer{flakyBuffer: &flakyBuffer{b: new(ttl.MemoryBuffer)}}, &notes{m: map[*ttl.MemoryBuffer]time.Duration{}}}
}

// TestRunnerHoldsAsLongAsTheTrackersNeed: the Trackers flush every second
// and note it in the buffer, so after a loss the Runner (ticking every
// 2 s) holds its idle rules for 1 s + 2 s, not for the default 30 s + 2 s,
// and an idle entity whose decision fell into the hold is decided at the
// first tick after it; the active one, whose only recent activity was
// lost, is kept. A slower Tracker (10 s) keeps the hold it needs; a
// Runner that knows no Tracker holds for its default, and one with a
// longer Hold for that.
func TestRunnerHoldsAsLongAsTheTrackersNeed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New(memstore.Options{})
		buf := newPacedBuffer()
		fast := newTracker(t, buf, ttl.TrackerOptions{FlushInterval: time.Second, Resolution: -1, Retain: time.Minute})
		w := &wakes{}
		rules := workspaceRules(time.Minute, time.Hour)
		r := newRunner(t, st, rules, ttl.RunnerOptions{Buffer: buf, Interval: 2 * time.Second, Wake: w.Wake})
		longer := newRunner(t, st, nil, ttl.RunnerOptions{Buffer: buf, Interval: 2 * time.Second, Hold: 10 * time.Second})
		defer longer.Close(context.Background())
		defer r.Close(context.Background())
		defer fast.Close(ctx)
		t0 := time.Now()
		// Both idle by the store from 7 s on; "active" is not.
		create(t, st, memstore.Entity{ID: "active", Phase: "RUNNING", CreatedAt: t0.Add(-53 * time.Second)})
		create(t, st, memstore.Entity{ID: "idle", Phase: "RUNNING", CreatedAt: t0.Add(-53 * time.Second)})
		fast.Record("other") // flushed, and the interval noted, at 1 s

		time.Sleep(4500 * time.Millisecond)
		fast.Record("active")
		time.Sleep(time.Second)
		synctest.Wait()
		buf.restart() // at 5.5 s, with active's activity of 4.5 s
		time.Sleep(time.Second)
		synctest.Wait() // the tick at 6 s found the loss
		assert.Equal(t, uint64(1), r.Stats().BufferLosses)
		assert.Equal(t, time.Second, r.Stats().FlushInterval)
		assert.Equal(t, t0.Add(9*time.Second), r.Stats().HeldUntil, "the loss at 6 s + 1 s + 2 s")
		assert.Equal(t, t0.Add(16*time.Second), longer.Stats().HeldUntil, "at least Hold")
		assert.Empty(t, w.take())

		time.Sleep(4 * time.Second) // to 10.5 s: the tick at 10 s is past the hold
		synctest.Wait()
		assert.Equal(t, [][]string{{"idle"}}, w.take(), "decided at the first tick after the hold")
		assert.Equal(t, "STANDBY", get(t, st, "idle").DesiredState)
		assert.Empty(t, get(t, st, "active").DesiredState, "its lost activity was sent again")
		assert.Equal(t, t0.Add(4500*time.Millisecond), get(t, st, "active").LastActivityAt)

		// A Tracker that flushes every 10 s: the next loss holds for it.
		slow := newTracker(t, buf, ttl.TrackerOptions{FlushInterval: 10 * time.Second, Resolution: -1, Retain: time.Minute})
		defer slow.Close(ctx)
		slow.Record("other")
		time.Sleep(12 * time.Second) // to 22.5 s: flushed at 20.5 s, read by the tick at 22 s
		synctest.Wait()
		assert.Equal(t, 10*time.Second, r.Stats().FlushInterval)
		buf.restart()
		time.Sleep(2 * time.Second)
		synctest.Wait() // the tick at 24 s found the loss
		assert.Equal(t, 10*time.Second, r.Stats().FlushInterval, "kept, though the buffer lost its notes")
		assert.Equal(t, t0.Add(36*time.Second), r.Stats().HeldUntil, "the loss at 24 s + 10 s + 2 s")

		// A Runner that has not seen a note holds for its default.
		fresh := newPacedBuffer()
		unknown := newRunner(t, st, nil, ttl.RunnerOptions{Buffer: fresh, Interval: 2 * time.Second})
		defer unknown.Close(context.Background())
		_, err := unknown.Tick(ctx)
		require.NoError(t, err)
		fresh.restart()
		res, err := unknown.Tick(ctx)
		require.NoError(t, err)
		assert.True(t, res.Lost)
		assert.Equal(t, time.Now().Add(30*time.Second+2*time.Second), res.HeldUntil)
	})
}
