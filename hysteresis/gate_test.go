package hysteresis_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/hysteresis"
	"github.com/ttlkit/ttlkit/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

var (
	cpu = hysteresis.Signal{Name: "cpu", Warn: 70, Trip: 85, Recover: 60}
	mem = hysteresis.Signal{Name: "memory", Warn: 75, Trip: 90, Recover: 70}
)

// recorder collects OnEvent deliveries.
type recorder struct {
	g       *hysteresis.Gate // if set, get waits for its events first
	mu      sync.Mutex
	changes []hysteresis.Event
}

func (r *recorder) on(c hysteresis.Event) {
	r.mu.Lock()
	r.changes = append(r.changes, c)
	r.mu.Unlock()
}

// get returns the events delivered so far, after every transition of r.g
// has been delivered.
func (r *recorder) get() []hysteresis.Event {
	if r.g != nil {
		hysteresis.Settle(r.g)
	}
	return r.peek()
}

// peek returns the events delivered so far, without waiting.
func (r *recorder) peek() []hysteresis.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hysteresis.Event(nil), r.changes...)
}

// transitions renders the recorded changes as "from>to:reason" strings.
func (r *recorder) transitions() []string {
	var out []string
	for _, c := range r.get() {
		out = append(out, c.From.String()+">"+c.To.String()+":"+c.Reason())
	}
	return out
}

func newGate(t *testing.T, opts hysteresis.Options, signals ...hysteresis.Signal) (*hysteresis.Gate, *recorder) {
	t.Helper()
	rec := &recorder{}
	opts.OnEvent = rec.on
	g, err := hysteresis.New(signals, opts)
	require.NoError(t, err)
	closeAtEnd(t, g)
	rec.g = g
	return g, rec
}

// closeAtEnd closes g when the test ends (inside its synctest bubble, if
// any), so that its event goroutine does not outlive the test.
func closeAtEnd(t *testing.T, g *hysteresis.Gate) {
	t.Cleanup(func() { require.NoError(t, g.Close(context.Background())) })
}

func observe(t *testing.T, g *hysteresis.Gate, name string, v float64) {
	t.Helper()
	require.NoError(t, g.Observe(name, v))
}

func TestOscillationAroundTripTripsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, rec := newGate(t, hysteresis.Options{Hold: time.Minute}, cpu)
		start := time.Now()
		for i := range 300 {
			v := 84.0
			if i%2 == 1 {
				v = 86
			}
			observe(t, g, "cpu", v)
			time.Sleep(time.Second)
		}
		assert.Equal(t, []string{"normal>warning:warn", "warning>overloaded:trip"}, rec.transitions())
		assert.Equal(t, hysteresis.Overloaded, g.State())
		assert.True(t, g.Overloaded())
		assert.Equal(t, start.Add(time.Second), g.Stats().Since, "tripped by the first sample at Trip")
		st := g.Stats()
		assert.EqualValues(t, 1, st.Trips)
		assert.EqualValues(t, 0, st.Recoveries)
		assert.EqualValues(t, 300, st.Samples)

		c := rec.get()[1]
		assert.Equal(t, "cpu", c.Signal)
		assert.Equal(t, 86.0, c.Value)
		assert.Equal(t, 85.0, c.Threshold)
	})
}

func TestTripAtExactlyTrip(t *testing.T) {
	g, _ := newGate(t, hysteresis.Options{Hold: -1}, cpu)
	observe(t, g, "cpu", 84.999)
	assert.Equal(t, hysteresis.Warning, g.State())
	observe(t, g, "cpu", 85)
	assert.Equal(t, hysteresis.Overloaded, g.State(), "a sample equal to Trip trips")
}

func TestRecoveryNeedsHoldOfContinuousCalm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, rec := newGate(t, hysteresis.Options{Hold: time.Minute}, cpu)
		observe(t, g, "cpu", 95)
		time.Sleep(time.Second)
		calmFrom := time.Now()
		for time.Since(calmFrom) < time.Minute {
			observe(t, g, "cpu", 59.9)
			require.Equal(t, hysteresis.Overloaded, g.State(), "recovered after %v of calm", time.Since(calmFrom))
			time.Sleep(time.Second)
		}
		// Exactly Hold after the first calm sample.
		observe(t, g, "cpu", 59.9)
		assert.Equal(t, hysteresis.Normal, g.State())
		assert.Equal(t, calmFrom.Add(time.Minute), g.Stats().Since)
		assert.Equal(t, []string{"normal>overloaded:trip", "overloaded>normal:recovered"}, rec.transitions())
	})
}

