package pool_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/shared"
)

// A serverless gateway's drain on SIGTERM: Close rejects new acquires, wakes waiters,
// waits for the handles in use, then destroys everything.
func TestCloseDrainsInUseThenDestroysAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p, err := pool.New[box](f, pool.Options{MinIdle: 2, MaxSize: 4})
		require.NoError(t, err)
		synctest.Wait()
		hs := acquireN(t, p, 3)
		synctest.Wait() // warm refill: one idle
		require.Equal(t, 1, p.Stats().Idle)
		hs = append(hs, acquireN(t, p, 1)...)
		waiterErr := make(chan error, 1)
		go func() {
			_, err := p.Acquire(context.Background())
			waiterErr <- err
		}()
		synctest.Wait()
		require.Equal(t, 1, p.Stats().Waiting)

		closed := make(chan error, 1)
		go func() { closed <- p.Close(context.Background()) }()
		synctest.Wait()
		assert.ErrorIs(t, <-waiterErr, pool.ErrClosed, "waiters are woken")
		_, err = p.Acquire(context.Background())
		assert.ErrorIs(t, err, pool.ErrClosed)
		hs[0].Release()
		synctest.Wait()
		assert.Len(t, f.liveIDs(), 3, "a released item is destroyed at once")
		time.Sleep(20 * time.Second) // the holders finish their work
		select {
		case err := <-closed:
			t.Fatalf("Close returned %v while handles were in use", err)
		default:
		}
		hs[1].Release()
		hs[2].Destroy("evicted")
		hs[3].Release()
		synctest.Wait()
		require.NoError(t, <-closed)
		assert.Empty(t, f.liveIDs())
		c := f.counts()
		assert.Equal(t, 0, c.bad)
		s := p.Stats()
		assert.Equal(t, uint64(3), s.Destroyed["shutdown"])
		assert.Equal(t, uint64(1), s.Destroyed["evicted"])
		assert.Equal(t, 0, s.Size)
		require.NoError(t, p.Close(context.Background()), "Close is idempotent")
	})
}

// When Close's context ends first, the items still in use are destroyed
// anyway and their handles become inert.
func TestCloseContextEndsWithHandleOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p, err := pool.New[box](f, pool.Options{MaxSize: 2})
		require.NoError(t, err)
		h := acquireN(t, p, 1)[0]
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err = p.Close(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "1 items still in use")
		synctest.Wait() // Close returned at its deadline; the destroy ends now
		assert.Empty(t, f.liveIDs())
		assert.NotPanics(t, h.Release, "a handle destroyed by Close is inert")
		assert.Equal(t, uint64(1), p.Stats().Destroyed["shutdown"])
	})
}

func TestCloseReportsDestroyErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p, err := pool.New[box](f, pool.Options{MinIdle: 2, MaxSize: 2})
		require.NoError(t, err)
		synctest.Wait()
		boom := errors.New("agent: delete failed")
		f.set(func(f *fakeProv) { f.destroyErr = boom })
		err = p.Close(context.Background())
		require.ErrorIs(t, err, boom)
		assert.Equal(t, uint64(2), p.Stats().DestroyErrors)
		assert.ErrorIs(t, p.Close(context.Background()), boom, "later calls return the same result")
	})
}

func TestEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		var events []pool.Event
		p, err := pool.New[box](f, pool.Options{MaxSize: 2, IdleTimeout: time.Minute, JanitorInterval: 10 * time.Second,
			OnEvent: func(e pool.Event) { events = append(events, e) }})
		require.NoError(t, err)
		h := acquireN(t, p, 1)[0]
		h.Release()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		require.NoError(t, p.Close(context.Background()))
		require.Len(t, events, 2)
		assert.Equal(t, pool.EventCreated, events[0].Kind)
		assert.Equal(t, h.ID(), events[0].ID)
		assert.Equal(t, pool.EventDestroyed, events[1].Kind)
		assert.Equal(t, pool.Reason("idle"), events[1].Reason)
		assert.Equal(t, h.ID(), events[1].ID)
	})
}

