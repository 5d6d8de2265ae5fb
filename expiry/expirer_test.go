package expiry_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/expiry"
)

// TestMiniRedisTimeline is a mini Redis's timeline at its defaults (1 s, 20 keys,
// 25 %): 100 keys with a 10 s TTL, none read. Cycles find nothing until 10 s;
// the cycle at 10 s samples 100 % expired, repeats at once, and empties the
// keyspace before the next tick.
func TestMiniRedisTimeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A mini Redis's tuning: a cycle a second, repeat above 25 %.
		m := newMap[string](t, expiry.Options{Interval: time.Second, Threshold: 0.25})
		for i := range 100 {
			require.NoError(t, m.SetWithTTL(fmt.Sprint("key:", i), "v", 10*time.Second))
		}

		time.Sleep(9*time.Second + 500*time.Millisecond)
		synctest.Wait()
		st := m.Stats()
		assert.Equal(t, uint64(9), st.Cycles)
		assert.Equal(t, uint64(9), st.Rounds, "one round per cycle while nothing is expired")
		assert.Equal(t, uint64(9*20), st.Sampled)
		assert.Zero(t, st.ExpiredActive)
		assert.Equal(t, 100, st.Keys)
		assert.Equal(t, 100, st.KeysWithDeadline)
		assert.Zero(t, st.StaleEstimate)

		time.Sleep(time.Second) // 10.5 s: the 10 s cycle has run
		synctest.Wait()
		st = m.Stats()
		assert.Equal(t, uint64(10), st.Cycles)
		assert.Equal(t, uint64(100), st.ExpiredActive, "all gone, none read")
		assert.Zero(t, st.ExpiredPassive)
		assert.Equal(t, 0, st.Keys)
		assert.Equal(t, 0, m.Len())
		// 5 rounds of 20 expired keys (100 % > 25 %: repeat) and one that
		// found no key with a deadline left.
		assert.Equal(t, uint64(9+6), st.Rounds)
		assert.Zero(t, st.BudgetHits)
	})
}

// TestSamplingFindsHiddenExpiredKeys: a block of long-lived keys placed
// before or after the expired ones cannot hide them from the sampler.
func TestSamplingFindsHiddenExpiredKeys(t *testing.T) {
	for _, expiredFirst := range []bool{true, false} {
		t.Run(fmt.Sprint("expiredFirst=", expiredFirst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMapWith(t, expiry.MapOptions[string, int]{Options: expiry.Options{Interval: -1, Budget: 250 * time.Millisecond}, Shards: 1})
				short := func() {
					for i := range 1000 {
						require.NoError(t, m.SetWithTTL(fmt.Sprint("short:", i), i, time.Second))
					}
				}
				long := func() {
					for i := range 1000 {
						require.NoError(t, m.SetWithTTL(fmt.Sprint("long:", i), i, time.Hour))
					}
				}
				if expiredFirst {
					short()
					long()
				} else {
					long()
					short()
				}
				time.Sleep(2 * time.Second)
				r := cycle(t, m)
				assert.Positive(t, r.Expired, "the first round must see expired keys")
				for range 20 {
					m.Cycle(context.Background())
				}
				st := m.Stats()
				stale := float64(st.Keys-1000) / float64(st.Keys)
				assert.Less(t, stale, 0.35, "cycles repeat until about Threshold is left")
				assert.InDelta(t, stale, st.StaleEstimate, 0.35)
			})
		})
	}
}

// TestSamplingIsUnbiased: 1k short-lived keys among 100k long-lived ones,
// inserted as one block before or after them, at the default sharding. The
// sampler must find expired keys at their share of the keyspace (about 1 %),
// not less: a sampler that favours some region of the keys (a shard, the
// front of a slice, the oldest keys) would find few or none.
func TestSamplingIsUnbiased(t *testing.T) {
	for _, shortFirst := range []bool{true, false} {
		t.Run(fmt.Sprint("shortFirst=", shortFirst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const long, short, rounds = 100_000, 1_000, 500
				m := newMap[int](t, expiry.Options{Interval: -1, Budget: 250 * time.Millisecond})
				add := func(prefix string, n int, ttl time.Duration) {
					for i := range n {
						require.NoError(t, m.SetWithTTL(fmt.Sprint(prefix, i), i, ttl))
					}
				}
				if shortFirst {
					add("short:", short, time.Second)
					add("long:", long, time.Hour)
				} else {
					add("long:", long, time.Hour)
					add("short:", short, time.Second)
				}
				time.Sleep(time.Second)

				sampled, expired := 0, 0
				for range rounds {
					s, x := m.ExpireSample(time.Now(), 20)
					sampled += s
					expired += x
				}
				require.Equal(t, rounds*20, sampled)
				// 10k samples while the expired share falls from 0.99 % to
				// 0.90 %: about 94 found, standard deviation about 10.
				assert.InDelta(t, 94, expired, 40, "expired keys found by %d samples", sampled)
				assert.Equal(t, long+short-expired, m.Len())
			})
		})
	}
}

