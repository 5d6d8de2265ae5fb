package pgentities_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/internal/testenv"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/pgttl"
	"github.com/ttlkit/ttlkit/ttl/redisttl"
)

// phaseStore runs a hook once at a chosen phase of a tick: after the next
// Add (inside the drain, between a Peek and its Remove), or
// before the next Apply (after the drain, before the rules).
type phaseStore struct {
	entities.Store
	mu             sync.Mutex
	onMerge, onApy func()
}

func (s *phaseStore) at(merge bool, f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if merge {
		s.onMerge = f
	} else {
		s.onApy = f
	}
}

func (s *phaseStore) Add(ctx context.Context, acts []ttl.Activity) error {
	err := s.Store.Add(ctx, acts)
	s.mu.Lock()
	f := s.onMerge
	s.onMerge = nil
	s.mu.Unlock()
	if f != nil {
		f()
	}
	return err
}

func (s *phaseStore) Apply(ctx context.Context, r ttl.Rule) ([]ttl.Expiry, error) {
	s.mu.Lock()
	f := s.onApy
	s.onApy = nil
	s.mu.Unlock()
	if f != nil {
		f()
	}
	return s.Store.Apply(ctx, r)
}

// TestProofRedisRestarts is the whole pipeline on real servers: two proxy
// Trackers flushing into a Redis buffer of their own redis-server, a Runner
// ticking into PostgreSQL, and periodic activity on 2,000 workspaces that
// stay active, 800 that stop at staggered times and 200 that are never
// active. Redis is restarted empty four times, at four phases of the tick:
// at an arbitrary moment, inside the drain (between a Peek and its Remove),
// between the drain and the rules, and for longer than a tick (ticks fail
// meanwhile). Then:
//
//   - no workspace that stays active is ever set to STANDBY;
//   - no workspace is set to STANDBY before its TTL has passed since its
//     true last activity (checked against the server's decision time);
//   - every workspace that stops is set to STANDBY within TTL + flush +
//     tick (+ scheduling slack), or, when the decision fell into a hold
//     after a loss, within one tick after the hold.
func TestProofRedisRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 25 s")
	}
	const (
		ttlStandby = 4 * time.Second
		flush      = 250 * time.Millisecond
		tick       = 500 * time.Millisecond
		period     = 500 * time.Millisecond // of each active workspace
		resolution = 50 * time.Millisecond
		hold       = 1500 * time.Millisecond
		slack      = time.Second // scheduling on a loaded machine
		active     = 2000
		stopping   = 800
		neverUsed  = 200
	)
	ctx := context.Background()
	delay := testenv.SchedDelay(t)
	pg := pgtest.OpenPostgres(t)
	srv := redistest.StartRedis(t, redistest.RedisServerOptions{})
	pgStore := newStore(t, pg.Pool, pgttl.Options{Table: "workspaces"})
	store := &phaseStore{Store: pgStore}

	var (
		mu       sync.Mutex
		decided  []ttl.Expiry
		skips    []time.Time // ticks that skipped the standby rule
		lastSeen = map[string]time.Time{}
	)
	runnerBuf, err := redisttl.New(srv.Client(t), redisttl.Options{Prefix: "codehub"})
	require.NoError(t, err)
	r, err := ttl.NewRunner(store, workspaceRules(ttlStandby, time.Hour), ttl.RunnerOptions{
		Interval: tick, Buffer: runnerBuf, Hold: hold,
		Wake: func(_ context.Context, exps []ttl.Expiry) error {
			mu.Lock()
			defer mu.Unlock()
			decided = append(decided, exps...)
			return nil
		},
		OnEvent: func(e ttl.Event) {
			if e.Kind == ttl.EventRuleSkipped {
				mu.Lock()
				skips = append(skips, e.Time)
				mu.Unlock()
			}
		},
	})
	require.NoError(t, err)
	defer r.Close(ctx)
	var trackers [2]*ttl.Tracker
	for i := range trackers {
		b, err := redisttl.New(srv.Client(t), redisttl.Options{Prefix: "codehub"})
		require.NoError(t, err)
		trackers[i], err = ttl.NewTracker(b, ttl.TrackerOptions{FlushInterval: flush, Resolution: resolution, Retain: 10 * time.Second})
		require.NoError(t, err)
		defer trackers[i].Close(ctx)
	}

	var es []entities.Entity
	for i := range active {
		es = append(es, entities.Entity{ID: fmt.Sprintf("active-%04d", i), Phase: "RUNNING"})
	}
	for i := range stopping {
		es = append(es, entities.Entity{ID: fmt.Sprintf("stop-%04d", i), Phase: "RUNNING"})
	}
	for i := range neverUsed {
		es = append(es, entities.Entity{ID: fmt.Sprintf("idle-%04d", i), Phase: "RUNNING"})
	}
	created, err := store.CreateMany(ctx, es)
	require.NoError(t, err)
	for _, e := range created {
		lastSeen[e.ID] = e.LastActivityAt
	}
	start := time.Now()

	// The proxies: every period, each active workspace gets a request on
	// one of the two, alternately. Stopping workspace i stops after
	// 1 s + i × 20 ms, so stops fall into every phase of the run.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(period)
		defer tk.Stop()
		for round := 0; ; round++ {
			for i := range active + stopping {
				id := es[i].ID
				if i >= active && time.Since(start) > time.Second+time.Duration(i-active)*20*time.Millisecond {
					continue
				}
				now := time.Now()
				trackers[(i+round)%2].Record(id)
				mu.Lock()
				lastSeen[id] = now
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-tk.C:
			}
		}
	}()

	// The restarts, each at its phase of the tick.
	restartAt := func(at time.Duration, f func()) {
		time.Sleep(time.Until(start.Add(at)))
		f()
	}
	restartAt(4*time.Second, func() { srv.Restart(0) })
	restartAt(8*time.Second, func() {
		done := make(chan struct{})
		store.at(true, func() { srv.Restart(0); close(done) })
		<-done
	})
	restartAt(12*time.Second, func() {
		done := make(chan struct{})
		store.at(false, func() { srv.Restart(0); close(done) })
		<-done
	})
	restartAt(16*time.Second, func() { srv.Restart(3 * tick) })

	// The last stopping workspace stops at about 17 s; wait for it to
	// expire, then a little longer to see that nothing else does.
	lastStop := time.Second + time.Duration(stopping-1)*20*time.Millisecond
	time.Sleep(time.Until(start.Add(lastStop + ttlStandby + flush + tick + hold + 2*slack)))
	time.Sleep(3 * delay()) // as late as a loaded machine makes the last decisions
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	st := r.Stats()
	t.Logf("runner: %d ticks, %d synced, %d decided, %d buffer losses, %d incomplete drains, standby skipped %d times",
		st.Ticks, st.Synced, len(decided), st.BufferLosses, st.IncompleteDrains, st.Rules[0].Skipped)
	for i, tr := range trackers {
		ts := tr.Stats()
		t.Logf("tracker %d: %d flushes, %d sink losses, %d resent, %d flush errors", i, ts.Flushes, ts.SinkLosses, ts.Resent, ts.FlushErrors)
	}
	assert.GreaterOrEqual(t, st.BufferLosses+st.IncompleteDrains, uint64(4), "the restarts were seen")

	lastSkipBefore := func(at time.Time) time.Time {
		var last time.Time
		for _, s := range skips {
			if s.Before(at) && s.After(last) {
				last = s
			}
		}
		return last
	}
	// Lateness stretches with how late this process's goroutines ran
	// (trackers, runner and this test's own activity alike); never early
	// does not.
	late := slack + 3*delay()
	t.Logf("lateness bound stretched by %v (the worst scheduling delay measured: %v)", late-slack, delay())
	got := map[string]bool{}
	var falseStandby []string
	for _, x := range decided {
		require.Equal(t, "standby", x.Rule)
		got[x.ID] = true
		if strings.HasPrefix(x.ID, "active-") {
			falseStandby = append(falseStandby, fmt.Sprintf("%s (last seen %v before)", x.ID, x.DecidedAt.Sub(lastSeen[x.ID])))
			continue
		}
		idle := x.DecidedAt.Sub(lastSeen[x.ID])
		assert.Greater(t, idle, ttlStandby, "%s set to STANDBY %v after its last activity", x.ID, idle)
		deadline := lastSeen[x.ID].Add(ttlStandby)
		latest := deadline.Add(flush + tick + resolution + late)
		if s := lastSkipBefore(x.DecidedAt); s.After(deadline) {
			latest = s.Add(tick + late) // held: the first tick after the hold decides
		}
		assert.False(t, x.DecidedAt.After(latest), "%s set to STANDBY %v after its last activity (deadline %v, latest %v)",
			x.ID, idle, deadline.Sub(start), latest.Sub(start))
	}
	assert.Empty(t, falseStandby, "active workspaces set to STANDBY")
	for _, e := range es[active:] {
		assert.True(t, got[e.ID], "%s never set to STANDBY", e.ID)
	}
	pending, err := pgStore.List(ctx, entities.Filter{DesiredState: "STANDBY", Limit: 10000})
	require.NoError(t, err)
	assert.Len(t, pending, stopping+neverUsed)
}
