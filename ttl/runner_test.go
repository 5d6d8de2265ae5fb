package ttl_test

import (
	"context"
	"errors"
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
	"github.com/ttlkit/ttlkit/ttl/internal/memstore"
)

// wakes records Wake calls.
type wakes struct {
	mu    sync.Mutex
	calls [][]string
	err   error
}

func (w *wakes) Wake(_ context.Context, exps []ttl.Expiry) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, len(exps))
	for i, x := range exps {
		ids[i] = x.ID
	}
	slices.Sort(ids)
	w.calls = append(w.calls, ids)
	return w.err
}

func (w *wakes) take() [][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.calls
	w.calls = nil
	return c
}

func newRunner(t *testing.T, st ttl.Store, rules []ttl.Rule, opts ttl.RunnerOptions) *ttl.Runner {
	t.Helper()
	r, err := ttl.NewRunner(st, rules, opts)
	require.NoError(t, err)
	return r
}

func create(t *testing.T, st *memstore.Store, e memstore.Entity) {
	t.Helper()
	_, err := st.Create(context.Background(), e)
	require.NoError(t, err)
}

func get(t *testing.T, st *memstore.Store, id string) memstore.Entity {
	t.Helper()
	e, err := st.Get(context.Background(), id)
	require.NoError(t, err)
	return e
}

// TestRunnerWorkspaces runs a cloud-IDE workspace system end to end on its
// default timings: a
// tracker flushing to a buffer every 30 s, a runner ticking every 60 s,
// RUNNING -> STANDBY after 10 idle minutes, STANDBY -> ARCHIVED 30 minutes
// after the phase changed, and a controller woken with the ids.
func TestRunnerWorkspaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New(memstore.Options{})
		buf := new(ttl.MemoryBuffer)
		w := &wakes{}
		tr := newTracker(t, buf, ttl.TrackerOptions{})
		r := newRunner(t, st, workspaceRules(10*time.Minute, 30*time.Minute),
			ttl.RunnerOptions{Buffer: buf, Wake: w.Wake})
		defer r.Close(context.Background())
		defer tr.Close(ctx)
		t0 := time.Now()
		create(t, st, memstore.Entity{ID: "busy", Phase: "RUNNING"})
		create(t, st, memstore.Entity{ID: "idle", Phase: "RUNNING"})

		// "busy" is used every 45 s for 20 minutes.
		until := func(d time.Duration, each func()) {
			for time.Since(t0) < d {
				each()
				time.Sleep(45 * time.Second)
			}
		}
		until(10*time.Minute+30*time.Second, func() { tr.Record("busy") })
		synctest.Wait()
		assert.Empty(t, w.take(), "nothing expires within 10 minutes")
		until(11*time.Minute+30*time.Second, func() { tr.Record("busy") })
		synctest.Wait()
		// The tick at 11:00 is the first where now - created > 10 min.
		assert.Equal(t, [][]string{{"idle"}}, w.take())
		assert.Equal(t, "STANDBY", get(t, st, "idle").DesiredState)
		assert.Empty(t, get(t, st, "busy").DesiredState)
		last := get(t, st, "busy").LastActivityAt
		assert.True(t, time.Since(last) <= 90*time.Second, "busy's activity is %v old in the store; at most flush + tick (90 s)", time.Since(last))

		// The controller stops "idle"; "busy" stays in use.
		_, err := st.Update(ctx, "idle", memstore.Update{Phase: "STANDBY"})
		require.NoError(t, err)
		stopped := time.Now()
		for time.Since(stopped) < 30*time.Minute {
			tr.Record("busy")
			time.Sleep(time.Minute)
			synctest.Wait()
			assert.Empty(t, w.take(), "at %v after standby", time.Since(stopped))
		}
		// The tick at 30 min is not yet past; the one at 31 min archives.
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, [][]string{{"idle"}}, w.take())
		assert.Equal(t, "ARCHIVED", get(t, st, "idle").DesiredState)
		assert.Empty(t, get(t, st, "busy").DesiredState)

		s := r.Stats()
		assert.Equal(t, uint64(2), s.Expired)
		assert.Equal(t, []ttl.RuleStats{{Name: "standby", Expired: 1}, {Name: "archive", Expired: 1}}, s.Rules)
		assert.Positive(t, s.Synced)
		assert.Zero(t, s.SyncErrors+s.RuleErrors+s.WakeErrors)
	})
}