// TestMassExpiry: 100k keys expire at once; with a round budget the work is
// spread over many cycles, and Gets keep answering while cycles run.
func TestMassExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 100_000
		m := newMap[int](t, expiry.Options{Interval: -1, Budget: 250 * time.Millisecond, MaxRounds: 250}) // ≤ 5000 keys a cycle
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprint("k", i)
			require.NoError(t, m.SetWithTTL(keys[i], i, 10*time.Second))
		}
		m.Set("live", -1, time.Time{})
		time.Sleep(10 * time.Second)

		cycles, budgetHits := 0, 0
		for m.Len() > 1 {
			before := m.Len()
			var wg sync.WaitGroup
			var r expiry.CycleResult
			wg.Go(func() { r, _ = m.Cycle(context.Background()) })
			// Readers run during the cycle.
			for g := range 2 {
				wg.Go(func() {
					for i := g; i < 2000; i += 2 {
						v, ok := m.Get("live")
						if !ok || v != -1 {
							t.Errorf("Get(live) = %v, %v during a cycle", v, ok)
							return
						}
						if _, ok := m.Get(keys[i*37%n]); ok {
							t.Errorf("Get returned an expired key")
							return
						}
					}
				})
			}
			wg.Wait()
			cycles++
			if r.BudgetHit {
				budgetHits++
			}
			assert.LessOrEqual(t, r.Expired, 250*20)
			assert.Less(t, m.Len(), before, "every cycle makes progress")
			require.Less(t, cycles, 100)
		}
		assert.GreaterOrEqual(t, cycles, n/(250*20))
		assert.GreaterOrEqual(t, budgetHits, n/(250*20)-1)
		st := m.Stats()
		assert.Equal(t, uint64(budgetHits), st.BudgetHits)
		assert.Equal(t, uint64(n), st.ExpiredActive+st.ExpiredPassive)
		assert.Equal(t, 0, st.KeysWithDeadline)
		v, ok := m.Get("live")
		assert.True(t, ok)
		assert.Equal(t, -1, v)
	})
}

// slowKeyspace advances a mock clock by step per sample round and counts
// the rounds; every key it samples is expired.
type slowKeyspace struct {
	clk    *clock.Mock
	step   time.Duration
	rounds int
}

func (k *slowKeyspace) ExpireSample(now time.Time, n int) (int, int) {
	k.rounds++
	k.clk.Add(k.step)
	return n, n
}

// TestCycleTimeBudget drives a clock.Mock: a cycle whose rounds keep
// finding expired keys stops when it has spent its Budget, by default a
// quarter of Interval.
func TestCycleTimeBudget(t *testing.T) {
	mock := clock.NewMock()
	ks := &slowKeyspace{clk: mock, step: 10 * time.Millisecond}
	e, err := expiry.NewExpirer(ks, expiry.Options{Clock: mock, Interval: time.Second}) // 1 s / 4
	require.NoError(t, err)
	defer e.Close(context.Background())

	r := cycle(t, e)
	assert.True(t, r.BudgetHit)
	assert.Equal(t, 25, r.Rounds)
	assert.Equal(t, 250*time.Millisecond, r.Duration)
	assert.Equal(t, 25*20, r.Expired)
	st := e.Stats()
	assert.Equal(t, uint64(1), st.BudgetHits)
	assert.Equal(t, uint64(1), st.Cycles)
	assert.Equal(t, 1.0, st.StaleEstimate)
}