func TestHoldElapsesBetweenSamples(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, rec := newGate(t, hysteresis.Options{Hold: time.Minute, StaleAfter: 5 * time.Minute}, cpu)
		observe(t, g, "cpu", 95)
		observe(t, g, "cpu", 10)
		time.Sleep(time.Minute - time.Nanosecond)
		assert.True(t, g.Overloaded())
		time.Sleep(time.Nanosecond)
		assert.False(t, g.Overloaded(), "the hold elapsed without a new sample")
		// The reader only noticed the recovery; the gate's own goroutine
		// delivers it, so no reader ever runs the callback.
		assert.Equal(t, []string{"normal>overloaded:trip", "overloaded>normal:recovered"}, rec.transitions())
		assert.Equal(t, hysteresis.Normal, g.State())
		assert.Equal(t, []string{"normal>overloaded:trip", "overloaded>normal:recovered"}, rec.transitions())
	})
}

func TestZeroHoldRecoversAtFirstCalmSample(t *testing.T) {
	g, _ := newGate(t, hysteresis.Options{Hold: -1}, cpu)
	observe(t, g, "cpu", 90)
	observe(t, g, "cpu", 70)
	assert.Equal(t, hysteresis.Overloaded, g.State(), "70 is not below Recover 60")
	observe(t, g, "cpu", 60)
	assert.Equal(t, hysteresis.Overloaded, g.State(), "a sample equal to Recover is not calm")
	observe(t, g, "cpu", 59)
	assert.Equal(t, hysteresis.Normal, g.State())
}

func TestBlipAtRecoverRestartsHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := newGate(t, hysteresis.Options{Hold: time.Minute}, cpu)
		observe(t, g, "cpu", 90)
		for range 50 { // 50 s of calm, then one sample exactly at Recover
			observe(t, g, "cpu", 30)
			time.Sleep(time.Second)
		}
		observe(t, g, "cpu", 60)
		time.Sleep(time.Second)
		restart := time.Now()
		for time.Since(restart) < time.Minute {
			observe(t, g, "cpu", 30)
			require.True(t, g.Overloaded(), "recovered %v after the blip; the hold must restart", time.Since(restart))
			time.Sleep(time.Second)
		}
		observe(t, g, "cpu", 30)
		assert.False(t, g.Overloaded())
		assert.Equal(t, restart.Add(time.Minute), g.Stats().Since)
	})
}

func TestTwoSignalsTripOnEitherRecoverOnBoth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, rec := newGate(t, hysteresis.Options{Hold: time.Minute, StaleAfter: 5 * time.Minute}, cpu, mem)
		require.NoError(t, g.ObserveAll(map[string]float64{"cpu": 20, "memory": 95}))
		assert.True(t, g.Overloaded(), "memory alone trips")
		require.Len(t, rec.get(), 1)
		assert.Equal(t, "memory", rec.get()[0].Signal)

		// CPU calm, memory between Recover and Trip: never recovers.
		for range 180 {
			time.Sleep(time.Second)
			require.NoError(t, g.ObserveAll(map[string]float64{"cpu": 20, "memory": 80}))
		}
		assert.True(t, g.Overloaded(), "memory never went below Recover")

		// Memory calm too: recovers one hold later.
		require.NoError(t, g.ObserveAll(map[string]float64{"cpu": 20, "memory": 50}))
		calmFrom := time.Now()
		for range 60 {
			require.True(t, g.Overloaded())
			time.Sleep(time.Second)
			require.NoError(t, g.ObserveAll(map[string]float64{"cpu": 20, "memory": 50}))
		}
		assert.False(t, g.Overloaded())
		assert.Equal(t, calmFrom.Add(time.Minute), g.Stats().Since)

		// CPU alone trips too, and a CPU blip during the hold restarts it.
		observe(t, g, "cpu", 99)
		assert.True(t, g.Overloaded())
		observe(t, g, "cpu", 10)
		time.Sleep(40 * time.Second)
		observe(t, g, "memory", 71)
		time.Sleep(time.Second)
		observe(t, g, "memory", 10)
		time.Sleep(59 * time.Second)
		assert.True(t, g.Overloaded())
		time.Sleep(time.Second)
		assert.False(t, g.Overloaded())
		assert.EqualValues(t, 2, g.Stats().Trips)
	})
}