// TestRunnerActivityBeforeSync is "activity during expiry": an
// entity about to expire that was active just before the tick's sync stays
// running.
func TestRunnerActivityBeforeSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New(memstore.Options{})
		buf := new(ttl.MemoryBuffer)
		tr := newTracker(t, buf, ttl.TrackerOptions{})
		r := newRunner(t, st, workspaceRules(10*time.Minute, 30*time.Minute), ttl.RunnerOptions{Buffer: buf})
		defer r.Close(context.Background())
		defer tr.Close(ctx)
		old := time.Now().Add(-11 * time.Minute)
		create(t, st, memstore.Entity{ID: "active", Phase: "RUNNING", CreatedAt: old})
		create(t, st, memstore.Entity{ID: "idle", Phase: "RUNNING", CreatedAt: old})

		tr.Record("active")
		require.NoError(t, flushErr(tr.Flush(ctx)))
		res, err := r.Tick(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, res.Synced)
		assert.Equal(t, []ttl.Expiry{{ID: "idle", Rule: "standby", Then: "STANDBY", LastActivityAt: old, DecidedAt: time.Now()}}, res.Expired)
		// The tracker's coarse time, rounded up by its Resolution (1 s).
		assert.Equal(t, time.Now().Add(time.Second), get(t, st, "active").LastActivityAt)
		assert.Zero(t, buf.Len())
	})
}

// flakyBuffer wraps a MemoryBuffer that can be lost (a Redis restart) or
// unreachable, and can run a hook between Peek and Remove.
type flakyBuffer struct {
	mu          sync.Mutex
	b           *ttl.MemoryBuffer
	down        bool
	afterPeek   func(peeked []ttl.Activity)
	removeCalls atomic.Int64 // Runners sharing the buffer call Remove at once
}

func (f *flakyBuffer) restart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.b = new(ttl.MemoryBuffer)
}

func (f *flakyBuffer) get() (*ttl.MemoryBuffer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, errDown
	}
	return f.b, nil
}

func (f *flakyBuffer) Add(ctx context.Context, acts []ttl.Activity) error {
	b, err := f.get()
	if err != nil {
		return err
	}
	return b.Add(ctx, acts)
}

func (f *flakyBuffer) Peek(ctx context.Context, after ttl.Activity, max int) ([]ttl.Activity, error) {
	b, err := f.get()
	if err != nil {
		return nil, err
	}
	acts, err := b.Peek(ctx, after, max)
	if f.afterPeek != nil {
		f.afterPeek(acts)
	}
	return acts, err
}

func (f *flakyBuffer) Remove(ctx context.Context, acts []ttl.Activity) (int, error) {
	b, err := f.get()
	if err != nil {
		return 0, err
	}
	f.removeCalls.Add(1)
	return b.Remove(ctx, acts)
}

func TestRunnerBufferLostOrDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New(memstore.Options{})
		buf := &flakyBuffer{b: new(ttl.MemoryBuffer)}
		// Loops slower than the test: every step is taken by hand.
		tr := newTracker(t, buf, ttl.TrackerOptions{FlushInterval: time.Hour})
		r := newRunner(t, st, workspaceRules(10*time.Minute, 30*time.Minute),
			ttl.RunnerOptions{Buffer: buf, Interval: time.Hour})
		defer r.Close(context.Background())
		defer tr.Close(ctx)
		old := time.Now().Add(-9 * time.Minute)
		create(t, st, memstore.Entity{ID: "ws", Phase: "RUNNING", CreatedAt: old})

		// Activity reaches the buffer, then the buffer is lost: the store,
		// which never saw it, decides with what it has.
		tr.Record("ws")
		require.NoError(t, flushErr(tr.Flush(ctx)))
		buf.restart()
		res, err := r.Tick(ctx)
		require.NoError(t, err)
		assert.Zero(t, res.Synced)
		assert.Equal(t, old, get(t, st, "ws").LastActivityAt)

		// The buffer is unreachable: the tick reports it and, since the
		// drain could not reach the end of the buffer, skips the idle rule
		// (ws would expire on the store's stale activity); the tracker
		// keeps its activity for later.
		buf.mu.Lock()
		buf.down = true
		buf.mu.Unlock()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		res, err = r.Tick(ctx)
		require.ErrorIs(t, err, errDown)
		assert.Empty(t, res.Expired)
		assert.Equal(t, []string{"standby"}, res.Skipped)
		assert.False(t, res.Lost)
		assert.True(t, res.HeldUntil.After(time.Now()), "a buffer error starts a hold")
		assert.False(t, res.Drained)
		tr.Record("ws")
		require.ErrorIs(t, flushErr(tr.Flush(ctx)), errDown)

		// Back up: the next flush and tick carry the activity through.
		buf.mu.Lock()
		buf.down = false
		buf.mu.Unlock()
		require.NoError(t, flushErr(tr.Flush(ctx)))
		res, err = r.Tick(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, res.Synced)
		assert.Equal(t, time.Now().Add(time.Second), get(t, st, "ws").LastActivityAt, "coarse time rounded up by Resolution")
		s := r.Stats()
		assert.Equal(t, uint64(1), s.SyncErrors)
		assert.GreaterOrEqual(t, s.Ticks, uint64(3))
	})
}