// TestMapWithMockClock proves that Options.Clock drives deadlines, TTLs and
// the active expirer.
func TestMapWithMockClock(t *testing.T) {
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m, err := expiry.NewMap(expiry.MapOptions[string, int]{Options: expiry.Options{Clock: mock, Interval: time.Second}})
	require.NoError(t, err)
	defer m.Close(context.Background())

	require.NoError(t, m.SetWithTTL("a", 1, 5*time.Second))
	require.NoError(t, m.SetWithTTL("b", 2, 5*time.Second))
	at, ok := m.Deadline("a")
	require.True(t, ok)
	assert.True(t, at.Equal(mock.Now().Add(5*time.Second)))
	// One second at a time, each tick's cycle run before the next: a
	// ticker drops the ticks its reader has not taken yet, so a jump of
	// several seconds would run fewer cycles than seconds.
	step := func(cycles uint64) {
		mock.Add(time.Second)
		require.Eventually(t, func() bool { return m.Stats().Cycles >= cycles }, 10*time.Second, time.Millisecond)
	}
	step(1)
	step(2)
	assert.Equal(t, 3*time.Second, ttlOfAt(m, "a", mock.Now()))
	step(3)
	step(4)
	step(5) // the 5 s cycle finds both keys expired
	require.Eventually(t, func() bool { return m.Len() == 0 }, 10*time.Second, time.Millisecond)
	assert.Equal(t, uint64(2), m.Stats().ExpiredActive)
	assert.Equal(t, missing, ttlOfAt(m, "a", mock.Now()))
}

func TestCloseStopsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := make(chan expiry.Event[string, int], 10)
		m, err := expiry.NewMap(expiry.MapOptions[string, int]{
			OnEvent: func(ev expiry.Event[string, int]) { got <- ev }})
		require.NoError(t, err)
		require.NoError(t, m.SetWithTTL("a", 1, time.Second))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Len(t, got, 1)

		require.NoError(t, m.Close(context.Background()))
		require.NoError(t, m.Close(context.Background()), "idempotent")
		cycles := m.Stats().Cycles

		// No goroutine is left in the bubble: synctest.Test would fail
		// otherwise. Time passes without cycles; the map still works with
		// passive expiry, and Cycle by hand.
		require.NoError(t, m.SetWithTTL("b", 2, time.Second))
		require.NoError(t, m.SetWithTTL("c", 2, time.Second))
		time.Sleep(5 * time.Second)
		assert.Equal(t, cycles, m.Stats().Cycles)
		_, ok := m.Get("b")
		assert.False(t, ok)
		assert.Equal(t, 1, cycle(t, m).Expired)
		synctest.Wait()
		assert.Len(t, got, 1, "no events after Close")
	})
}

func TestExpirerStartClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ks := &countingKeyspace{}
		// The defaults are Redis's: a cycle every 100 ms, 20 keys, 10 %,
		// 25 % of the interval.
		e, err := expiry.NewExpirer(ks, expiry.Options{})
		require.NoError(t, err)
		assert.Equal(t, 100*time.Millisecond, e.Options().Interval)
		assert.Equal(t, 20, e.Options().SampleSize)
		assert.Equal(t, 0.10, e.Options().Threshold)
		assert.Equal(t, 25*time.Millisecond, e.Options().Budget)
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		assert.Equal(t, uint64(10), e.Stats().Cycles)
		require.NoError(t, e.Close(context.Background()))
		require.NoError(t, e.Close(context.Background()))
		time.Sleep(time.Second)
		assert.Equal(t, uint64(10), e.Stats().Cycles)
		e.Cycle(context.Background())
		assert.Equal(t, uint64(11), e.Stats().Cycles)
	})
}

type countingKeyspace struct{ calls int }

func (k *countingKeyspace) ExpireSample(time.Time, int) (int, int) { k.calls++; return 0, 0 }

// TestCycleIsNotStoppedByOneLuckyRound: 50k expired keys among 10k live
// ones. One cycle (no time budget in a bubble) must bring the expired share
// close to Threshold; a cycle deciding on single 20-key rounds stops, by
// chance, at about 55 %.
func TestCycleIsNotStoppedByOneLuckyRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMap[int](t, expiry.Options{Interval: -1, Budget: 250 * time.Millisecond})
		for i := range 10_000 {
			require.NoError(t, m.SetWithTTL(fmt.Sprint("live", i), i, time.Hour))
		}
		for i := range 50_000 {
			require.NoError(t, m.SetWithTTL(fmt.Sprint("dead", i), i, time.Second))
		}
		time.Sleep(time.Second)
		r := cycle(t, m)
		assert.False(t, r.BudgetHit)
		stale := float64(m.Len()-10_000) / float64(m.Len())
		assert.Less(t, stale, 0.45, "expired share left by one cycle")
		assert.Greater(t, r.Expired, 40_000)
	})
}