// A slow OnEvent never stalls the pool.
func TestSlowOnEventDoesNotBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p, err := pool.New[box](f, pool.Options{MaxSize: 1, OnEvent: func(pool.Event) { time.Sleep(time.Hour) }})
		require.NoError(t, err)
		start := time.Now()
		for range 3000 {
			h := acquireN(t, p, 1)[0]
			h.Destroy("evicted")
		}
		assert.Less(t, time.Since(start), time.Hour)
		assert.Positive(t, p.Stats().EventsDropped)
		// Close delivers the events queued before it, but only until its
		// context ends; then it says what it is still waiting for.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err = p.Close(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "OnEvent")
		require.NoError(t, p.Close(context.Background()))
	})
}

// Close returns by its deadline even when a Create ignores its context,
// and says what is still running; a later Close waits for it.
func TestCloseBoundedByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		hang := make(chan struct{})
		f.hang = hang
		p, err := pool.New[box](f, pool.Options{MinIdle: 1, MaxSize: 3, CreateTimeout: 10 * time.Second})
		require.NoError(t, err)
		synctest.Wait()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err = p.Close(ctx)
		assert.Equal(t, time.Second, time.Since(start), "returned at the deadline")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "still running: 1 Create call")
		err = p.Close(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded, "a later Close waits the same way")
		time.Sleep(time.Minute)
		close(hang) // the Create returns at last; its item is destroyed
		require.NoError(t, p.Close(context.Background()))
		assert.Empty(t, f.liveIDs())
		assert.Equal(t, uint64(1), p.Stats().Destroyed[pool.ReasonOrphan])
	})
}

// Close under load: acquirers racing with Close all end with ErrClosed,
// every handle comes back, and every item is destroyed exactly once.
func TestCloseUnderLoad(t *testing.T) {
	t.Run("local", func(t *testing.T) { testCloseUnderLoad(t, nil) })
	t.Run("shared", func(t *testing.T) { testCloseUnderLoad(t, shared.NewMemoryInventory(nil)) })
}

func testCloseUnderLoad(t *testing.T, inv shared.Inventory) {
	f := newFake()
	p, err := pool.New[box](f, pool.Options{MaxSize: 6, MinIdle: 2, Inventory: inv})
	require.NoError(t, err)
	var wg sync.WaitGroup
	var served atomic.Int64
	for i := range 200 {
		wg.Go(func() {
			ctx := context.Background()
			if i%2 == 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Second)
				defer cancel()
			}
			for {
				h, err := p.Acquire(ctx)
				if err != nil {
					if !errors.Is(err, pool.ErrClosed) && !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Acquire: %v", err)
					}
					return
				}
				served.Add(1)
				h.Release()
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.Close(ctx))
	wg.Wait()
	assert.Positive(t, served.Load())
	c := f.counts()
	if inv == nil {
		assert.Equal(t, 0, c.live, "every item destroyed")
	} else {
		n, err := inv.Counts(context.Background())
		require.NoError(t, err)
		assert.Equal(t, shared.Counts{Idle: c.live}, n, "every item left is in the shared idle set")
	}
	assert.Equal(t, 0, c.bad, "none destroyed twice")
	s := p.Stats()
	assert.Equal(t, 0, s.Size)
	assert.Equal(t, 0, s.Waiting)
}

func TestEventKindString(t *testing.T) {
	assert.Equal(t, "created", pool.EventCreated.String())
	assert.Equal(t, "destroyed", pool.EventDestroyed.String())
	assert.Equal(t, "detached", pool.EventDetached.String())
	assert.Equal(t, "EventKind(0)", pool.EventKind(0).String())
}

// Options.EventQueue documents its default as 1024: the queue's own.
func TestEventQueueDefault(t *testing.T) {
	assert.Equal(t, 1024, pool.EventQueueDefault)
}
