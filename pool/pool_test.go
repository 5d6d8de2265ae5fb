package pool_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
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

func newPool(t *testing.T, prov pool.Provisioner[box], o pool.Options) *pool.Pool[box] {
	t.Helper()
	p, err := pool.New(prov, o)
	require.NoError(t, err)
	t.Cleanup(func() {
		// Bounded, so that a test that fails with handles out reports its
		// failure: waiting for them would deadlock a synctest bubble, and
		// that panic ends the whole test binary.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// A sandbox system: a warm pool of 2 is refilled after each assignment.
func TestWarmRefilledAfterAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		f.createDelay = 5 * time.Second
		p := newPool(t, f, pool.Options{MinIdle: 2, MaxSize: 10})
		synctest.Wait()
		assert.Equal(t, 2, p.Stats().Creating, "warm creates start at once")
		time.Sleep(5 * time.Second)
		synctest.Wait()
		require.Equal(t, 2, p.Stats().Idle)

		var held []*pool.Handle[box]
		for i := range 3 {
			start := time.Now()
			h, err := p.Acquire(context.Background())
			require.NoError(t, err)
			assert.Zero(t, time.Since(start), "acquire %d is served warm", i)
			held = append(held, h)
			synctest.Wait()
			assert.Equal(t, 1, p.Stats().Idle)
			assert.Equal(t, 1, p.Stats().Creating, "one create refills the warm pool")
			time.Sleep(5 * time.Second)
			synctest.Wait()
			assert.Equal(t, 2, p.Stats().Idle, "refilled after acquire %d", i)
		}
		assert.Equal(t, 5, f.counts().creates)
		for _, h := range held {
			h.Release()
		}
		s := p.Stats()
		assert.Equal(t, 5, s.Idle)
	})
}

// A waiter may take an item sent just before the one dispatched to it; the
// dispatched item then stays idle and no waiter is owed a create. It counts
// as one idle item, no more and no less: acquiring the other one refills
// the pool to MinIdle.
func TestWarmRefilledAfterStrandedDispatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MinIdle: 2, MaxSize: 6, JanitorInterval: -1, HealthCheckInterval: -1})
		synctest.Wait()
		require.Equal(t, 2, p.Stats().Idle)
		pool.StrandDispatched(p)
		h, err := p.Acquire(context.Background())
		require.NoError(t, err)
		synctest.Wait()
		assert.Equal(t, 2, p.Stats().Idle, "refilled to MinIdle")
		assert.Equal(t, 3, f.counts().creates)
		h.Release()
		synctest.Wait()
		assert.Equal(t, 3, p.Stats().Idle)
	})
}

// A serverless gateway: at max capacity, requests wait (FIFO) and are served on release.
func TestCapacityWaitFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MaxSize: 2})
		ctx := context.Background()
		h1, err := p.Acquire(ctx)
		require.NoError(t, err)
		h2, err := p.Acquire(ctx)
		require.NoError(t, err)

		served := make(chan int, 3)
		handles := make(chan *pool.Handle[box], 3)
		for i := range 3 {
			go func() {
				h, err := p.Acquire(ctx)
				if err != nil {
					t.Errorf("waiter %d: %v", i, err)
					return
				}
				served <- i
				handles <- h
			}()
			synctest.Wait() // queue them in order
		}
		assert.Equal(t, 3, p.Stats().Waiting)
		assert.Empty(t, served)
		time.Sleep(time.Minute)
		h1.Release()
		synctest.Wait()
		assert.Equal(t, 0, <-served)
		h2.Release()
		synctest.Wait()
		assert.Equal(t, 1, <-served)
		(<-handles).Release()
		synctest.Wait()
		assert.Equal(t, 2, <-served)
		(<-handles).Release()
		(<-handles).Release()
		s := p.Stats()
		assert.Equal(t, 2, s.Idle)
		assert.Equal(t, 2, f.counts().creates, "hand-off reuses items")
		assert.Equal(t, uint64(3), s.WaitCount)
		assert.Positive(t, s.WaitDuration)
	})
}