// TestRunnerDrainKeepsConcurrentAdd: activity added while a batch is being
// written to the store survives the batch's Remove and reaches the store on
// the next tick. A hand-written ZRANGE, UPDATE, ZREM would lose it.
func TestRunnerDrainKeepsConcurrentAdd(t *testing.T) {
	ctx := context.Background()
	mock := clock.NewMock()
	t0 := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)
	mock.Set(t0)
	st := memstore.New(memstore.Options{Clock: mock})
	buf := &flakyBuffer{b: new(ttl.MemoryBuffer)}
	r := newRunner(t, st, nil, ttl.RunnerOptions{Buffer: buf, BatchSize: 2, Clock: mock})
	defer r.Close(context.Background())
	for _, id := range []string{"a", "b", "c"} {
		create(t, st, memstore.Entity{ID: id, Phase: "RUNNING"})
	}
	require.NoError(t, buf.Add(ctx, []ttl.Activity{
		{ID: "a", At: t0.Add(time.Second)}, {ID: "b", At: t0.Add(2 * time.Second)}, {ID: "c", At: t0.Add(3 * time.Second)},
	}))
	// The first entry of the first batch is active again while the batch
	// is written to the store.
	var bumped string
	buf.afterPeek = func(peeked []ttl.Activity) {
		buf.afterPeek = nil
		bumped = peeked[0].ID
		_ = buf.b.Add(ctx, []ttl.Activity{{ID: bumped, At: t0.Add(10 * time.Second)}})
	}
	res, err := r.Tick(ctx)
	require.NoError(t, err)
	// Remove keeps the bumped entry, so the first batch of two removes one
	// entry and the second batch carries the bumped one with the third.
	assert.Equal(t, 4, res.Synced)
	assert.EqualValues(t, 2, buf.removeCalls.Load())
	assert.Zero(t, buf.b.Len())
	want := map[string]time.Time{"a": t0.Add(time.Second), "b": t0.Add(2 * time.Second), "c": t0.Add(3 * time.Second)}
	want[bumped] = t0.Add(10 * time.Second)
	for id, at := range want {
		assert.Equal(t, at, get(t, st, id).LastActivityAt, id)
	}
}

// failingStore fails Apply for one rule.
type failingStore struct {
	ttl.Store
	failRule string
}

func (s *failingStore) Apply(ctx context.Context, r ttl.Rule) ([]ttl.Expiry, error) {
	if r.Name == s.failRule {
		return nil, errDown
	}
	return s.Store.Apply(ctx, r)
}

