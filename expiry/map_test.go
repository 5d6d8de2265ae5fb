package expiry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/expiry"
)

// newMap returns a Map closed at the end of the test.
func newMap[V any](t *testing.T, opts expiry.Options) *expiry.Map[string, V] {
	t.Helper()
	return newMapWith(t, expiry.MapOptions[string, V]{Options: opts})
}

func newMapWith[V any](t *testing.T, opts expiry.MapOptions[string, V]) *expiry.Map[string, V] {
	t.Helper()
	m, err := expiry.NewMap(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, m.Close(context.Background())) })
	return m
}

type cycler interface {
	Cycle(context.Context) (expiry.CycleResult, error)
}

// cycle runs one cycle by hand; only a cancelled ctx could fail it.
func cycle(t testing.TB, c cycler) expiry.CycleResult {
	t.Helper()
	r, err := c.Cycle(context.Background())
	require.NoError(t, err)
	return r
}

func TestNewMapValidatesOptions(t *testing.T) {
	type opts = expiry.MapOptions[string, int]
	for _, tc := range []struct {
		opts  opts
		field string
	}{
		{opts{Options: expiry.Options{Budget: -time.Second}}, "Budget"},
		{opts{Options: expiry.Options{SampleSize: -1}}, "SampleSize"},
		{opts{Options: expiry.Options{Threshold: 1}}, "Threshold"},
		{opts{Options: expiry.Options{Threshold: -0.1}}, "Threshold"},
		{opts{Options: expiry.Options{Threshold: math.NaN()}}, "Threshold"},
		{opts{Options: expiry.Options{Interval: time.Second, Budget: 1500 * time.Millisecond}}, "Budget"},
		{opts{Options: expiry.Options{Budget: 150 * time.Millisecond}}, "Budget"}, // above the default 100 ms
		{opts{Options: expiry.Options{MaxRounds: -1}}, "MaxRounds"},
		{opts{EventQueue: -1}, "EventQueue"},
		{opts{EventQueue: 1 << 40}, "EventQueue"},
		{opts{Shards: -1}, "Shards"},
		{opts{Shards: 1 << 17}, "Shards"},
	} {
		_, err := expiry.NewMap(tc.opts)
		require.Error(t, err, "%+v", tc.opts)
		assert.ErrorIs(t, err, expiry.ErrInvalid)
		assert.Contains(t, err.Error(), tc.field)
		assert.Contains(t, err.Error(), "expiry: ")
	}
}

func TestReadAfterExpiryIsGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMap[string](t, expiry.Options{Interval: -1, Budget: 250 * time.Millisecond})
		require.NoError(t, m.SetWithTTL("a", "1", time.Second))
		m.Set("b", "2", time.Time{})

		time.Sleep(time.Second - time.Nanosecond)
		v, ok := m.Get("a")
		require.True(t, ok)
		assert.Equal(t, "1", v)

		time.Sleep(time.Nanosecond) // the deadline itself is expired
		_, ok = m.Get("a")
		assert.False(t, ok)
		assert.Equal(t, 1, m.Len(), "the expired key was deleted on access")
		st := m.Stats()
		assert.Equal(t, uint64(1), st.ExpiredPassive)
		assert.Equal(t, 1, st.Keys)
		assert.Equal(t, 0, st.KeysWithDeadline)

		v, ok = m.Get("b")
		require.True(t, ok)
		assert.Equal(t, "2", v)
	})
}