// A waiter that gives up leaves no trace: the item released later goes idle
// and the capacity is intact.
func TestCancelledWaiterLeavesNoTrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MaxSize: 1})
		h, err := p.Acquire(context.Background())
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = p.Acquire(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 0, p.Stats().Waiting)
		h.Release()
		s := p.Stats()
		assert.Equal(t, 1, s.Idle)
		assert.Equal(t, uint64(1), s.CanceledWaits)
		h, err = p.TryAcquire(context.Background())
		require.NoError(t, err)
		h.Release()
	})
}

// A wait for capacity that ends with its context counts in WaitDuration
// too: a pool whose callers all give up is not a pool nobody waits on.
func TestWaitDurationCountsWaitsThatGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPool(t, newFake(), pool.Options{MaxSize: 1})
		h, err := p.Acquire(context.Background())
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err = p.Acquire(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		ctx, cancel = context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		_, err = p.Acquire(ctx)
		require.ErrorIs(t, err, context.Canceled)
		s := p.Stats()
		assert.Equal(t, uint64(2), s.WaitCount)
		assert.Equal(t, uint64(2), s.CanceledWaits)
		assert.Equal(t, 500*time.Millisecond, s.WaitDuration, "300 ms to the timeout, 200 ms to the cancel")
		h.Release()
	})
}

// A caller that gives up during a create leaves the new item to the pool.
func TestCreateSurvivesCallerCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		f.createDelay = 10 * time.Second
		p := newPool(t, f, pool.Options{MaxSize: 3})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := p.Acquire(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		s := p.Stats()
		assert.Equal(t, 1, s.Idle, "the create finished under the pool's context")
		assert.Equal(t, uint64(1), s.Creates)
	})
}

// A serverless gateway's invariant under load: 1000 goroutines hammering a pool of 8,
// many cancelling at random, never hold more than 8 items and never lose a
// slot.
func TestHammerNeverExceedsCapacity(t *testing.T) {
	f := newFake()
	p := newPool(t, f, pool.Options{MaxSize: 8, MaxConcurrentCreates: 3})
	var held, maxHeld atomic.Int64
	var ok, cancelled atomic.Int64
	var wg sync.WaitGroup
	for i := range 1000 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for range 20 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(300))*time.Microsecond)
				h, err := p.Acquire(ctx)
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Acquire: %v", err)
					}
					cancelled.Add(1)
					continue
				}
				ok.Add(1)
				n := held.Add(1)
				for {
					m := maxHeld.Load()
					if n <= m || maxHeld.CompareAndSwap(m, n) {
						break
					}
				}
				if r.IntN(50) == 0 {
					held.Add(-1)
					h.Destroy("evicted")
					continue
				}
				held.Add(-1)
				h.Release()
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, maxHeld.Load(), int64(8))
	assert.Positive(t, ok.Load())
	assert.Positive(t, cancelled.Load(), "some waits must have been cancelled")
	assert.LessOrEqual(t, f.counts().maxLive, 8+0, "never more than 8 items at the provider")
	s := p.Stats()
	assert.Equal(t, 0, s.InUse)
	assert.Equal(t, 0, s.Waiting)
	// No lost slot: all 8 can be held at once.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var hs []*pool.Handle[box]
	for range 8 {
		h, err := p.Acquire(ctx)
		require.NoError(t, err)
		hs = append(hs, h)
	}
	_, err := p.TryAcquire(ctx)
	assert.ErrorIs(t, err, pool.ErrUnavailable)
	for _, h := range hs {
		h.Release()
	}
	require.NoError(t, p.Close(ctx))
	c := f.counts()
	assert.Equal(t, 0, c.live, "Close destroyed everything")
	assert.Equal(t, 0, c.bad, "no item destroyed twice")
}