func TestRunnerErrorsDoNotStopOtherSteps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := memstore.New(memstore.Options{})
		st := &failingStore{Store: mem, failRule: "inactive"}
		w := &wakes{err: errors.New("controller away")}
		var log eventLog
		r := newRunner(t, st, containerRules(time.Hour, 8*time.Hour), ttl.RunnerOptions{
			Wake: w.Wake, OnEvent: log.add})
		defer r.Close(context.Background())
		created := time.Now().Add(-9 * time.Hour)
		create(t, mem, memstore.Entity{ID: "old", Phase: "RUNNING", CreatedAt: created})

		res, err := r.Tick(ctx)
		require.ErrorIs(t, err, errDown)
		require.ErrorContains(t, err, "controller away")
		assert.Equal(t, []ttl.Expiry{{ID: "old", Rule: "lifetime", Then: "DESTROYED", LastActivityAt: created, DecidedAt: time.Now()}}, res.Expired)
		assert.Equal(t, [][]string{{"old"}}, w.take())
		s := r.Stats()
		assert.Equal(t, []ttl.RuleStats{{Name: "inactive", Errors: 1}, {Name: "lifetime", Expired: 1}}, s.Rules)
		assert.Equal(t, uint64(1), s.RuleErrors)
		assert.Equal(t, uint64(1), s.WakeErrors)
		synctest.Wait() // the events are delivered
		events := log.all()
		kinds := make([]ttl.EventKind, len(events))
		for i, e := range events {
			kinds[i] = e.Kind
		}
		assert.Equal(t, []ttl.EventKind{ttl.EventRuleError, ttl.EventExpire}, kinds)
		assert.Equal(t, "old", events[1].ID)
	})
}

// TestRunnerMockClock drives the loop with a clock.Mock shared with the
// store, as users who inject one do.
func TestRunnerMockClock(t *testing.T) {
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC))
	st := memstore.New(memstore.Options{Clock: mock})
	woken := make(chan []string, 10)
	r := newRunner(t, st, workspaceRules(10*time.Minute, 30*time.Minute), ttl.RunnerOptions{
		Clock: mock,
		Wake: func(_ context.Context, exps []ttl.Expiry) error {
			ids := make([]string, len(exps))
			for i, x := range exps {
				ids[i] = x.ID
			}
			woken <- ids
			return nil
		},
	})
	defer r.Close(context.Background())
	create(t, st, memstore.Entity{ID: "ws", Phase: "RUNNING"})
	mock.Add(10 * time.Minute)
	assert.Empty(t, woken)
	deadline := time.After(5 * time.Second)
	for {
		mock.Add(time.Minute)
		select {
		case ids := <-woken:
			assert.Equal(t, []string{"ws"}, ids)
			assert.Equal(t, "STANDBY", get(t, st, "ws").DesiredState)
			return
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatal("the runner loop never woke the controller")
		}
	}
}

// TestRunnersShareStore: two runners on one store (two coordinator
// instances) wake each expired entity once.
func TestRunnersShareStore(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Options{})
	w := &wakes{}
	rules := workspaceRules(10*time.Minute, 30*time.Minute)
	r1 := newRunner(t, st, rules, ttl.RunnerOptions{Wake: w.Wake})
	r2 := newRunner(t, st, rules, ttl.RunnerOptions{Wake: w.Wake})
	defer r1.Close(context.Background())
	defer r2.Close(context.Background())
	for _, id := range []string{"a", "b", "c", "d"} {
		create(t, st, memstore.Entity{ID: id, Phase: "RUNNING", CreatedAt: time.Now().Add(-time.Hour)})
	}
	var wg sync.WaitGroup
	for _, r := range []*ttl.Runner{r1, r2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.Tick(ctx)
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	var all []string
	for _, c := range w.take() {
		all = append(all, c...)
	}
	slices.Sort(all)
	assert.Equal(t, []string{"a", "b", "c", "d"}, all)
	assert.Equal(t, uint64(4), r1.Stats().Expired+r2.Stats().Expired)
}

func TestNewRunnerValidates(t *testing.T) {
	st := memstore.New(memstore.Options{})
	ok := workspaceRules(time.Minute, time.Minute)
	for _, c := range []struct {
		store ttl.Store
		rules []ttl.Rule
		opts  ttl.RunnerOptions
		want  string
	}{
		{nil, ok, ttl.RunnerOptions{}, "store"},
		{st, ok, ttl.RunnerOptions{BatchSize: -1}, "BatchSize"},
		{st, ok, ttl.RunnerOptions{EventQueue: -1}, "EventQueue"},
		{st, ok, ttl.RunnerOptions{Hold: -1}, "Hold"},
		{st, []ttl.Rule{{Phase: "RUNNING", Then: "STANDBY"}}, ttl.RunnerOptions{}, "rules[0]: ttl: rule RUNNING->STANDBY: After (0s) must be positive"},
		{st, append(ok, ok[0]), ttl.RunnerOptions{}, `rules[2]: duplicate rule name "standby"`},
	} {
		r, err := ttl.NewRunner(c.store, c.rules, c.opts)
		assert.Nil(t, r)
		assert.ErrorIs(t, err, ttl.ErrInvalid)
		assert.ErrorContains(t, err, c.want)
	}
}