func TestRedisSemantics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMap[int](t, expiry.Options{Interval: -1, Budget: 250 * time.Millisecond})

		// TTL: -2 missing, -1 no deadline, remaining otherwise.
		assert.Equal(t, missing, ttlOf(m, "k"))
		m.Set("k", 1, time.Time{})
		assert.Equal(t, noDeadline, ttlOf(m, "k"))
		at, ok := m.Deadline("k")
		assert.True(t, ok)
		assert.True(t, at.IsZero())

		// EXPIRE on an existing key; on a missing one returns false.
		assert.True(t, expireIn(m, "k", 10*time.Second))
		assert.Equal(t, 10*time.Second, ttlOf(m, "k"))
		at, ok = m.Deadline("k")
		assert.True(t, ok)
		assert.Equal(t, time.Now().Add(10*time.Second), at)
		assert.False(t, expireIn(m, "nope", time.Second))
		assert.Equal(t, 0, m.Len()-1)

		time.Sleep(4 * time.Second)
		assert.Equal(t, 6*time.Second, ttlOf(m, "k"))

		// SET clears the deadline (Redis SET without KEEPTTL).
		m.Set("k", 2, time.Time{})
		assert.Equal(t, noDeadline, ttlOf(m, "k"))

		// PERSIST: true only when a deadline was removed.
		assert.False(t, persist(m, "k"))
		require.NoError(t, m.SetWithTTL("k", 3, 5*time.Second))
		assert.True(t, persist(m, "k"))
		assert.Equal(t, noDeadline, ttlOf(m, "k"))
		assert.False(t, persist(m, "k"))
		assert.False(t, persist(m, "missing"))

		// EXPIREAT in the future sets the deadline; in the past deletes.
		assert.True(t, expireAt(m, "k", time.Now().Add(time.Minute)))
		assert.Equal(t, time.Minute, ttlOf(m, "k"))
		assert.True(t, expireAt(m, "k", time.Now()))
		assert.Equal(t, missing, ttlOf(m, "k"))
		_, ok = m.Get("k")
		assert.False(t, ok)
		assert.False(t, expireAt(m, "k", time.Now().Add(time.Minute)), "missing key")

		// SET with a deadline in the past leaves the key absent.
		m.Set("p", 1, time.Time{})
		m.Set("p", 2, time.Now().Add(-time.Second))
		_, ok = m.Get("p")
		assert.False(t, ok)
		m.Set("p", 3, time.Now().Add(time.Second))
		assert.Equal(t, time.Second, ttlOf(m, "p"))

		// An expired key is absent for every accessor.
		require.NoError(t, m.SetWithTTL("e", 1, time.Second))
		time.Sleep(time.Second)
		assert.Equal(t, missing, ttlOf(m, "e"))
		require.NoError(t, m.SetWithTTL("e", 1, time.Second))
		time.Sleep(time.Second)
		assert.False(t, del(m, "e"), "DEL of an expired key returns 0")
		require.NoError(t, m.SetWithTTL("e", 1, time.Second))
		time.Sleep(time.Second)
		assert.False(t, expireIn(m, "e", time.Second), "EXPIRE of an expired key returns 0")
		require.NoError(t, m.SetWithTTL("e", 1, time.Second))
		time.Sleep(time.Second)
		assert.False(t, persist(m, "e"))
		_, ok = m.Deadline("e")
		assert.False(t, ok)
		assert.Equal(t, uint64(4), m.Stats().ExpiredPassive)

		// DEL.
		m.Set("d", 1, time.Time{})
		assert.True(t, del(m, "d"))
		assert.False(t, del(m, "d"))

		// GETDEL.
		require.NoError(t, m.SetWithTTL("g", 7, time.Second))
		v, ok := m.Delete("g")
		assert.True(t, ok)
		assert.Equal(t, 7, v)
		_, ok = m.Delete("g")
		assert.False(t, ok)
		require.NoError(t, m.SetWithTTL("g", 8, time.Second))
		time.Sleep(time.Second)
		_, ok = m.Delete("g")
		assert.False(t, ok, "an expired key is absent")
		assert.Equal(t, uint64(5), m.Stats().ExpiredPassive)
	})
}

func TestBadInputChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMap[int](t, expiry.Options{Interval: -1, Budget: 250 * time.Millisecond})
		m.Set("k", 1, time.Time{})
		require.NoError(t, m.SetWithTTL("t", 1, time.Minute))

		for _, ttl := range []time.Duration{0, -time.Second, math.MinInt64} {
			err := m.SetWithTTL("k", 2, ttl)
			assert.ErrorIs(t, err, expiry.ErrInvalid, "%v", ttl)
			assert.Contains(t, err.Error(), "invalid ttl")
			err = m.SetWithTTL("new", 2, ttl)
			assert.ErrorIs(t, err, expiry.ErrInvalid, "%v", ttl)
			assert.Contains(t, err.Error(), "invalid ttl")
		}
		var err error = m.SetWithTTL("t", 2, -1)
		assert.True(t, errors.Is(err, expiry.ErrInvalid))
		assert.Contains(t, err.Error(), "-1ns")

		v, ok := m.Get("k")
		assert.True(t, ok)
		assert.Equal(t, 1, v)
		assert.Equal(t, noDeadline, ttlOf(m, "k"))
		assert.Equal(t, time.Minute, ttlOf(m, "t"))
		_, ok = m.Get("new")
		assert.False(t, ok)
		assert.Equal(t, 2, m.Len())
	})
}

// TestFarDeadlines: a deadline is kept exactly however far it is; a TTL of
// the longest Duration is valid, and deadlines beyond it (Redis PEXPIREAT
// up to 2^63-1 ms) are neither clamped nor confused with each other.
func TestFarDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMap[int](t, expiry.Options{Interval: -1, Budget: 250 * time.Millisecond})
		require.NoError(t, m.SetWithTTL("max", 1, math.MaxInt64))
		assert.Equal(t, time.Duration(math.MaxInt64), ttlOf(m, "max"))
		at, ok := m.Deadline("max")
		require.True(t, ok)
		assert.Equal(t, time.Now().Add(math.MaxInt64).UnixNano(), at.UnixNano())

		far := time.UnixMilli(math.MaxInt64)
		farther := time.UnixMilli(9_000_000_000_000_000_000)
		m.Set("k", 1, time.Time{})
		require.True(t, expireAt(m, "k", far))
		at, ok = m.Deadline("k")
		require.True(t, ok)
		assert.Equal(t, int64(math.MaxInt64), at.UnixMilli(), "not clamped")
		assert.Equal(t, time.Duration(math.MaxInt64), ttlOf(m, "k"), "beyond a Duration")
		require.True(t, expireAt(m, "k", farther))
		at, _ = m.Deadline("k")
		assert.Equal(t, farther.UnixMilli(), at.UnixMilli())
		assert.True(t, at.Before(far))

		time.Sleep(time.Hour)
		s, x := m.ExpireSample(time.Now(), 20)
		assert.Equal(t, 2, s)
		assert.Zero(t, x)
		assert.Equal(t, 2, m.Len())
		require.NoError(t, m.CheckInvariants())
	})
}

func TestRangeAndClear(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMap[int](t, expiry.Options{Interval: -1, Budget: 250 * time.Millisecond})
		m.Set("a", 1, time.Time{})
		require.NoError(t, m.SetWithTTL("b", 2, time.Second))
		require.NoError(t, m.SetWithTTL("c", 3, time.Minute))
		time.Sleep(time.Second)

		got := map[string]int{}
		m.Range(func(k string, v int) bool {
			if len(k) == 1 {
				got[k] = v
				m.Set("x"+k, v, time.Time{}) // f runs without locks
			}
			return true
		})
		assert.Equal(t, map[string]int{"a": 1, "c": 3}, got)

		n := 0
		m.Range(func(string, int) bool { n++; return false })
		assert.Equal(t, 1, n)

		m.Clear()
		assert.Equal(t, 0, m.Len())
		assert.Equal(t, 0, m.Stats().KeysWithDeadline)
		_, ok := m.Get("a")
		assert.False(t, ok)
	})
}

// TestRangeDeletesExpiredKeys: keys Range finds expired are deleted (and
// reported as passive expiry), so Len stops counting them.
func TestRangeDeletesExpiredKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMap[int](t, expiry.Options{Interval: -1, Budget: 250 * time.Millisecond})
		m.Set("a", 1, time.Time{})
		for i := range 3 {
			require.NoError(t, m.SetWithTTL(fmt.Sprint("t", i), i, time.Second))
		}
		time.Sleep(time.Second)
		require.Equal(t, 4, m.Len(), "not found yet")

		n := 0
		m.Range(func(string, int) bool { n++; return true })
		assert.Equal(t, 1, n)
		assert.Equal(t, 1, m.Len(), "Range found them expired")
		st := m.Stats()
		assert.Equal(t, uint64(3), st.ExpiredPassive)
		assert.Equal(t, 0, st.KeysWithDeadline)
		require.NoError(t, m.CheckInvariants())
	})
}