func TestCreateFailureReturnedAndRecovered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		boom := errors.New("agent unreachable")
		f.createErr = boom
		p := newPool(t, f, pool.Options{MaxSize: 2, MinIdle: 1})
		_, err := p.Acquire(context.Background())
		require.ErrorIs(t, err, pool.ErrCreate)
		require.ErrorIs(t, err, boom)
		synctest.Wait()
		s := p.Stats()
		assert.Positive(t, s.CreateFailures)
		assert.Equal(t, 0, s.Size, "failed creates free their capacity")
		// The warm target is retried with backoff, not in a tight loop.
		before := s.CreateFailures
		time.Sleep(time.Second)
		synctest.Wait()
		assert.Less(t, p.Stats().CreateFailures-before, uint64(10))
		f.set(func(f *fakeProv) { f.createErr = nil })
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		assert.Equal(t, 1, p.Stats().Idle, "warm item created once the provider recovers")
		h, err := p.Acquire(context.Background())
		require.NoError(t, err)
		h.Release()
	})
}

func TestCreateTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		f.createDelay = time.Hour // honours ctx
		p := newPool(t, f, pool.Options{MaxSize: 1, CreateTimeout: 10 * time.Second})
		start := time.Now()
		_, err := p.Acquire(context.Background())
		require.ErrorIs(t, err, pool.ErrCreate)
		require.ErrorIs(t, err, pool.ErrCreateTimeout)
		assert.Equal(t, 10*time.Second, time.Since(start))
		f.set(func(f *fakeProv) { f.createDelay = 0 })
		h, err := p.Acquire(context.Background())
		require.NoError(t, err, "pool recovers after a hanging create")
		h.Release()
	})
}

// A Create that ignores its context still times out for the caller; the
// item it returns late is destroyed. Until then the call counts against
// MaxSize: its item may already exist at the provider.
func TestCreateHangIgnoringContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		hang := make(chan struct{})
		f.hang = hang
		p := newPool(t, f, pool.Options{MaxSize: 1, CreateTimeout: 10 * time.Second})
		_, err := p.Acquire(context.Background())
		require.ErrorIs(t, err, pool.ErrCreateTimeout)
		f.set(func(f *fakeProv) { f.hang = nil })
		got := make(chan *pool.Handle[box], 1)
		go func() {
			h, err := p.Acquire(context.Background())
			assert.NoError(t, err, "capacity is freed once the late create returned")
			got <- h
		}()
		synctest.Wait()
		assert.Equal(t, 1, p.Stats().Waiting, "the late create still holds the only slot")
		close(hang)
		(<-got).Release()
		synctest.Wait()
		c := f.counts()
		assert.Equal(t, 2, c.creates)
		assert.Equal(t, 1, c.live, "the late item was destroyed")
		assert.Equal(t, 1, c.maxLive)
		assert.Equal(t, uint64(1), p.Stats().Destroyed[pool.ReasonOrphan])
	})
}

// A create past CreateTimeout says so, names the option, and is not taken
// for the caller's own deadline.
func TestCreateTimeoutErrorNamesOption(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		f.createDelay = time.Hour // honours ctx
		p := newPool(t, f, pool.Options{MaxSize: 1, CreateTimeout: 10 * time.Second})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := p.Acquire(ctx)
		require.ErrorIs(t, err, pool.ErrCreate)
		require.ErrorIs(t, err, pool.ErrCreateTimeout)
		assert.NotErrorIs(t, err, context.DeadlineExceeded, "the caller's deadline did not pass")
		assert.Equal(t, "pool: create: ran past CreateTimeout (10s)", err.Error())

		// Same when Create ignores its context.
		hang := make(chan struct{})
		f.set(func(f *fakeProv) { f.createDelay, f.hang = 0, hang })
		_, err = p.Acquire(ctx)
		require.ErrorIs(t, err, pool.ErrCreateTimeout)
		assert.NotErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, "pool: create: ran past CreateTimeout (10s)", err.Error())
		close(hang)
	})
}

