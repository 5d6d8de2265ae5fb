package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/lease"
)

// faulty wraps a Store; its Heartbeat can hang until the context ends or
// fail with a transport-like error.
type faulty struct {
	lease.Store
	mode  atomic.Int32 // 0 ok, 1 hang, 2 fail
	calls atomic.Int32
}

var errTransport = errors.New("connection reset")

func (f *faulty) Heartbeat(ctx context.Context, id, holder string) (lease.Lease, error) {
	f.calls.Add(1)
	switch f.mode.Load() {
	case 1:
		<-ctx.Done()
		return lease.Lease{}, ctx.Err()
	case 2:
		return lease.Lease{}, errTransport
	}
	return f.Store.Heartbeat(ctx, id, holder)
}

// newCamerasManager returns a Manager as a camera admission server runs it:
// 35 units, the default TTL and grace, sweeps by hand.
func newCamerasManager(t *testing.T, s lease.Store) *lease.Manager {
	return newManager(t, 35, lease.Options{Store: s, SweepInterval: -1})
}

func TestKeepAliveUntilExpiresAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newCamerasManager(t, nil)
		l, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 2})
		require.NoError(t, err)
		k := m.KeepAlive(ctx, l, 30*time.Second)
		time.Sleep(299 * time.Second) // far past the 45 s grace
		require.NoError(t, k.Err())
		_, err = m.Get(ctx, l.ID)
		require.NoError(t, err)
		<-k.Done()
		assert.Equal(t, l.ExpiresAt, time.Now(), "lost exactly at ExpiresAt")
		assert.ErrorIs(t, k.Err(), lease.ErrLost)
		assert.ErrorIs(t, k.Err(), lease.ErrExpired)
	})
}

// TestAbandonedTab: the page stops heartbeating without releasing; the lease
// is gone after the grace and its units come back.
func TestAbandonedTab(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newCamerasManager(t, nil)
		l, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 35})
		require.NoError(t, err)
		k := m.KeepAlive(ctx, l, 30*time.Second)
		time.Sleep(100 * time.Second)
		require.NoError(t, k.Close(ctx))
		require.NoError(t, k.Close(ctx))
		require.NoError(t, k.Err())
		stopped := time.Now()
		last := stopped.Add(-10 * time.Second) // heartbeats at 0, 30, 60, 90 s
		time.Sleep(last.Add(45*time.Second).Sub(stopped) - time.Nanosecond)
		_, err = m.Get(ctx, l.ID)
		require.NoError(t, err, "live until grace after the last heartbeat")
		time.Sleep(time.Nanosecond)
		_, err = m.Get(ctx, l.ID)
		require.ErrorIs(t, err, lease.ErrExpired)
		_, err = m.Grant(ctx, lease.Request{Holder: "v", Cost: 35})
		require.NoError(t, err, "the units came back")
	})
}

func TestKeepAliveStopsOnRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newCamerasManager(t, nil)
		l, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 1})
		require.NoError(t, err)
		k := m.KeepAlive(ctx, l, 0)
		time.Sleep(time.Minute)
		_, err = m.Release(ctx, l.ID, "")
		require.NoError(t, err)
		<-k.Done()
		assert.NoError(t, k.Err())
	})
}

// TestKeepAliveLostElsewhere: another instance released the lease; the next
// heartbeat reports it lost.
func TestKeepAliveLostElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := lease.NewMemoryStore(nil)
		m1, m2 := newCamerasManager(t, s), newCamerasManager(t, s)
		l, err := m1.Grant(ctx, lease.Request{Holder: "u", Cost: 1})
		require.NoError(t, err)
		k := m1.KeepAlive(ctx, l, 15*time.Second)
		time.Sleep(20 * time.Second)
		_, err = m2.Release(ctx, l.ID, "")
		require.NoError(t, err)
		<-k.Done()
		assert.Equal(t, 30*time.Second, time.Since(l.CreatedAt))
		assert.ErrorIs(t, k.Err(), lease.ErrLost)
		assert.ErrorIs(t, k.Err(), lease.ErrNotFound)
	})
}

// TestKeepAliveLocalDeadline: the store stops answering; the KeepAlive
// reports the loss at its own deadline (last send + remaining), no later than
// the store's, without waiting for an answer.
func TestKeepAliveLocalDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &faulty{Store: lease.NewMemoryStore(nil)}
		m := newCamerasManager(t, f)
		l, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 1})
		require.NoError(t, err)
		k := m.KeepAlive(ctx, l, 30*time.Second)
		time.Sleep(40 * time.Second) // heartbeats at 0 and 30 s succeeded
		f.mode.Store(1)
		<-k.Done()
		assert.Equal(t, 75*time.Second, time.Since(l.CreatedAt))
		assert.ErrorIs(t, k.Err(), lease.ErrLost)
		g, err := f.Store.Get(ctx, l.ID)
		assert.ErrorIs(t, err, lease.ErrExpired, "the store agrees: %+v", g)
	})
}

