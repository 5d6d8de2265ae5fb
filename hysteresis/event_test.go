package hysteresis_test

import (
	"bytes"
	"context"
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

func TestOnEventMayCallTheGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			g    *hysteresis.Gate
			mu   sync.Mutex
			seen []string
		)
		add := func(s string) { mu.Lock(); seen = append(seen, s); mu.Unlock() }
		var err error
		g, err = hysteresis.New([]hysteresis.Signal{cpu}, hysteresis.Options{Hold: -1,
			OnEvent: func(c hysteresis.Event) {
				// Every method, from inside the callback: none may deadlock.
				add(c.To.String() + "/" + g.State().String())
				_ = g.Stats()
				_ = g.Last()
				_ = g.Stats().Since
				if c.To == hysteresis.Overloaded {
					// A transition caused by the callback is delivered after it returns.
					assert.NoError(t, g.Observe("cpu", 10))
					add("returned")
				}
			},
		})
		require.NoError(t, err)
		closeAtEnd(t, g)
		observe(t, g, "cpu", 90)
		hysteresis.Settle(g)
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, []string{"overloaded/overloaded", "returned", "normal/normal"}, seen)
	})
}

// TestOnEventDoesNotStallObservers: the callback runs on the gate's own
// goroutine, so a slow consumer never holds up the callers that feed or read
// the gate, and what they cause is delivered after it, in order.
// A callback that panics is recovered by the delivery goroutine: the
// program goes on and the next transition is still delivered.
func TestOnEventPanicDoesNotWedgeDelivery(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	g, err := hysteresis.New([]hysteresis.Signal{cpu}, hysteresis.Options{Hold: -1,
		OnEvent: func(c hysteresis.Event) {
			mu.Lock()
			calls++
			mu.Unlock()
			if c.To == hysteresis.Overloaded {
				panic("boom")
			}
		},
	})
	require.NoError(t, err)
	observe(t, g, "cpu", 90)
	observe(t, g, "cpu", 10)
	require.NoError(t, g.Close(context.Background()))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 2, calls, "the next transition is still delivered")
}

func TestOnEventDoesNotStallObservers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		rec := &recorder{}
		g, err := hysteresis.New([]hysteresis.Signal{cpu}, hysteresis.Options{Hold: -1,
			OnEvent: func(c hysteresis.Event) {
				if c.To == hysteresis.Overloaded {
					<-release // a slow consumer
				}
				rec.on(c)
			},
		})
		require.NoError(t, err)
		closeAtEnd(t, g)
		rec.g = g

		observe(t, g, "cpu", 90)
		synctest.Wait() // the gate's goroutine is now inside the callback

		// Callers go on: the lock is free and they do not wait for the callback.
		require.NoError(t, g.Observe("cpu", 95))
		assert.True(t, g.Overloaded())
		require.NoError(t, g.Observe("cpu", 10)) // recovery (Hold 0), queued behind the trip
		assert.Equal(t, hysteresis.Normal, g.State())
		assert.Empty(t, rec.peek(), "nothing delivered yet: the trip is still being delivered")

		close(release)
		assert.Equal(t, []string{"normal>overloaded:trip", "overloaded>normal:recovered"}, rec.transitions(),
			"delivered in order")
	})
}

// TestOnEventBacklogIsBounded: while the consumer is stuck, EventQueue
// transitions wait for it; later ones are dropped and counted, so neither
// the gate's memory nor its callers depend on the callback.
func TestOnEventBacklogIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var mu sync.Mutex
		var got []hysteresis.Event
		g, err := hysteresis.New([]hysteresis.Signal{cpu}, hysteresis.Options{Hold: -1,
			EventQueue: 256,
			OnEvent: func(c hysteresis.Event) {
				mu.Lock()
				first := len(got) == 0
				mu.Unlock()
				if first {
					<-release
				}
				mu.Lock()
				got = append(got, c)
				mu.Unlock()
			},
		})
		require.NoError(t, err)
		closeAtEnd(t, g)
		observe(t, g, "cpu", 90)
		synctest.Wait()  // the consumer is stuck on the first transition
		for range 1000 { // 2000 transitions while the consumer is stuck
			observe(t, g, "cpu", 10)
			observe(t, g, "cpu", 90)
		}
		close(release)
		hysteresis.Settle(g)
		st := g.Stats()
		assert.EqualValues(t, 2001, st.Transitions)
		assert.EqualValues(t, 2001-1-256, st.EventsDropped)
		mu.Lock()
		defer mu.Unlock()
		assert.Len(t, got, 1+256)
		assert.Equal(t, hysteresis.Overloaded, got[len(got)-1].To,
			"the oldest are kept, in order; later ones are dropped")
	})
}