// A Create that ignores its context must not let the provider hold more
// than MaxSize items: each call past CreateTimeout keeps its slot until it
// returns and its late item is destroyed.
func TestLateCreatesCountAgainstMaxSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		f.startDelay = 15 * time.Second
		f.ignoreCtx = true
		p := newPool(t, f, pool.Options{MaxSize: 3, CreateTimeout: 10 * time.Second, JanitorInterval: -1})
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				for {
					ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
					h, err := p.Acquire(ctx)
					cancel()
					if err == nil {
						h.Release()
						return
					}
					if !errors.Is(err, pool.ErrCreateTimeout) && !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Acquire: %v", err)
						return
					}
					f.set(func(f *fakeProv) { f.startDelay = time.Second })
				}
			})
		}
		wg.Wait()
		c := f.counts()
		assert.LessOrEqual(t, c.maxLive, 3, "never more than MaxSize items at the provider")
		assert.LessOrEqual(t, p.Stats().Size, 3)
	})
}

func TestCreatePanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		f.panicValue = "kaboom"
		p := newPool(t, f, pool.Options{MaxSize: 1})
		_, err := p.Acquire(context.Background())
		var pe *pool.PanicError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "kaboom", pe.Value)
		f.set(func(f *fakeProv) { f.panicValue = nil })
		h, err := p.Acquire(context.Background())
		require.NoError(t, err)
		h.Release()
	})
}

func TestDoubleReleasePanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPool(t, newFake(), pool.Options{})
		h, err := p.Acquire(context.Background())
		require.NoError(t, err)
		h.Release()
		assert.PanicsWithValue(t, "pool: handle released twice", h.Release)
		assert.PanicsWithValue(t, "pool: handle released twice", func() { h.Destroy("evicted") })
	})
}

func TestTryAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MaxSize: 1})
		_, err := p.TryAcquire(context.Background())
		require.ErrorIs(t, err, pool.ErrUnavailable)
		synctest.Wait() // the background create it started
		h, err := p.TryAcquire(context.Background())
		require.NoError(t, err)
		_, err = p.TryAcquire(context.Background())
		require.ErrorIs(t, err, pool.ErrUnavailable)
		h.Release()
	})
}

func TestHandleDestroy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MaxSize: 1})
		h, err := p.Acquire(context.Background())
		require.NoError(t, err)
		id := h.ID()
		assert.Equal(t, id, h.Value().ID)
		h.Destroy(pool.ReasonUnhealthy)
		synctest.Wait()
		assert.NotContains(t, f.liveIDs(), id)
		s := p.Stats()
		assert.Equal(t, uint64(1), s.Destroyed[pool.ReasonUnhealthy])
		assert.Equal(t, 0, s.Size)
	})
}

// An event queue larger than the shared queue allows is refused at New
// rather than allocated.
func TestEventQueueTooLarge(t *testing.T) {
	_, err := pool.New[box](newFake(), pool.Options{EventQueue: 1<<20 + 1, OnEvent: func(pool.Event) {}})
	require.ErrorIs(t, err, pool.ErrInvalid)
	assert.ErrorContains(t, err, "pool: EventQueue (1048577)")
}