// TestKeepAliveRetriesStoreErrors: failed heartbeats are retried sooner than
// the interval; a recovery before the deadline keeps the lease.
func TestKeepAliveRetriesStoreErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &faulty{Store: lease.NewMemoryStore(nil)}
		m := newCamerasManager(t, f)
		l, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 1})
		require.NoError(t, err)
		k := m.KeepAlive(ctx, l, 30*time.Second)
		time.Sleep(time.Second)
		f.mode.Store(2)
		time.Sleep(35 * time.Second) // 30 s: fail; retries every 10 s
		synctest.Wait()
		assert.Equal(t, int32(2), f.calls.Load(), "0 s ok, 30 s fail")
		require.NoError(t, k.Err())
		f.mode.Store(0)
		time.Sleep(5 * time.Second) // 40 s: the retry succeeds
		synctest.Wait()
		assert.Equal(t, int32(3), f.calls.Load())
		require.NoError(t, k.Err())
		f.mode.Store(2)
		<-k.Done() // every later try fails: lost 45 s after the 40 s heartbeat
		assert.Equal(t, 85*time.Second, time.Since(l.CreatedAt))
		assert.ErrorIs(t, k.Err(), lease.ErrLost)
		assert.ErrorIs(t, k.Err(), errTransport)
		assert.NotZero(t, m.Stats().StoreErrors)
	})
}

func TestKeepAliveContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newCamerasManager(t, nil)
		l, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 1})
		require.NoError(t, err)
		c, cancel := context.WithCancel(ctx)
		k := m.KeepAlive(c, l, 0)
		time.Sleep(time.Minute)
		cancel()
		<-k.Done()
		assert.ErrorIs(t, k.Err(), context.Canceled)
	})
}

func TestCloseStopsKeepAlives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := lease.New(3, lease.Options{})
		require.NoError(t, err)
		l, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 1})
		require.NoError(t, err)
		k := m.KeepAlive(ctx, l, 0)
		time.Sleep(time.Minute)
		require.NoError(t, m.Close(ctx))
		select {
		case <-k.Done():
		default:
			t.Fatal("Close returned before the KeepAlive stopped")
		}
		assert.ErrorIs(t, k.Err(), lease.ErrClosed)
	})
}

// TestCloseCutsHangingHeartbeat: Close does not wait for a KeepAlive's
// heartbeat that hangs in the store until the local deadline.
func TestCloseCutsHangingHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &faulty{Store: lease.NewMemoryStore(nil)}
		m, err := lease.New(3, lease.Options{Store: f, SweepInterval: -1})
		require.NoError(t, err)
		l, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 1})
		require.NoError(t, err)
		k := m.KeepAlive(ctx, l, 10*time.Second)
		time.Sleep(time.Second)
		f.mode.Store(1)
		time.Sleep(10 * time.Second) // the second heartbeat hangs
		synctest.Wait()
		start := time.Now()
		require.NoError(t, m.Close(ctx))
		assert.Zero(t, time.Since(start), "Close waited for the store")
		assert.ErrorIs(t, k.Err(), lease.ErrClosed)
	})
}

// TestKeepAliveStartedLate: a KeepAlive started long after the Grant, with
// the store hanging, reports the loss when the grant's grace ends, not a
// grace after its own start.
func TestKeepAliveStartedLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &faulty{Store: lease.NewMemoryStore(nil)}
		m := newCamerasManager(t, f)
		l, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 1})
		require.NoError(t, err)
		time.Sleep(40 * time.Second)
		f.mode.Store(1)
		k := m.KeepAlive(ctx, l, 10*time.Second)
		<-k.Done()
		assert.Equal(t, 45*time.Second, time.Since(l.CreatedAt))
		assert.ErrorIs(t, k.Err(), lease.ErrLost)
		_, err = f.Store.Get(ctx, l.ID)
		assert.ErrorIs(t, err, lease.ErrExpired, "the store agrees")
	})
}

// TestKeepAliveCloseCutsHeartbeat: Close cancels a heartbeat hanging in the
// store instead of waiting for the local deadline, and leaves Err nil.
func TestKeepAliveCloseCutsHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &faulty{Store: lease.NewMemoryStore(nil)}
		m := newCamerasManager(t, f)
		l, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 1})
		require.NoError(t, err)
		f.mode.Store(1)
		k := m.KeepAlive(ctx, l, 10*time.Second)
		synctest.Wait() // the first heartbeat hangs
		start := time.Now()
		require.NoError(t, k.Close(ctx))
		assert.Zero(t, time.Since(start), "Close waited for the store")
		assert.NoError(t, k.Err())
		_, err = m.Get(ctx, l.ID)
		require.NoError(t, err, "the lease stays until its grace ends")
	})
}

// TestKeepAliveCloseCtx: a KeepAlive whose goroutine cannot stop (its
// Manager's store ignores cancellation) makes Close return the ctx's cause.
func TestKeepAliveCloseCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &stuckHeartbeat{Store: lease.NewMemoryStore(nil), release: make(chan struct{})}
		m := newCamerasManager(t, s)
		l, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 1})
		require.NoError(t, err)
		k := m.KeepAlive(ctx, l, 0)
		synctest.Wait()
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		err = k.Close(c)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), l.ID)
		close(s.release)
		require.NoError(t, k.Close(ctx))
		assert.NoError(t, k.Err())
	})
}

// stuckHeartbeat is a store whose Heartbeat ignores its context until
// release is closed.
type stuckHeartbeat struct {
	lease.Store
	release chan struct{}
}

func (s *stuckHeartbeat) Heartbeat(ctx context.Context, id, holder string) (lease.Lease, error) {
	<-s.release
	return s.Store.Heartbeat(ctx, id, holder)
}