// TestCatchUp: cycles that end on their budget are followed by more after a
// short pause, until the backlog is gone, well before the next tick; with
// NoCatchUp one cycle runs per tick.
func TestCatchUp(t *testing.T) {
	for _, noCatchUp := range []bool{false, true} {
		t.Run(fmt.Sprint("NoCatchUp=", noCatchUp), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := newMap[int](t, expiry.Options{Interval: time.Second, MaxRounds: 50, NoCatchUp: noCatchUp}) // ≤ 1000 keys a cycle
				for i := range 10_000 {
					require.NoError(t, m.SetWithTTL(fmt.Sprint(i), i, 500*time.Millisecond))
				}
				time.Sleep(1100 * time.Millisecond) // one tick, at 1 s
				synctest.Wait()
				st := m.Stats()
				if noCatchUp {
					assert.Equal(t, uint64(1), st.Cycles)
					assert.Equal(t, 9_000, st.Keys)
					return
				}
				assert.Equal(t, 0, st.Keys, "the backlog is gone before the next tick")
				assert.GreaterOrEqual(t, st.Cycles, uint64(10))
				assert.Equal(t, st.Cycles-1, st.BudgetHits, "every cycle but the last hit its budget")
			})
		})
	}
}

// TestSmallKeyspaceCycle: when fewer keys carry a deadline than a round
// samples, one round examines them all and deletes the expired ones, so
// the cycle stops there and nothing stale is left to estimate. It used to
// run more rounds over the survivors and report their share as stale.
func TestSmallKeyspaceCycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMap[int](t, expiry.Options{Interval: -1, Budget: 250 * time.Millisecond})
		for i := range 5 {
			require.NoError(t, m.SetWithTTL(fmt.Sprint("short:", i), i, time.Second))
			require.NoError(t, m.SetWithTTL(fmt.Sprint("long:", i), i, time.Hour))
		}
		time.Sleep(time.Second)
		r := cycle(t, m)
		assert.Equal(t, expiry.CycleResult{Rounds: 1, Sampled: 10, Expired: 5}, r)
		assert.Zero(t, m.Stats().StaleEstimate)
		assert.Equal(t, 5, m.Len())
	})
}

// blockingKeyspace blocks every sample round until release is closed.
type blockingKeyspace struct{ release chan struct{} }

func (k blockingKeyspace) ExpireSample(time.Time, int) (int, int) { <-k.release; return 0, 0 }

// TestExpirerCloseWaitsInEveryCaller: a second Close, while the first
// waits for a running cycle, waits too.
func TestExpirerCloseWaitsInEveryCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ks := blockingKeyspace{make(chan struct{})}
		e, err := expiry.NewExpirer(ks, expiry.Options{})
		require.NoError(t, err)
		time.Sleep(100 * time.Millisecond) // the default interval: a cycle starts and blocks
		synctest.Wait()

		var first, second atomic.Bool
		go func() { e.Close(context.Background()); first.Store(true) }()
		synctest.Wait()
		go func() { e.Close(context.Background()); second.Store(true) }()
		synctest.Wait()
		assert.False(t, first.Load(), "the cycle is still running")
		assert.False(t, second.Load(), "the second Close returned before the loop stopped")
		close(ks.release)
		synctest.Wait()
		assert.True(t, first.Load())
		assert.True(t, second.Load())
	})
}

// TestNegativeIntervalRunsNoLoop: a negative Interval starts no goroutine;
// cycles run only by hand, with a budget of a quarter of 100 ms unless
// Budget says otherwise.
func TestNegativeIntervalRunsNoLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ks := &countingKeyspace{}
		e, err := expiry.NewExpirer(ks, expiry.Options{Interval: -1})
		require.NoError(t, err)
		assert.Equal(t, 25*time.Millisecond, e.Options().Budget)
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Zero(t, e.Stats().Cycles)
		assert.Zero(t, ks.calls)
		cycle(t, e)
		assert.Equal(t, uint64(1), e.Stats().Cycles)
		require.NoError(t, e.Close(context.Background()))

		e, err = expiry.NewExpirer(ks, expiry.Options{Interval: -1, Budget: time.Second})
		require.NoError(t, err)
		assert.Equal(t, time.Second, e.Options().Budget, "no Interval to stay below")
		require.NoError(t, e.Close(context.Background()))
	})
}
