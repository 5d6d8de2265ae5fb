package expiry_test

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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/expiry"
)

func TestOnEventReasons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var events []expiry.Event[string, int]
		m := newMapWith(t, expiry.MapOptions[string, int]{Options: expiry.Options{Interval: -1, Budget: 250 * time.Millisecond},
			OnEvent: func(ev expiry.Event[string, int]) { mu.Lock(); events = append(events, ev); mu.Unlock() }})

		start := time.Now()
		require.NoError(t, m.SetWithTTL("p", 1, time.Second))
		require.NoError(t, m.SetWithTTL("a", 2, 2*time.Second))
		require.NoError(t, m.SetWithTTL("d", 3, time.Second))
		m.Delete("d") // a deletion, not an expiry
		time.Sleep(2 * time.Second)
		found := time.Now()
		_, ok := m.Get("p")
		require.False(t, ok)
		synctest.Wait()
		m.Cycle(context.Background())
		synctest.Wait()

		mu.Lock()
		got := slices.Clone(events)
		mu.Unlock()
		require.Len(t, got, 2)
		assert.Equal(t, expiry.Event[string, int]{Time: found, Key: "p", Value: 1,
			Deadline: start.Add(time.Second), Active: false}, got[0])
		assert.Equal(t, "a", got[1].Key)
		assert.Equal(t, 2, got[1].Value)
		assert.True(t, got[1].Active, "found by active expiry")
		assert.True(t, got[1].Deadline.Equal(start.Add(2*time.Second)))
		st := m.Stats()
		assert.Equal(t, uint64(2), st.EventsDelivered)
		assert.Zero(t, st.EventsDropped)
	})
}

// TestOnEventFullQueueDrops: a stuck callback never blocks expiry; the
// events that do not fit in the queue are dropped and counted.
func TestOnEventFullQueueDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		m := newMapWith(t, expiry.MapOptions[string, int]{Options: expiry.Options{Interval: -1, Budget: 250 * time.Millisecond}, EventQueue: 2,
			OnEvent: func(expiry.Event[string, int]) { <-release }})
		for i := range 10 {
			require.NoError(t, m.SetWithTTL(string(rune('a'+i)), i, time.Second))
		}
		time.Sleep(time.Second)
		r := cycle(t, m) // returns although the callback is stuck
		assert.Equal(t, 10, r.Expired)
		synctest.Wait()
		st := m.Stats()
		// One event is in the callback, two in the queue.
		assert.Equal(t, uint64(7), st.EventsDropped)
		close(release)
		synctest.Wait()
		assert.Equal(t, uint64(3), m.Stats().EventsDelivered)
	})
}

// TestOnEventDefaultQueue: EventQueue 0 is a queue of 1024 events, as
// MapOptions.EventQueue documents.
func TestOnEventDefaultQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		m := newMapWith(t, expiry.MapOptions[string, int]{Options: expiry.Options{Interval: -1},
			OnEvent: func(expiry.Event[string, int]) { <-release }})
		for i := range 1100 {
			require.NoError(t, m.SetWithTTL(fmt.Sprint(i), i, time.Second))
		}
		time.Sleep(time.Second)
		assert.Equal(t, 1100, cycle(t, m).Expired)
		synctest.Wait()
		// One event is in the callback, 1024 in the queue.
		assert.Equal(t, uint64(1100-1-1024), m.Stats().EventsDropped)
		close(release)
		synctest.Wait()
		assert.Equal(t, uint64(1025), m.Stats().EventsDelivered)
	})
}

// TestNoOnEventDeliversNothing: without OnEvent, expiry builds and counts no
// event.
func TestNoOnEventDeliversNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMap[int](t, expiry.Options{Interval: -1, Budget: 250 * time.Millisecond})
		require.NoError(t, m.SetWithTTL("a", 1, time.Second))
		time.Sleep(time.Second)
		assert.Equal(t, 1, cycle(t, m).Expired)
		synctest.Wait()
		assert.Zero(t, m.Stats().EventsDelivered)
		assert.Zero(t, m.Stats().EventsDropped)
	})
}

// TestCloseWaitsInEveryCaller: a second Close, while the first waits for
// the OnEvent worker, waits too instead of returning with the worker
// still running.
func TestCloseWaitsInEveryCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		m := newMapWith(t, expiry.MapOptions[string, int]{Options: expiry.Options{Interval: -1, Budget: 250 * time.Millisecond},
			OnEvent: func(expiry.Event[string, int]) { <-release }})
		require.NoError(t, m.SetWithTTL("k", 1, time.Second))
		time.Sleep(time.Second)
		_, ok := m.Get("k") // queues an event; the callback blocks
		require.False(t, ok)

		var first, second atomic.Bool
		go func() { m.Close(context.Background()); first.Store(true) }()
		synctest.Wait()
		go func() { m.Close(context.Background()); second.Store(true) }()
		synctest.Wait()
		assert.False(t, first.Load(), "the worker is still in the callback")
		assert.False(t, second.Load(), "the second Close returned before the worker stopped")
		close(release)
		synctest.Wait()
		assert.True(t, first.Load())
		assert.True(t, second.Load())
	})
}

// TestCloseGivesUpWithCtx: Close waits for a stuck OnEvent only until its
// ctx ends, says so, and a later Close succeeds once the callback returns.
func TestCloseGivesUpWithCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		m, err := expiry.NewMap(expiry.MapOptions[string, int]{Options: expiry.Options{Interval: -1, Budget: 250 * time.Millisecond},
			OnEvent: func(expiry.Event[string, int]) { <-release }})
		require.NoError(t, err)
		require.NoError(t, m.SetWithTTL("k", 1, time.Second))
		time.Sleep(time.Second)
		_, ok := m.Get("k")
		require.False(t, ok)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err = m.Close(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.ErrorContains(t, err, "expiry: event callback still running")
		close(release)
		require.NoError(t, m.Close(context.Background()))
		assert.Equal(t, uint64(1), m.Stats().EventsDelivered)
	})
}

// TestCycleHonoursCtx: a cancelled ctx runs no round and says why.
func TestCycleHonoursCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMap[int](t, expiry.Options{Interval: -1, Budget: 250 * time.Millisecond})
		require.NoError(t, m.SetWithTTL("k", 1, time.Second))
		time.Sleep(time.Second)
		ctx, cancel := context.WithCancelCause(context.Background())
		stop := errors.New("shutting down")
		cancel(stop)
		r, err := m.Cycle(ctx)
		require.ErrorIs(t, err, stop)
		assert.Zero(t, r.Rounds)
		assert.Zero(t, m.Stats().Cycles)
		assert.Equal(t, 1, m.Len(), "nothing was sampled")
	})
}