func TestWarningLevels(t *testing.T) {
	g, rec := newGate(t, hysteresis.Options{Hold: -1}, cpu, hysteresis.Signal{Name: "queue", Trip: 100, Recover: 50})
	for _, step := range []struct {
		name string
		v    float64
		want hysteresis.State
	}{
		{"cpu", 50, hysteresis.Normal},
		{"queue", 10, hysteresis.Normal},
		{"cpu", 70, hysteresis.Warning}, // at Warn
		{"cpu", 84, hysteresis.Warning},
		{"cpu", 69, hysteresis.Normal}, // no hold for Warning
		{"cpu", 50, hysteresis.Normal},
		{"queue", 99, hysteresis.Normal}, // no Warn set: never Warning
		{"queue", 100, hysteresis.Overloaded},
		{"queue", 49, hysteresis.Normal}, // Hold 0
		{"cpu", 75, hysteresis.Warning},
		{"cpu", 90, hysteresis.Overloaded},
		{"cpu", 72, hysteresis.Overloaded}, // Overloaded wins over Warning
	} {
		observe(t, g, step.name, step.v)
		require.Equal(t, step.want, g.State(), "after %s=%v", step.name, step.v)
	}
	assert.Equal(t, []string{
		"normal>warning:warn", "warning>normal:calm", "normal>overloaded:trip",
		"overloaded>normal:recovered", "normal>warning:warn", "warning>overloaded:trip",
	}, rec.transitions())
	c := rec.get()[0]
	assert.Equal(t, "cpu", c.Signal)
	assert.Equal(t, 70.0, c.Threshold)
}

func TestRecoverIntoWarning(t *testing.T) {
	// Warn below Recover: after recovery a signal can still be in the warning band.
	g, rec := newGate(t, hysteresis.Options{Hold: -1}, hysteresis.Signal{Name: "x", Warn: 10, Trip: 20, Recover: 15})
	observe(t, g, "x", 25)
	observe(t, g, "x", 12)
	assert.Equal(t, hysteresis.Warning, g.State())
	assert.Equal(t, []string{"normal>overloaded:trip", "overloaded>warning:recovered"}, rec.transitions())
}