// hookClock is a clock.Mock whose next Now runs hook first, to change the
// Map between a read and its clock reading.
type hookClock struct {
	*clock.Mock
	hook func()
}

func (c *hookClock) Now() time.Time {
	if h := c.hook; h != nil {
		c.hook = nil
		h()
	}
	return c.Mock.Now()
}

// TestReadRacingAnExtension: a Get or TTL that read a key just before a
// Persist or Expire saved it, and reads the clock just after its old
// deadline, must not report the key missing: it never was.
func TestReadRacingAnExtension(t *testing.T) {
	for _, tc := range []struct {
		name   string
		extend func(m *expiry.Map[string, int], now time.Time) bool
		ttl    time.Duration
	}{
		{"Persist", func(m *expiry.Map[string, int], _ time.Time) bool { return persist(m, "k") }, noDeadline},
		{"Expire", func(m *expiry.Map[string, int], now time.Time) bool {
			_, ok := m.Expire("k", now.Add(time.Minute))
			return ok
		}, time.Minute - time.Second},
	} {
		for _, read := range []string{"Get", "Deadline"} {
			t.Run(tc.name+"/"+read, func(t *testing.T) {
				clk := &hookClock{Mock: clock.NewMock()}
				m := newMap[int](t, expiry.Options{Interval: -1, Budget: 250 * time.Millisecond, Clock: clk})
				require.NoError(t, m.SetWithTTL("k", 1, time.Second))
				clk.hook = func() {
					require.True(t, tc.extend(m, clk.Mock.Now()), "the key was live")
					clk.Add(time.Second) // the old deadline passes
				}
				if read == "Get" {
					v, ok := m.Get("k")
					assert.True(t, ok)
					assert.Equal(t, 1, v)
				} else {
					// Deadline's clock reading runs the hook; the time
					// left is then measured after the old deadline.
					d, ok := m.Deadline("k")
					require.True(t, ok)
					if tc.ttl == noDeadline {
						assert.True(t, d.IsZero())
					} else {
						assert.Equal(t, tc.ttl, d.Sub(clk.Mock.Now()))
					}
				}
				assert.Zero(t, m.Stats().ExpiredPassive)
				assert.Equal(t, 1, m.Len())
			})
		}
	}
}

// TestScanSeesEveryStableKey: a Scan that runs while the map grows (and
// its tables double) and other keys are deleted (and tables shrink) still
// visits every key present from start to end, as Redis's SCAN guarantees,
// and skips expired keys.
func TestScanSeesEveryStableKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMapWith(t, expiry.MapOptions[string, int]{Options: expiry.Options{Interval: -1, Budget: 250 * time.Millisecond}, Shards: 4})
		for i := range 2000 {
			m.Set(fmt.Sprint("stable:", i), i, time.Time{})
			m.Set(fmt.Sprint("churn:", i), i, time.Time{})
		}
		require.NoError(t, m.SetWithTTL("gone", 1, time.Second))
		time.Sleep(time.Second)
		seen := map[string]bool{}
		cursor, calls := uint64(0), 0
		for {
			cursor = m.Scan(cursor, 10, func(k string, _ int) { seen[k] = true })
			calls++
			// Grow: many new keys; shrink: the churn keys go.
			for j := range 40 {
				m.Set(fmt.Sprint("new:", calls, ":", j), j, time.Time{})
			}
			if calls < 200 {
				for j := range 10 {
					m.Delete(fmt.Sprint("churn:", calls*10+j))
				}
			}
			if cursor == 0 {
				break
			}
			require.Less(t, calls, 100_000)
		}
		for i := range 2000 {
			require.True(t, seen[fmt.Sprint("stable:", i)], "stable:%d missed", i)
		}
		assert.False(t, seen["gone"])
		assert.Greater(t, calls, 100, "count is a hint per call")
		require.NoError(t, m.CheckInvariants())
	})
}