// stuckStore blocks Apply until the caller's context ends.
type stuckStore struct{ ttl.Store }

func (s stuckStore) Apply(ctx context.Context, _ ttl.Rule) ([]ttl.Expiry, error) {
	<-ctx.Done()
	return nil, context.Cause(ctx)
}

// TestRunnerCloseCancelsStuckTick: Close does not wait for a store that
// never answers; it cancels the loop's tick and returns. Both rules saw
// the cancellation, which is Close's doing, not a rule error.
func TestRunnerCloseCancelsStuckTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := stuckStore{memstore.New(memstore.Options{})}
		r := newRunner(t, st, workspaceRules(time.Minute, time.Minute), ttl.RunnerOptions{})
		time.Sleep(61 * time.Second) // the loop's first tick is now stuck
		synctest.Wait()
		require.NoError(t, r.Close(context.Background()))
		require.NoError(t, r.Close(context.Background()), "Close is idempotent")
		s := r.Stats()
		assert.Equal(t, uint64(1), s.Ticks)
		assert.Zero(t, s.RuleErrors, "both rules saw the cancellation, which is not their error")
		assert.True(t, s.HeldUntil.IsZero())
	})
}

// gatedStore blocks Apply until the caller's context ends while stuck is
// set, as a store that stopped answering.
type gatedStore struct {
	ttl.Store
	stuck atomic.Bool
}

func (s *gatedStore) Apply(ctx context.Context, r ttl.Rule) ([]ttl.Expiry, error) {
	if s.stuck.Load() {
		<-ctx.Done()
		return nil, context.Cause(ctx)
	}
	return s.Store.Apply(ctx, r)
}

// TestRunnerCloseDuringTickIsNoError: Close cancels the loop's tick while
// the store is slow to answer. The cancellation is not an error: no
// rule_error is reported or counted, and no hold starts, so the final
// Tick by hand after Close applies the idle rule. Before, Close's
// cancellation counted as two rule errors and started a hold that made
// that Tick skip the idle rule.
func TestRunnerCloseDuringTickIsNoError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := memstore.New(memstore.Options{})
		st := &gatedStore{Store: mem}
		var log eventLog
		r := newRunner(t, st, workspaceRules(time.Minute, time.Hour), ttl.RunnerOptions{Interval: time.Minute, OnEvent: log.add})
		create(t, mem, memstore.Entity{ID: "idle", Phase: "RUNNING", CreatedAt: time.Now().Add(-time.Hour)})
		st.stuck.Store(true)
		time.Sleep(61 * time.Second) // the loop's first tick is now stuck
		synctest.Wait()
		require.NoError(t, r.Close(ctx))
		for _, e := range log.all() {
			assert.NotEqual(t, ttl.EventRuleError, e.Kind, "%v", e.Err)
		}
		s := r.Stats()
		assert.Equal(t, uint64(1), s.Ticks)
		assert.Zero(t, s.RuleErrors+s.SyncErrors+s.WakeErrors)
		assert.True(t, s.HeldUntil.IsZero(), "no hold")

		st.stuck.Store(false)
		res, err := r.Tick(ctx) // the final tick, by hand
		require.NoError(t, err)
		assert.Empty(t, res.Skipped)
		assert.Equal(t, []ttl.Expiry{{ID: "idle", Rule: "standby", Then: "STANDBY", LastActivityAt: time.Now().Add(-61*time.Second - time.Hour), DecidedAt: time.Now()}}, res.Expired)
	})
}

// mergeFailStore fails Add while down is set.
type mergeFailStore struct {
	ttl.Store
	mu   sync.Mutex
	down bool
}

func (s *mergeFailStore) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

func (s *mergeFailStore) Add(ctx context.Context, acts []ttl.Activity) error {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		return errDown
	}
	return s.Store.Add(ctx, acts)
}