func TestNewRejectsBadConfig(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name    string
		signals []hysteresis.Signal
		opts    hysteresis.Options
		field   string
		msg     string
	}{
		{"no signals", nil, hysteresis.Options{}, "signals", "hysteresis: signals is empty"},
		{"recover above trip", []hysteresis.Signal{{Name: "cpu", Trip: 85, Recover: 90}}, hysteresis.Options{}, "Recover",
			`hysteresis: signal "cpu": Recover (90) above Trip (85)`},
		{"warn above trip", []hysteresis.Signal{{Name: "cpu", Warn: 95, Trip: 85, Recover: 60}}, hysteresis.Options{}, "Warn",
			`hysteresis: signal "cpu": Warn (95) above Trip (85)`},
		{"missing trip", []hysteresis.Signal{{Name: "cpu", Recover: 60}}, hysteresis.Options{}, "Trip",
			`hysteresis: signal "cpu": Trip is missing (0)`},
		{"missing recover", []hysteresis.Signal{{Name: "cpu", Trip: 85}}, hysteresis.Options{}, "Recover",
			`hysteresis: signal "cpu": Recover is missing (0)`},
		{"NaN trip", []hysteresis.Signal{{Name: "cpu", Trip: nan, Recover: 60}}, hysteresis.Options{}, "Trip",
			`hysteresis: signal "cpu": Trip is NaN`},
		{"NaN warn", []hysteresis.Signal{{Name: "cpu", Warn: nan, Trip: 85, Recover: 60}}, hysteresis.Options{}, "Warn", "Warn is NaN"},
		{"NaN recover", []hysteresis.Signal{{Name: "cpu", Trip: 85, Recover: nan}}, hysteresis.Options{}, "Recover", "Recover is NaN"},
		{"infinite trip", []hysteresis.Signal{{Name: "cpu", Trip: math.Inf(1), Recover: 60}}, hysteresis.Options{}, "Trip", "Trip is +Inf"},
		{"empty name", []hysteresis.Signal{cpu, {Trip: 1, Recover: 1}}, hysteresis.Options{}, "Name", "hysteresis: signal #1: Name is empty"},
		{"duplicate name", []hysteresis.Signal{cpu, mem, cpu}, hysteresis.Options{}, "Name",
			`hysteresis: signal "cpu": Name is a duplicate of signal #0`},
		{"negative event queue", []hysteresis.Signal{cpu}, hysteresis.Options{EventQueue: -1}, "EventQueue", "hysteresis: EventQueue (-1) must be between 0 and 1048576"},
		{"unknown stale policy", []hysteresis.Signal{cpu}, hysteresis.Options{Stale: 7}, "Stale", "hysteresis: Stale (7) is not a known policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := hysteresis.New(tc.signals, tc.opts)
			require.Error(t, err)
			assert.Nil(t, g)
			assert.ErrorIs(t, err, hysteresis.ErrInvalid)
			assert.Contains(t, err.Error(), tc.field)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
}

func TestNewAcceptsEdgeConfigs(t *testing.T) {
	for _, s := range []hysteresis.Signal{
		{Name: "no band", Trip: 10, Recover: 10},
		{Name: "negative", Warn: -5, Trip: -1, Recover: -10},
		{Name: "warn below recover", Warn: 1, Trip: 10, Recover: 5},
	} {
		_, err := hysteresis.New([]hysteresis.Signal{s}, hysteresis.Options{StaleAfter: -1, Hold: -1})
		assert.NoError(t, err, s.Name)
	}
}

func TestObserveRejectsBadSamples(t *testing.T) {
	g, rec := newGate(t, hysteresis.Options{Hold: -1}, cpu, mem)
	err := g.Observe("disk", 99)
	assert.ErrorIs(t, err, hysteresis.ErrInvalid)
	assert.EqualError(t, err, `hysteresis: unknown signal "disk"`)
	err = g.Observe("cpu", math.NaN())
	assert.ErrorIs(t, err, hysteresis.ErrInvalid)
	assert.EqualError(t, err, `hysteresis: invalid value: signal "cpu": NaN`)

	// One bad entry: nothing of the round is recorded.
	err = g.ObserveAll(map[string]float64{"cpu": 99, "memory": 99, "disk": 1})
	assert.ErrorIs(t, err, hysteresis.ErrInvalid)
	assert.EqualError(t, err, `hysteresis: unknown signal "disk"`)
	err = g.ObserveAll(map[string]float64{"cpu": 99, "memory": math.NaN()})
	assert.ErrorIs(t, err, hysteresis.ErrInvalid)
	assert.EqualError(t, err, `hysteresis: invalid value: signal "memory": NaN`)

	assert.Equal(t, hysteresis.Normal, g.State())
	assert.Empty(t, rec.get())
	st := g.Stats()
	assert.EqualValues(t, 0, st.Samples)
	assert.EqualValues(t, 4, st.Rejected)
	for _, s := range g.Last() {
		assert.False(t, s.Observed, s.Name)
	}
}

func TestLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := newGate(t, hysteresis.Options{StaleAfter: 10 * time.Second, Hold: -1}, cpu, mem)
		assert.Equal(t, []hysteresis.Sample{{Name: "cpu"}, {Name: "memory"}}, g.Last(),
			"every signal, in the order given to New, none observed yet")
		observe(t, g, "cpu", 42)
		at := time.Now()
		time.Sleep(11 * time.Second)
		observe(t, g, "memory", 55)
		assert.Equal(t, []hysteresis.Sample{
			{Name: "cpu", Value: 42, At: at, Observed: true, Stale: true},
			{Name: "memory", Value: 55, At: time.Now(), Observed: true},
		}, g.Last())
	})
}

func TestStatsTimeInStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := newGate(t, hysteresis.Options{Hold: 30 * time.Second}, cpu)
		observe(t, g, "cpu", 10)
		time.Sleep(10 * time.Second)
		observe(t, g, "cpu", 75) // Warning
		time.Sleep(5 * time.Second)
		observe(t, g, "cpu", 90) // Overloaded
		time.Sleep(20 * time.Second)
		observe(t, g, "cpu", 10)     // calm from here
		time.Sleep(30 * time.Second) // recovers at the end of the hold
		time.Sleep(7 * time.Second)  // and stays Normal
		st := g.Stats()
		assert.Equal(t, hysteresis.Normal, st.State)
		assert.Equal(t, [3]time.Duration{17 * time.Second, 5 * time.Second, 50 * time.Second}, st.TimeIn)
		assert.EqualValues(t, 3, st.Transitions)
		assert.EqualValues(t, 1, st.Trips)
		assert.EqualValues(t, 1, st.Recoveries)
		assert.EqualValues(t, 4, st.Samples)
	})
}

