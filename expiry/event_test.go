package expiry_test

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/expiry"
)

func TestOnExpireReasons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMap[int](t, expiry.Options{Manual: true})
		var got []expiry.Event[string, int]
		m.OnExpire(func(ev expiry.Event[string, int]) { got = append(got, ev) })

		start := time.Now()
		require.NoError(t, m.SetWithTTL("p", 1, time.Second))
		require.NoError(t, m.SetWithTTL("a", 2, 2*time.Second))
		require.NoError(t, m.SetWithTTL("d", 3, time.Second))
		m.Delete("d") // a deletion, not an expiry
		time.Sleep(2 * time.Second)
		_, ok := m.Get("p")
		require.False(t, ok)
		synctest.Wait()
		m.Cycle()
		synctest.Wait()

		require.Len(t, got, 2)
		assert.Equal(t, expiry.Event[string, int]{Key: "p", Value: 1, Reason: expiry.Passive, Deadline: start.Add(time.Second)}, got[0])
		assert.Equal(t, "a", got[1].Key)
		assert.Equal(t, 2, got[1].Value)
		assert.Equal(t, expiry.Active, got[1].Reason)
		assert.True(t, got[1].Deadline.Equal(start.Add(2*time.Second)))
		st := m.Stats()
		assert.Equal(t, uint64(2), st.EventsDelivered)
		assert.Zero(t, st.EventsDropped)
	})
}

// TestOnExpireFullQueueDrops: a stuck callback never blocks expiry; the
// events that do not fit in the queue are dropped and counted.
func TestOnExpireFullQueueDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMap[int](t, expiry.Options{Manual: true, EventQueue: 2})
		release := make(chan struct{})
		m.OnExpire(func(expiry.Event[string, int]) { <-release })
		for i := range 10 {
			require.NoError(t, m.SetWithTTL(string(rune('a'+i)), i, time.Second))
		}
		time.Sleep(time.Second)
		r := m.Cycle() // returns although the callback is stuck
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

func TestOnExpireNilRemovesCallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMap[int](t, expiry.Options{Manual: true})
		n := 0
		m.OnExpire(func(expiry.Event[string, int]) { n++ })
		m.OnExpire(nil)
		require.NoError(t, m.SetWithTTL("a", 1, time.Second))
		time.Sleep(time.Second)
		m.Cycle()
		synctest.Wait()
		assert.Zero(t, n)
		assert.Zero(t, m.Stats().EventsDelivered)
	})
}

// TestCloseWaitsInEveryCaller: a second Close, while the first waits for
// the OnExpire worker, waits too instead of returning with the worker
// still running.
func TestCloseWaitsInEveryCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newMap[int](t, expiry.Options{Manual: true})
		release := make(chan struct{})
		m.OnExpire(func(expiry.Event[string, int]) { <-release })
		require.NoError(t, m.SetWithTTL("k", 1, time.Second))
		time.Sleep(time.Second)
		_, ok := m.Get("k") // queues an event; the callback blocks
		require.False(t, ok)

		var first, second atomic.Bool
		go func() { m.Close(); first.Store(true) }()
		synctest.Wait()
		go func() { m.Close(); second.Store(true) }()
		synctest.Wait()
		assert.False(t, first.Load(), "the worker is still in the callback")
		assert.False(t, second.Load(), "the second Close returned before the worker stopped")
		close(release)
		synctest.Wait()
		assert.True(t, first.Load())
		assert.True(t, second.Load())
	})
}