func TestBadOptions(t *testing.T) {
	cases := []struct {
		o     pool.Options
		field string
	}{
		{pool.Options{MinIdle: 12, MaxIdle: 10}, "MinIdle (12) > MaxIdle (10)"},
		{pool.Options{MaxSize: -1}, "MaxSize"},
		{pool.Options{MaxIdle: 20, MaxSize: 10}, "MaxIdle (20) > MaxSize (10)"},
		{pool.Options{MinIdle: 5, MaxIdle: 5, MaxSize: 3}, "MaxIdle (5) > MaxSize (3)"},
		{pool.Options{DestroyTimeout: -time.Second}, "DestroyTimeout"},
		{pool.Options{MaxLifetime: -1, LifetimeJitter: time.Minute}, "LifetimeJitter"},
		{pool.Options{LifetimeJitter: 2 * time.Hour}, "LifetimeJitter (2h0m0s) >= MaxLifetime (1h0m0s, the default)"},
		{pool.Options{MaxLifetime: time.Minute, LifetimeJitter: time.Minute}, "LifetimeJitter (1m0s) >= MaxLifetime"},
		{pool.Options{MaxSize: 2, MaxConcurrentCreates: 3}, "MaxConcurrentCreates"},
		{pool.Options{CreateTimeout: -1}, "CreateTimeout"},
		{pool.Options{EventQueue: -1}, "EventQueue (-1) is negative"},
	}
	for _, c := range cases {
		_, err := pool.New[box](newFake(), c.o)
		if assert.Error(t, err, "%+v", c.o) {
			assert.Contains(t, err.Error(), c.field)
			assert.ErrorIs(t, err, pool.ErrInvalid)
		}
	}
	_, err := pool.New[box](plain{newFake()}, pool.Options{CleanupOnStart: true})
	assert.ErrorContains(t, err, "Lister")
	_, err = pool.New[box](plain{newFake()}, pool.Options{Inventory: shared.NewMemoryInventory(nil)})
	assert.ErrorContains(t, err, "ID(T) string")
	_, err = pool.New[box](nil, pool.Options{})
	assert.Error(t, err)
}

// An error about the options names the fields the user set, never one
// that took its default.
func TestOptionErrorsNameWhatWasSet(t *testing.T) {
	cases := []struct {
		o    pool.Options
		want string
	}{
		{pool.Options{MaxSize: 2, MinIdle: 5}, "pool: MinIdle (5) > MaxSize (2)"},
		{pool.Options{MaxIdle: 20}, "pool: MaxIdle (20) > MaxSize (10, the default)"},
		{pool.Options{MaxConcurrentCreates: 11}, "pool: MaxConcurrentCreates (11) > MaxSize (10, the default)"},
	}
	for _, c := range cases {
		_, err := pool.New[box](newFake(), c.o)
		require.ErrorIs(t, err, pool.ErrInvalid, "%+v", c.o)
		assert.Equal(t, c.want, err.Error())
	}
}

// MaxConcurrentCreates bounds the creates in flight; the waiters are served
// as creates finish.
func TestMaxConcurrentCreates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		f.createDelay = 10 * time.Second
		p := newPool(t, f, pool.Options{MaxSize: 5, MaxConcurrentCreates: 2})
		got := make(chan *pool.Handle[box], 5)
		for range 5 {
			go func() {
				h, err := p.Acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				got <- h
			}()
		}
		synctest.Wait()
		assert.Equal(t, 2, p.Stats().Creating)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		assert.Len(t, got, 2)
		assert.Equal(t, 2, p.Stats().Creating)
		time.Sleep(20 * time.Second)
		synctest.Wait()
		assert.Len(t, got, 5)
		for range 5 {
			(<-got).Release()
		}
	})
}

// A Destroy that hangs past DestroyTimeout is reported, and its capacity is
// freed.
func TestDestroyTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		f := &hangingDestroy{fakeProv: newFake()}
		p, err := pool.New[box](f, pool.Options{MaxSize: 1, DestroyTimeout: 5 * time.Second,
			Logger: slog.New(slog.NewTextHandler(&buf, nil))})
		require.NoError(t, err)
		h, err := p.Acquire(context.Background())
		require.NoError(t, err)
		h.Destroy("evicted")
		synctest.Wait()
		assert.Equal(t, 1, p.Stats().Destroying, "counts against capacity while destroying")
		start := time.Now()
		h, err = p.Acquire(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 5*time.Second, time.Since(start), "capacity freed at the timeout")
		synctest.Wait()
		s := p.Stats()
		assert.Equal(t, uint64(1), s.DestroyErrors)
		assert.Contains(t, buf.String(), "pool: destroy")
		assert.Contains(t, buf.String(), "deadline exceeded")
		h.Release()
		require.ErrorIs(t, p.Close(context.Background()), context.DeadlineExceeded)
	})
}