func TestObserveDoesNotAllocate(t *testing.T) {
	g, _ := newGate(t, hysteresis.Options{Hold: -1}, cpu, mem)
	v := 10.0
	allocs := testing.AllocsPerRun(1000, func() {
		v = 50 - v // 40, 10, 40, ...: calm, no transitions
		_ = g.Observe("cpu", v)
		_ = g.Observe("memory", v)
	})
	assert.Zero(t, allocs)
}

func TestStateStrings(t *testing.T) {
	assert.Equal(t, "normal", hysteresis.Normal.String())
	assert.Equal(t, "warning", hysteresis.Warning.String())
	assert.Equal(t, "overloaded", hysteresis.Overloaded.String())
	assert.Equal(t, "State(9)", hysteresis.State(9).String())
}

func TestConcurrentObserveAndRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, rec := newGate(t, hysteresis.Options{Hold: 3 * time.Second, StaleAfter: 2 * time.Second}, cpu, mem)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range 200 {
					v := float64((i*37 + w*11) % 100)
					if w%2 == 0 {
						_ = g.Observe("cpu", v)
					} else {
						_ = g.ObserveAll(map[string]float64{"memory": v})
					}
					_ = g.Overloaded()
					time.Sleep(time.Duration(w+1) * 100 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		g.State()
		// The delivered changes form one chain: each starts where the last ended.
		changes := rec.get()
		require.NotEmpty(t, changes)
		for i := 1; i < len(changes); i++ {
			assert.Equal(t, changes[i-1].To, changes[i].From, "change %d", i)
			assert.False(t, changes[i].Time.Before(changes[i-1].Time), "change %d out of order", i)
		}
		st := g.Stats()
		assert.EqualValues(t, len(changes), st.Transitions)
		assert.Equal(t, changes[len(changes)-1].To, g.State())
	})
}

// TestHoldThatElapsedUnreadStillCounts: the hold ended between two samples,
// while nobody read the gate. The state must not depend on whether someone
// looked: the gate recovered when the hold ended, and a later sample between
// Recover and Warn leaves it Normal, exactly as for a gate that was read.
func TestHoldThatElapsedUnreadStillCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := hysteresis.Options{Hold: time.Minute, StaleAfter: 5 * time.Minute}
		unread, rec := newGate(t, opts, cpu)
		read, _ := newGate(t, opts, cpu)
		for _, g := range []*hysteresis.Gate{unread, read} {
			observe(t, g, "cpu", 95)
			observe(t, g, "cpu", 10)
		}
		calmFrom := time.Now()
		time.Sleep(90 * time.Second)
		assert.False(t, read.Overloaded(), "the hold elapsed")
		time.Sleep(10 * time.Second)
		for _, g := range []*hysteresis.Gate{unread, read} {
			observe(t, g, "cpu", 65) // at or above Recover 60, below Warn 70
		}
		assert.Equal(t, hysteresis.Normal, read.State())
		assert.Equal(t, hysteresis.Normal, unread.State(), "recovered when the hold ended, whether read or not")
		assert.Equal(t, calmFrom.Add(time.Minute), unread.Stats().Since)
		assert.Equal(t, []string{"normal>overloaded:trip", "overloaded>normal:recovered"}, rec.transitions())
	})
}

// TestDefaultHold: a zero Hold is a hold of one minute; a negative one
// recovers at the first calm sample.
func TestDefaultHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, _ := newGate(t, hysteresis.Options{}, cpu)
		observe(t, g, "cpu", 90)
		observe(t, g, "cpu", 10)
		time.Sleep(time.Minute - time.Nanosecond)
		assert.Equal(t, hysteresis.Overloaded, g.State())
		time.Sleep(time.Nanosecond)
		assert.Equal(t, hysteresis.Normal, g.State())

		g, _ = newGate(t, hysteresis.Options{Hold: -1}, cpu)
		observe(t, g, "cpu", 90)
		observe(t, g, "cpu", 10)
		assert.Equal(t, hysteresis.Normal, g.State())
	})
}