// TestMockClock drives the gate with a benbjohnson/clock Mock, as a user of
// that package would.
func TestMockClock(t *testing.T) {
	clk := clock.NewMock()
	rec := &recorder{}
	g, err := hysteresis.New([]hysteresis.Signal{cpu, mem}, hysteresis.Options{
		Hold: time.Minute, StaleAfter: 2 * time.Minute, Clock: clk, OnEvent: rec.on,
	})
	require.NoError(t, err)
	closeAtEnd(t, g)
	rec.g = g
	start := clk.Now()
	assert.Equal(t, start, g.Stats().Since)

	clk.Add(time.Second)
	require.NoError(t, g.ObserveAll(map[string]float64{"cpu": 88, "memory": 40}))
	assert.True(t, g.Overloaded())
	assert.Equal(t, start.Add(time.Second), g.Stats().Since)

	clk.Add(time.Second)
	require.NoError(t, g.ObserveAll(map[string]float64{"cpu": 50, "memory": 40}))
	clk.Add(time.Minute - time.Millisecond)
	assert.True(t, g.Overloaded())
	clk.Add(time.Millisecond)
	assert.Equal(t, hysteresis.Normal, g.State())
	assert.Equal(t, start.Add(2*time.Second+time.Minute), g.Stats().Since)

	clk.Add(2*time.Minute + time.Second) // both signals stale now
	assert.Equal(t, hysteresis.Warning, g.State())
	st := g.Stats()
	assert.Equal(t, 2, st.Stale)
	// Normal 0-1 s and 62-122 s, Overloaded 1-62 s, Warning 122-183 s.
	assert.Equal(t, [3]time.Duration{61 * time.Second, 61 * time.Second, 61 * time.Second}, st.TimeIn)
	assert.Equal(t, []string{"normal>overloaded:trip", "overloaded>normal:recovered", "normal>warning:stale"}, rec.transitions())
	assert.Equal(t, start.Add(122*time.Second), rec.get()[2].Time, "stale when it fell due: last sample + StaleAfter")
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
	g, err := hysteresis.New([]hysteresis.Signal{cpu}, hysteresis.Options{Logger: logger, Hold: -1})
	require.NoError(t, err)
	observe(t, g, "cpu", 90)
	require.NoError(t, g.Close(context.Background())) // delivers the queued transition
	assert.Equal(t, `level=INFO msg="hysteresis: state changed" from=normal to=overloaded reason=trip signal=cpu value=90 threshold=85`+"\n", buf.String())
}

// TestCloseGivesUpWithCtx: Close waits for a stuck callback only until its
// ctx ends; the gate keeps answering meanwhile and afterwards.
func TestCloseGivesUpWithCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		g, err := hysteresis.New([]hysteresis.Signal{cpu}, hysteresis.Options{Hold: -1,
			OnEvent: func(hysteresis.Event) { <-release }})
		require.NoError(t, err)
		observe(t, g, "cpu", 90)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err = g.Close(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorContains(t, err, "hysteresis: event callback still running")
		observe(t, g, "cpu", 10)
		assert.Equal(t, hysteresis.Normal, g.State())
		close(release)
		require.NoError(t, g.Close(context.Background()))
		assert.Zero(t, g.Stats().EventsDropped, "a transition after Close is not a drop")
	})
}

// TestOnEventDefaultQueue: EventQueue 0 is a queue of 1024 events, as
// Options.EventQueue documents.
func TestOnEventDefaultQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		g, err := hysteresis.New([]hysteresis.Signal{cpu}, hysteresis.Options{Hold: -1,
			OnEvent: func(hysteresis.Event) { <-release }})
		require.NoError(t, err)
		closeAtEnd(t, g)
		observe(t, g, "cpu", 90)
		synctest.Wait() // the consumer is stuck on the first transition
		for range 1000 {
			observe(t, g, "cpu", 10)
			observe(t, g, "cpu", 90)
		}
		close(release)
		hysteresis.Settle(g)
		st := g.Stats()
		assert.EqualValues(t, 2001, st.Transitions)
		assert.EqualValues(t, 2001-1-1024, st.EventsDropped)
	})
}