// TestRunnerSkipsActivityRulesWhenMergeFails: when buffered activity was
// read but could not be merged into the store, the store's LastActivityAt
// is known to be stale, so the tick skips the rules that measure from it
// (an active entity must not be sent to STANDBY); rules on other
// timestamps still run. When the buffer itself is unreachable nothing was
// read and the store decides, as TestRunnerBufferLostOrDown shows.
func TestRunnerSkipsActivityRulesWhenMergeFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := memstore.New(memstore.Options{})
		st := &mergeFailStore{Store: mem}
		buf := new(ttl.MemoryBuffer)
		var log eventLog
		r := newRunner(t, st, workspaceRules(10*time.Minute, 30*time.Minute), ttl.RunnerOptions{
			Buffer: buf, Interval: time.Hour, OnEvent: log.add})
		defer r.Close(context.Background())
		old := time.Now().Add(-11 * time.Minute)
		create(t, mem, memstore.Entity{ID: "active", Phase: "RUNNING", CreatedAt: old})
		standbySince := time.Now().Add(-31 * time.Minute)
		create(t, mem, memstore.Entity{ID: "standby", Phase: "STANDBY", CreatedAt: standbySince})
		activeAt := time.Now()
		require.NoError(t, buf.Add(ctx, []ttl.Activity{{ID: "active", At: activeAt}}))

		st.setDown(true)
		res, err := r.Tick(ctx)
		require.ErrorIs(t, err, errDown)
		assert.Zero(t, res.Synced)
		assert.Equal(t, []ttl.Expiry{{ID: "standby", Rule: "archive", Then: "ARCHIVED", LastActivityAt: standbySince, DecidedAt: time.Now()}}, res.Expired)
		assert.Equal(t, []string{"standby"}, res.Skipped)
		assert.Empty(t, get(t, mem, "active").DesiredState, "activity still buffered: not idle")
		assert.Equal(t, 1, buf.Len())
		s := r.Stats()
		assert.Equal(t, []ttl.RuleStats{{Name: "standby", Skipped: 1}, {Name: "archive", Expired: 1}}, s.Rules)
		var skipped []string
		synctest.Wait() // the events are delivered
		for _, e := range log.all() {
			if e.Kind == ttl.EventRuleSkipped {
				skipped = append(skipped, e.Rule)
				assert.ErrorIs(t, e.Err, errDown)
			}
		}
		assert.Equal(t, []string{"standby"}, skipped)

		// The store is back: the activity is synced and the entity stays.
		st.setDown(false)
		res, err = r.Tick(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, res.Synced)
		assert.Empty(t, res.Expired)
		assert.Empty(t, res.Skipped)
		assert.Equal(t, time.Now(), get(t, mem, "active").LastActivityAt)

		// A failing merge with nothing buffered skips nothing: the store
		// has everything there is to know.
		st.setDown(true)
		time.Sleep(11 * time.Minute)
		res, err = r.Tick(ctx)
		require.NoError(t, err)
		assert.Empty(t, res.Skipped)
		assert.Equal(t, []ttl.Expiry{{ID: "active", Rule: "standby", Then: "STANDBY", LastActivityAt: activeAt, DecidedAt: time.Now()}}, res.Expired)
	})
}

// TestRunnerNegativeIntervalHasNoLoop: a negative Interval switches the
// loop off; Tick by hand still works, with a drain that has no time budget.
func TestRunnerNegativeIntervalHasNoLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New(memstore.Options{})
		create(t, st, memstore.Entity{ID: "idle", Phase: "RUNNING", CreatedAt: time.Now().Add(-time.Hour)})
		r := newRunner(t, st, workspaceRules(time.Minute, time.Hour), ttl.RunnerOptions{Interval: -1, Buffer: new(ttl.MemoryBuffer)})
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		assert.Zero(t, r.Stats().Ticks, "no loop ticked")
		assert.Empty(t, get(t, st, "idle").DesiredState)
		res, err := r.Tick(ctx)
		require.NoError(t, err)
		assert.True(t, res.Drained)
		assert.Equal(t, "STANDBY", get(t, st, "idle").DesiredState)
		require.NoError(t, r.Close(ctx))
	})
}
