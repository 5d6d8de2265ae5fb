package hysteresis_test

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/hysteresis"
)

func TestOnChangeMayCallTheGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			g    *hysteresis.Gate
			seen []string
		)
		var err error
		g, err = hysteresis.New([]hysteresis.Signal{cpu}, hysteresis.Options{
			OnChange: func(c hysteresis.Change) {
				// Every method, from inside the callback: none may deadlock.
				seen = append(seen, c.To.String()+"/"+g.State().String())
				_ = g.Stats()
				_ = g.Last()
				_ = g.Since()
				if c.To == hysteresis.Overloaded {
					// A transition caused by the callback is delivered after it returns.
					require.NoError(t, g.Observe("cpu", 10))
					seen = append(seen, "returned")
				}
			},
		})
		require.NoError(t, err)
		observe(t, g, "cpu", 90)
		assert.Equal(t, []string{"overloaded/overloaded", "returned", "normal/normal"}, seen)
	})
}

func TestOnChangeDoesNotStallOtherObservers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		rec := &recorder{}
		g, err := hysteresis.New([]hysteresis.Signal{cpu}, hysteresis.Options{
			OnChange: func(c hysteresis.Change) {
				if c.To == hysteresis.Overloaded {
					<-release // a slow consumer
				}
				rec.on(c)
			},
		})
		require.NoError(t, err)

		var wg sync.WaitGroup
		wg.Go(func() { assert.NoError(t, g.Observe("cpu", 90)) })
		synctest.Wait() // that goroutine is now inside the callback

		// Other callers go on: the lock is free and they do not wait for the callback.
		require.NoError(t, g.Observe("cpu", 95))
		assert.True(t, g.Overloaded())
		require.NoError(t, g.Observe("cpu", 10)) // recovery (Hold 0), queued behind the trip
		assert.Equal(t, hysteresis.Normal, g.State())
		assert.Empty(t, rec.get(), "nothing delivered yet: the trip is still being delivered")

		close(release)
		wg.Wait()
		assert.Equal(t, []string{"normal>overloaded:trip", "overloaded>normal:recovered"}, rec.transitions(),
			"delivered in order, by the goroutine that was delivering")
	})
}

func TestOnChangePanicDoesNotWedgeDelivery(t *testing.T) {
	calls := 0
	g, err := hysteresis.New([]hysteresis.Signal{cpu}, hysteresis.Options{
		OnChange: func(c hysteresis.Change) {
			calls++
			if c.To == hysteresis.Overloaded {
				panic("boom")
			}
		},
	})
	require.NoError(t, err)
	assert.Panics(t, func() { _ = g.Observe("cpu", 90) })
	observe(t, g, "cpu", 10)
	assert.Equal(t, 2, calls, "the next transition is still delivered")
}

func TestOnChangeBacklogIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var got []hysteresis.Change
		g, err := hysteresis.New([]hysteresis.Signal{cpu}, hysteresis.Options{
			OnChange: func(c hysteresis.Change) {
				if len(got) == 0 {
					<-release
				}
				got = append(got, c)
			},
		})
		require.NoError(t, err)
		done := make(chan struct{})
		go func() { _ = g.Observe("cpu", 90); close(done) }()
		synctest.Wait()
		for range 1000 { // 2000 transitions while the consumer is stuck
			observe(t, g, "cpu", 10)
			observe(t, g, "cpu", 90)
		}
		close(release)
		<-done
		st := g.Stats()
		assert.EqualValues(t, 2001, st.Transitions)
		assert.EqualValues(t, 2001-1-256, st.DroppedChanges)
		assert.Len(t, got, 1+256)
		assert.Equal(t, hysteresis.Overloaded, got[len(got)-1].To, "the newest are kept")
		assert.LessOrEqual(t, hysteresis.PendingCap(g), 4*256, "the queue's memory is bounded too")
	})
}

// TestMockClock drives the gate with a benbjohnson/clock Mock, as a user of
// that package would.
func TestMockClock(t *testing.T) {
	clk := clock.NewMock()
	rec := &recorder{}
	g, err := hysteresis.New([]hysteresis.Signal{cpu, mem}, hysteresis.Options{
		Hold: time.Minute, StaleAfter: 2 * time.Minute, Clock: clk, OnChange: rec.on,
	})
	require.NoError(t, err)
	start := clk.Now()
	assert.Equal(t, start, g.Since())

	clk.Add(time.Second)
	require.NoError(t, g.ObserveAll(map[string]float64{"cpu": 88, "memory": 40}))
	assert.True(t, g.Overloaded())
	assert.Equal(t, start.Add(time.Second), g.Since())

	clk.Add(time.Second)
	require.NoError(t, g.ObserveAll(map[string]float64{"cpu": 50, "memory": 40}))
	clk.Add(time.Minute - time.Millisecond)
	assert.True(t, g.Overloaded())
	clk.Add(time.Millisecond)
	assert.Equal(t, hysteresis.Normal, g.Check())
	assert.Equal(t, start.Add(2*time.Second+time.Minute), g.Since())

	clk.Add(2*time.Minute + time.Second) // both signals stale now
	assert.Equal(t, hysteresis.Warning, g.Check())
	st := g.Stats()
	assert.Equal(t, 2, st.Stale)
	// Normal 0-1 s and 62-122 s, Overloaded 1-62 s, Warning 122-183 s.
	assert.Equal(t, [3]time.Duration{61 * time.Second, 61 * time.Second, 61 * time.Second}, st.TimeIn)
	assert.Equal(t, []string{"normal>overloaded:trip", "overloaded>normal:recovered", "normal>warning:stale"}, rec.transitions())
	assert.Equal(t, start.Add(122*time.Second), rec.get()[2].At, "stale when it fell due: last sample + StaleAfter")
}

func TestLoggerLogsTransitions(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	g, err := hysteresis.New([]hysteresis.Signal{cpu}, hysteresis.Options{Logger: logger})
	require.NoError(t, err)
	observe(t, g, "cpu", 90)
	assert.Equal(t, `level=INFO msg="hysteresis: state changed" from=normal to=overloaded reason=trip signal=cpu value=90 threshold=85`+"\n", buf.String())
}