// hangingDestroy's Destroy blocks until its context ends.
type hangingDestroy struct{ *fakeProv }

func (h *hangingDestroy) Destroy(ctx context.Context, _ box) error {
	<-ctx.Done()
	return ctx.Err()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A worker that died while idle is not handed out with CheckOnAcquire:
// five acquires within one janitor interval all get a live worker.
func TestCheckOnAcquireSkipsDeadIdleItems(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MinIdle: 2, MaxSize: 4, CheckOnAcquire: true, HealthCheckInterval: time.Hour})
		for range 5 {
			synctest.Wait() // warm
			for _, id := range f.liveIDs() {
				f.set(func(f *fakeProv) { f.unhealthy[id] = true }) // died while idle
			}
			h, err := p.Acquire(context.Background())
			require.NoError(t, err)
			require.NoError(t, f.Check(context.Background(), h.Value()), "a dead worker was handed out")
			h.Destroy("evicted")
		}
		synctest.Wait()
		assert.Equal(t, uint64(10), p.Stats().Destroyed[pool.ReasonUnhealthy])
		_, err := pool.New[box](plain{newFake()}, pool.Options{CheckOnAcquire: true})
		assert.ErrorIs(t, err, pool.ErrInvalid)
		assert.ErrorContains(t, err, "Checker")
	})
}

// An item dispatched from its create to a waiter that took another one
// stays idle: it is checked like any idle item, since it may die there.
func TestCheckOnAcquireChecksStrandedDispatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MinIdle: 2, MaxSize: 4, CheckOnAcquire: true, HealthCheckInterval: time.Hour})
		synctest.Wait()
		pool.StrandDispatched(p)
		for _, id := range f.liveIDs() {
			f.set(func(f *fakeProv) { f.unhealthy[id] = true }) // died while idle
		}
		h, err := p.Acquire(context.Background())
		require.NoError(t, err)
		require.NoError(t, f.Check(context.Background(), h.Value()), "a dead worker was handed out")
		h.Release()
		synctest.Wait()
		assert.Equal(t, uint64(2), p.Stats().Destroyed[pool.ReasonUnhealthy])
	})
}

// Do releases the item when fn succeeds; when fn fails it destroys the
// item and runs fn once more on another one.
func TestDoRetriesOnAnotherItem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		p := newPool(t, f, pool.Options{MaxSize: 2})
		hs := acquireN(t, p, 1)
		dead := hs[0].ID()
		releaseAll(hs)
		f.vanish(dead) // the worker crashed while idle
		var used []string
		err := p.Do(context.Background(), func(b box) error {
			used = append(used, b.ID)
			if !isLive(f, b.ID) {
				return errors.New("connection refused")
			}
			return nil
		})
		require.NoError(t, err)
		require.Len(t, used, 2)
		assert.Equal(t, dead, used[0])
		assert.NotEqual(t, dead, used[1])
		synctest.Wait()
		s := p.Stats()
		assert.Equal(t, uint64(1), s.Destroyed[pool.ReasonUnhealthy])
		assert.Equal(t, 1, s.Idle, "the good item was released")

		boom := errors.New("boom")
		calls := 0
		err = p.Do(context.Background(), func(box) error { calls++; return boom })
		require.ErrorIs(t, err, boom)
		assert.Equal(t, 2, calls, "one retry only")
		assert.PanicsWithValue(t, "fn", func() {
			_ = p.Do(context.Background(), func(box) error { panic("fn") })
		})
		synctest.Wait()
		assert.Zero(t, p.Stats().InUse)
	})
}
