package lease_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/lease"
)

var ctx = context.Background()

// gate is a settable admission gate.
type gate struct{ over atomic.Bool }

func (g *gate) Overloaded() bool { return g.over.Load() }

// recorder collects events.
type recorder struct {
	mu sync.Mutex
	ev []lease.Event
}

func (r *recorder) on(e lease.Event) {
	r.mu.Lock()
	r.ev = append(r.ev, e)
	r.mu.Unlock()
}

func (r *recorder) kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.ev {
		s := e.Kind.String()
		if e.Rejection != nil {
			s += ":" + condition[e.Rejection.Err]
		}
		out = append(out, s)
	}
	return out
}

// condition names the refusals in kinds.
var condition = map[error]string{
	lease.ErrRecovering: "recovering", lease.ErrOverloaded: "overloaded",
	lease.ErrHolderHasLease: "holder_has_lease", lease.ErrOverCapacity: "over_capacity",
}

func newManager(t *testing.T, budget int, o lease.Options) *lease.Manager {
	t.Helper()
	if o.Store == nil {
		o.Store = lease.NewMemoryStore(o.Clock)
	}
	m, err := lease.New(budget, o)
	require.NoError(t, err)
	storeOf.Store(m, o.Store)
	t.Cleanup(func() { _ = m.Close(ctx); storeOf.Delete(m) })
	return m
}

// storeOf holds the store of each Manager newManager made, for the list of
// live leases, which is the store's to read.
var storeOf sync.Map // *lease.Manager → lease.Store

// list returns the live leases of m's store.
func list(m *lease.Manager) ([]lease.Lease, error) {
	s, _ := storeOf.Load(m)
	return s.(lease.Store).List(ctx)
}

// use is the budget as seen at one moment, from Manager.Usage and Stats.
type use struct{ Units, Leases, Budget, Available int }

// usage returns m's budget as seen now.
func usage(m *lease.Manager) (use, error) {
	units, n, err := m.Usage(ctx)
	b := m.Stats().Budget
	return use{Units: units, Leases: n, Budget: b, Available: max(b-units, 0)}, err
}

func TestNewValidates(t *testing.T) {
	for name, c := range map[string]struct {
		budget int
		o      lease.Options
		field  string
	}{
		"budget": {0, lease.Options{}, "budget"},
		"ttl":    {5, lease.Options{TTL: -1}, "TTL"},
		"grace":  {5, lease.Options{Grace: -1}, "Grace"},
		"batch":  {5, lease.Options{SweepBatch: -1}, "SweepBatch"},
		"queue":  {5, lease.Options{EventQueue: -1}, "EventQueue"},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := lease.New(c.budget, c.o)
			require.ErrorIs(t, err, lease.ErrInvalid)
			assert.Nil(t, m)
			assert.Contains(t, err.Error(), c.field)
		})
	}
}

// TestCameraAdmission is a camera admission server end to end on the defaults:
// a budget of 50 − 5 − 10 = 35 units, main stream 2 falling back to sub 1, one
// modal per user, TTL 300 s, grace 45 s, cleanup every 10 s.
func TestCameraAdmission(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		g := &gate{}
		m := newManager(t, 50-5-10, lease.Options{Gate: g, OnEvent: rec.on})
		main := func(user string) lease.Request {
			return lease.Request{Holder: user, Resource: "cam_2f_19", Cost: 2, Fallback: []int{1}}
		}

		// 17 users get main streams (34 units), the 18th falls back to sub.
		var leases []lease.Lease
		for i := range 17 {
			l, err := m.Grant(ctx, main(string(rune('a'+i))))
			require.NoError(t, err)
			require.Equal(t, 2, l.Cost)
			leases = append(leases, l)
		}
		l, err := m.Grant(ctx, main("r"))
		require.NoError(t, err)
		assert.Equal(t, 1, l.Cost, "fallback to the sub stream")
		assert.Equal(t, 300*time.Second, l.ExpiresAt.Sub(l.CreatedAt))
		assert.Equal(t, 45*time.Second, l.Grace)

		// OVER_CAPACITY, USER_ALREADY_HAS_MODAL, SYSTEM_OVERLOAD, in that order.
		_, err = m.Grant(ctx, main("s"))
		require.ErrorIs(t, err, lease.ErrOverCapacity)
		var re *lease.RejectedError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, 0, re.Available)
		_, err = m.Grant(ctx, main("a"))
		require.ErrorAs(t, err, &re)
		assert.Equal(t, lease.ErrHolderHasLease, re.Err)
		assert.Equal(t, leases[0].ID, re.Existing)
		g.over.Store(true)
		_, err = m.Grant(ctx, main("a"))
		require.ErrorIs(t, err, lease.ErrOverloaded)
		g.over.Store(false)

		u, err := usage(m)
		require.NoError(t, err)
		assert.Equal(t, use{Units: 35, Leases: 18, Budget: 35, Available: 0}, u)

		// Every user but "a" heartbeats every 30 s; "a" abandoned its tab.
		for range 2 {
			time.Sleep(30 * time.Second)
			for _, l := range leases[1:] {
				rem, err := m.Heartbeat(ctx, l.ID, "")
				require.NoError(t, err)
				assert.Equal(t, 45*time.Second, rem.Remaining)
			}
			_, err := m.Heartbeat(ctx, l.ID, "")
			require.NoError(t, err)
		}
		// 60 s after its last heartbeat, a's lease is gone and its units
		// are back, whether or not the 10 s cleanup has run yet.
		_, err = m.Heartbeat(ctx, leases[0].ID, "")
		require.Error(t, err)
		assert.True(t, errors.Is(err, lease.ErrExpired) || errors.Is(err, lease.ErrNotFound), "%v", err)
		u, err = usage(m)
		require.NoError(t, err)
		assert.Equal(t, 33, u.Units)
		l2, err := m.Grant(ctx, main("s"))
		require.NoError(t, err)
		assert.Equal(t, 2, l2.Cost)

		// The user closing the modal releases; the units return at once.
		_, err = m.Release(ctx, l2.ID, "")
		require.NoError(t, err)
		_, err = m.Get(ctx, l2.ID)
		require.ErrorIs(t, err, lease.ErrNotFound)

		// The sweep loop (every 10 s) reported a's lease exactly once.
		time.Sleep(10 * time.Second)
		synctest.Wait()
		kinds := rec.kinds()
		assert.Equal(t, 1, count(kinds, "expired"))
		st := m.Stats()
		assert.Equal(t, uint64(19), st.Granted)
		assert.Equal(t, uint64(1), st.RejectedOverCapacity)
		assert.Equal(t, uint64(1), st.RejectedHolderHasLease)
		assert.Equal(t, uint64(1), st.RejectedOverloaded)
		assert.Equal(t, uint64(2*17), st.Heartbeats)
		assert.Equal(t, uint64(1), st.HeartbeatsFailed)
		assert.Equal(t, uint64(1), st.Released)
		assert.Equal(t, uint64(1), st.Expired)
		assert.Equal(t, uint64(1), st.ExpiredLapsed, "a's tab stopped heartbeating")
		assert.Equal(t, 17, st.ActiveLeases)
		assert.Equal(t, 33, st.UnitsInUse)
		assert.Equal(t, 35, st.Budget)
		assert.Zero(t, st.StoreErrors)

		// Nobody heartbeats any more: at 300 s every lease has expired by
		// grace; the loop reclaims them all.
		time.Sleep(300 * time.Second)
		synctest.Wait()
		u, err = usage(m)
		require.NoError(t, err)
		assert.Equal(t, use{Budget: 35, Available: 35}, u)
		assert.Equal(t, 1+17, count(rec.kinds(), "expired"))
		ls, err := list(m)
		require.NoError(t, err)
		assert.Empty(t, ls)
	})
}

func count(xs []string, x string) int {
	n := 0
	for _, s := range xs {
		if s == x {
			n++
		}
	}
	return n
}

func TestHeartbeatNeverPastExpiresAt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newManager(t, 10, lease.Options{TTL: 100 * time.Second, Grace: 45 * time.Second, SweepInterval: -1})
		l, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 1})
		require.NoError(t, err)
		time.Sleep(80 * time.Second)
		_, err = m.Heartbeat(ctx, l.ID, "") // too late: grace ran out at 45 s
		require.ErrorIs(t, err, lease.ErrExpired)

		l, err = m.Grant(ctx, lease.Request{Holder: "u", Cost: 1})
		require.NoError(t, err)
		time.Sleep(40 * time.Second)
		rem, err := m.Heartbeat(ctx, l.ID, "")
		require.NoError(t, err)
		assert.Equal(t, 45*time.Second, rem.Remaining)
		time.Sleep(40 * time.Second)
		rem, err = m.Heartbeat(ctx, l.ID, "")
		require.NoError(t, err)
		assert.Equal(t, 20*time.Second, rem.Remaining, "capped by ExpiresAt")
		time.Sleep(20 * time.Second)
		_, err = m.Heartbeat(ctx, l.ID, "")
		require.ErrorIs(t, err, lease.ErrExpired)
		g, err := m.Get(ctx, l.ID)
		require.ErrorIs(t, err, lease.ErrExpired, "not resurrected: %+v", g)
		r, err := m.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, lease.SweepResult{Expired: 2, Lapsed: 1, Batches: 1}, r)
		st := m.Stats()
		assert.Equal(t, uint64(2), st.Expired)
		assert.Equal(t, uint64(1), st.ExpiredLapsed, "the first missed its heartbeat, the second reached ExpiresAt")
	})
}

func TestRequestOverridesAndBadInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newManager(t, 5, lease.Options{})
		for name, r := range map[string]lease.Request{
			"empty holder":      {Cost: 1},
			"zero cost":         {Holder: "u"},
			"negative cost":     {Holder: "u", Cost: -1},
			"cost above budget": {Holder: "u", Cost: 6},
			"bad fallback":      {Holder: "u", Cost: 2, Fallback: []int{0}},
			"negative ttl":      {Holder: "u", Cost: 1, TTL: -time.Second},
			"negative grace":    {Holder: "u", Cost: 1, Grace: -time.Second},
		} {
			_, err := m.Grant(ctx, r)
			assert.ErrorIs(t, err, lease.ErrInvalid, name)
		}
		assert.Equal(t, uint64(7), m.Stats().Invalid)
		u, err := usage(m)
		require.NoError(t, err)
		assert.Zero(t, u.Leases)

		l, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 1, TTL: time.Minute, Grace: 5 * time.Second})
		require.NoError(t, err)
		assert.Equal(t, time.Minute, l.ExpiresAt.Sub(l.CreatedAt))
		assert.Equal(t, 5*time.Second, l.Grace)
	})
}

func TestAllowMultiplePerHolder(t *testing.T) {
	m := newManager(t, 5, lease.Options{AllowMultiplePerHolder: true, SweepInterval: -1})
	for range 5 {
		_, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 1})
		require.NoError(t, err)
	}
	_, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 1})
	require.ErrorIs(t, err, lease.ErrOverCapacity)
}

func TestEventsInOrderAndOffLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var m *lease.Manager
		rec := &recorder{}
		// The callback calls back into the Manager: it must not hold a lock.
		m = newManager(t, 2, lease.Options{SweepInterval: -1, Grace: 5 * time.Second, OnEvent: func(e lease.Event) {
			_, _ = usage(m)
			rec.on(e)
		}})
		a, err := m.Grant(ctx, lease.Request{Holder: "a", Cost: 2})
		require.NoError(t, err)
		_, err = m.Grant(ctx, lease.Request{Holder: "b", Cost: 1})
		require.Error(t, err)
		_, err = m.Heartbeat(ctx, a.ID, "")
		require.NoError(t, err)
		_, err = m.Release(ctx, a.ID, "")
		require.NoError(t, err)
		_, err = m.Grant(ctx, lease.Request{Holder: "c", Cost: 1})
		require.NoError(t, err)
		time.Sleep(5 * time.Second)
		r, err := m.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, r.Expired)
		synctest.Wait()
		assert.Equal(t, []string{"granted", "rejected:over_capacity", "heartbeat", "released", "granted", "expired"}, rec.kinds())
		rec.mu.Lock()
		assert.Equal(t, "c", rec.ev[5].Lease.Holder)
		assert.Equal(t, "b", rec.ev[1].Lease.Holder)
		rec.mu.Unlock()
	})
}

func TestSlowCallbackNeverBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		m := newManager(t, 1000, lease.Options{SweepInterval: -1, EventQueue: 4, OnEvent: func(lease.Event) { <-release }})
		for i := range 100 {
			_, err := m.Grant(ctx, lease.Request{Holder: string(rune(i + 1)), Cost: 1})
			require.NoError(t, err)
			if i == 0 {
				synctest.Wait() // the first event is in the callback
			}
		}
		// One event is in the callback, EventQueue more are queued.
		assert.Equal(t, uint64(100-1-4), m.Stats().EventsDropped)
		close(release)
	})
}

func TestCloseIdempotentAndErrClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		s := lease.NewMemoryStore(nil)
		m, err := lease.New(3, lease.Options{Store: s, OnEvent: rec.on})
		require.NoError(t, err)
		l, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 1})
		require.NoError(t, err)
		require.NoError(t, m.Close(ctx))
		require.NoError(t, m.Close(ctx))
		assert.Equal(t, []string{"granted"}, rec.kinds(), "queued events are delivered before Close returns")
		_, err = m.Grant(ctx, lease.Request{Holder: "v", Cost: 1})
		assert.ErrorIs(t, err, lease.ErrClosed)
		_, err = m.Heartbeat(ctx, l.ID, "")
		assert.ErrorIs(t, err, lease.ErrClosed)
		_, err = m.Release(ctx, l.ID, "")
		assert.ErrorIs(t, err, lease.ErrClosed)
		// Reads of state keep working: the lease stays in the store.
		g, err := m.Get(ctx, l.ID)
		require.NoError(t, err)
		assert.Equal(t, l.ID, g.ID)
		ls, err := s.List(ctx)
		require.NoError(t, err)
		require.Len(t, ls, 1)
		assert.Equal(t, l.ID, ls[0].ID)
		u, err := usage(m)
		require.NoError(t, err)
		assert.Equal(t, use{Units: 1, Leases: 1, Budget: 3, Available: 2}, u)
		assert.Equal(t, 1, m.Stats().ActiveLeases)
		_, err = m.Sweep(ctx)
		assert.ErrorIs(t, err, lease.ErrClosed)
		k := m.KeepAlive(ctx, l, time.Second)
		<-k.Done()
		assert.ErrorIs(t, k.Err(), lease.ErrClosed)
	})
}

// A rejection event says who was refused, for what, at what cost and why,
// as Grant's error does: OnEvent alone can log or count refusals.
func TestRejectedEventCarriesTheRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		g := &gate{}
		m := newManager(t, 3, lease.Options{Gate: g, OnEvent: rec.on, Grace: 45 * time.Second})
		first, err := m.Grant(ctx, lease.Request{Holder: "a", Resource: "cam1", Cost: 2})
		require.NoError(t, err)
		fallback := []int{1}
		req := lease.Request{Holder: "b", Resource: "cam2", Cost: 3, Fallback: fallback, TTL: time.Minute}
		_, err = m.Grant(ctx, lease.Request{Holder: "c", Resource: "cam3", Cost: 1})
		require.NoError(t, err)
		_, err = m.Grant(ctx, req)
		require.ErrorIs(t, err, lease.ErrOverCapacity)
		fallback[0] = 99 // the caller reuses its slice; the event keeps what was asked
		_, err = m.Grant(ctx, lease.Request{Holder: "a", Resource: "cam4", Cost: 1})
		require.ErrorIs(t, err, lease.ErrHolderHasLease)
		g.over.Store(true)
		_, err = m.Grant(ctx, lease.Request{Holder: "d", Resource: "cam5", Cost: 1})
		require.ErrorIs(t, err, lease.ErrOverloaded)
		synctest.Wait()

		rec.mu.Lock()
		all := slices.Clone(rec.ev)
		rec.mu.Unlock()
		var rej []lease.Event
		for _, e := range all {
			if e.Kind == lease.EventRejected {
				rej = append(rej, e)
			}
		}
		require.Len(t, rej, 3)

		e := rej[0]
		assert.Equal(t, lease.ErrOverCapacity, e.Rejection.Err)
		assert.Equal(t, lease.Request{Holder: "b", Resource: "cam2", Cost: 3, Fallback: []int{1}, TTL: time.Minute, Grace: 45 * time.Second}, e.Request)
		assert.Equal(t, "b", e.Lease.Holder)
		assert.Equal(t, "cam2", e.Lease.Resource)
		assert.Equal(t, 3, e.Lease.Cost)
		require.NotNil(t, e.Rejection)
		assert.Equal(t, 0, e.Rejection.Available)

		e = rej[1]
		assert.Equal(t, lease.ErrHolderHasLease, e.Rejection.Err)
		assert.Equal(t, "a", e.Request.Holder)
		assert.Equal(t, "cam4", e.Request.Resource)
		assert.Equal(t, 1, e.Lease.Cost)
		assert.Equal(t, 5*time.Minute, e.Request.TTL, "the TTL the lease would have had")
		require.NotNil(t, e.Rejection)
		assert.Equal(t, first.ID, e.Rejection.Existing)

		e = rej[2]
		assert.Equal(t, lease.ErrOverloaded, e.Rejection.Err)
		assert.Equal(t, "d", e.Request.Holder)
		assert.Equal(t, "cam5", e.Request.Resource)
		require.NotNil(t, e.Rejection)
		assert.Equal(t, lease.ErrOverloaded, e.Rejection.Err)

		for _, e := range all {
			if e.Kind != lease.EventRejected {
				assert.Zero(t, e.Request, "%v", e.Kind)
				assert.Nil(t, e.Rejection, "%v", e.Kind)
			}
		}
	})
}

// TestSharedStore: two Managers on one store share the budget, and each
// expired lease is reported by exactly one of their sweeps.
func TestSharedStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := lease.NewMemoryStore(nil)
		r1, r2 := &recorder{}, &recorder{}
		m1 := newManager(t, 4, lease.Options{Store: s, OnEvent: r1.on, Grace: 15 * time.Second})
		m2 := newManager(t, 4, lease.Options{Store: s, OnEvent: r2.on, Grace: 15 * time.Second})
		_, err := m1.Grant(ctx, lease.Request{Holder: "a", Cost: 3})
		require.NoError(t, err)
		_, err = m2.Grant(ctx, lease.Request{Holder: "a", Cost: 1})
		require.ErrorIs(t, err, lease.ErrHolderHasLease)
		_, err = m2.Grant(ctx, lease.Request{Holder: "b", Cost: 2})
		require.ErrorIs(t, err, lease.ErrOverCapacity)
		_, err = m2.Grant(ctx, lease.Request{Holder: "b", Cost: 1})
		require.NoError(t, err)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		assert.Equal(t, 2, count(r1.kinds(), "expired")+count(r2.kinds(), "expired"))
		assert.Equal(t, uint64(2), m1.Stats().Expired+m2.Stats().Expired)
	})
}

// TestMockClock drives a Manager and its MemoryStore with a clock.Mock, the
// injection path for users who use one.
func TestMockClock(t *testing.T) {
	mc := clock.NewMock()
	rec := &recorder{}
	m := newManager(t, 2, lease.Options{Clock: mc, OnEvent: rec.on, SweepInterval: 10 * time.Second})
	l, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 2})
	require.NoError(t, err)
	assert.Equal(t, mc.Now().Add(5*time.Minute), l.ExpiresAt)
	mc.Add(44 * time.Second)
	rem, err := m.Heartbeat(ctx, l.ID, "")
	require.NoError(t, err)
	assert.Equal(t, 45*time.Second, rem.Remaining)
	mc.Add(50 * time.Second) // grace runs out at 89 s; the sweep ticker fires at 90 s
	_, err = m.Get(ctx, l.ID)
	assert.True(t, errors.Is(err, lease.ErrExpired) || errors.Is(err, lease.ErrNotFound), "%v", err)
	require.Eventually(t, func() bool { return count(rec.kinds(), "expired") == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, uint64(1), m.Stats().Expired)
}

func TestCancelledCallerIsNotAStoreError(t *testing.T) {
	m := newManager(t, 3, lease.Options{SweepInterval: -1})
	c, cancel := context.WithCancel(ctx)
	cancel()
	_, err := m.Grant(c, lease.Request{Holder: "u", Cost: 1})
	require.ErrorIs(t, err, context.Canceled)
	_, err = m.Heartbeat(c, "x", "")
	require.ErrorIs(t, err, context.Canceled)
	st := m.Stats()
	assert.Zero(t, st.StoreErrors)
	assert.Zero(t, st.Granted)
	u, err := usage(m)
	require.NoError(t, err)
	assert.Zero(t, u.Leases)
}

// TestNegativeDurationsNamed: a negative TTL or Grace names its field.
func TestNegativeDurationsNamed(t *testing.T) {
	m := newManager(t, 3, lease.Options{SweepInterval: -1})
	_, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 1, TTL: -time.Second})
	require.ErrorIs(t, err, lease.ErrInvalid)
	assert.Contains(t, err.Error(), "TTL (-1s)")
	assert.NotContains(t, err.Error(), "Grace")
	_, err = m.Grant(ctx, lease.Request{Holder: "u", Cost: 1, Grace: -time.Second})
	require.ErrorIs(t, err, lease.ErrInvalid)
	assert.Contains(t, err.Error(), "Grace (-1s)")
	assert.NotContains(t, err.Error(), "TTL")
	assert.Equal(t, uint64(2), m.Stats().Invalid)
}

// blockingGrant holds Grant calls until release is closed.
type blockingGrant struct {
	lease.Store
	entered chan struct{}
	release chan struct{}
}

func (s *blockingGrant) Grant(ctx context.Context, a lease.GrantArgs) (lease.Lease, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.Store.Grant(ctx, a)
}

// TestEventAfterCloseIsCounted: a Grant in flight when Close runs emits its
// event after the final drain; it is counted as dropped, not lost silently.
func TestEventAfterCloseIsCounted(t *testing.T) {
	s := &blockingGrant{Store: lease.NewMemoryStore(nil), entered: make(chan struct{}), release: make(chan struct{})}
	var got atomic.Int32
	m, err := lease.New(3, lease.Options{Store: s, SweepInterval: -1, OnEvent: func(lease.Event) { got.Add(1) }})
	require.NoError(t, err)
	done := make(chan error)
	go func() {
		_, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 1})
		done <- err
	}()
	<-s.entered
	require.NoError(t, m.Close(ctx))
	close(s.release)
	require.NoError(t, <-done)
	assert.Zero(t, got.Load())
	assert.Equal(t, uint64(1), m.Stats().EventsDropped)
}

// TestSweepCancelledIsNoStoreError: the caller's cancellation is not a store
// error, in Sweep as in every other method.
func TestSweepCancelledIsNoStoreError(t *testing.T) {
	m := newManager(t, 3, lease.Options{SweepInterval: -1})
	c, cancel := context.WithCancel(ctx)
	cancel()
	_, err := m.Sweep(c)
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, m.Stats().StoreErrors)
}

// TestStatsGaugesExactInMemory: with the MemoryStore the gauges need no
// Sweep or Usage call first.
func TestStatsGaugesExactInMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newManager(t, 10, lease.Options{SweepInterval: -1, Grace: time.Minute})
		_, err := m.Grant(ctx, lease.Request{Holder: "u", Cost: 2})
		require.NoError(t, err)
		_, err = m.Grant(ctx, lease.Request{Holder: "v", Cost: 3, Grace: time.Second})
		require.NoError(t, err)
		st := m.Stats()
		assert.Equal(t, [2]int{2, 5}, [2]int{st.ActiveLeases, st.UnitsInUse})
		time.Sleep(time.Second) // v's lease expires; no sweep runs
		st = m.Stats()
		assert.Equal(t, [2]int{1, 2}, [2]int{st.ActiveLeases, st.UnitsInUse})
	})
}

// TestCloseWaitsForCallbackUntilCtx: Close waits for an OnEvent call in
// progress until its ctx ends, says what still runs and wraps the cause; a
// later Close returns nil once the callback has returned.
func TestCloseWaitsForCallbackUntilCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var delivered atomic.Int32
		m, err := lease.New(3, lease.Options{SweepInterval: -1, OnEvent: func(lease.Event) {
			<-release
			delivered.Add(1)
		}})
		require.NoError(t, err)
		_, err = m.Grant(ctx, lease.Request{Holder: "u", Cost: 1})
		require.NoError(t, err)
		_, err = m.Grant(ctx, lease.Request{Holder: "v", Cost: 1})
		require.NoError(t, err)
		synctest.Wait() // the first event is in the callback
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		err = m.Close(c)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "event callback still running")
		_, err = m.Grant(ctx, lease.Request{Holder: "w", Cost: 1})
		require.ErrorIs(t, err, lease.ErrClosed, "closed for new work although Close timed out")
		close(release)
		require.NoError(t, m.Close(ctx))
		assert.Equal(t, int32(2), delivered.Load(), "the queued event is delivered")
		assert.Zero(t, m.Stats().EventsDropped)
	})
}

// stuckSweep is a store whose Sweep ignores its context until release is
// closed.
type stuckSweep struct {
	lease.Store
	entered chan struct{}
	release chan struct{}
}

func (s *stuckSweep) Sweep(ctx context.Context, limit int) ([]lease.Lease, error) {
	s.entered <- struct{}{}
	<-s.release
	return s.Store.Sweep(ctx, limit)
}

// TestCloseNamesTheSweepLoop: a sweep stuck in a store that ignores
// cancellation holds Close until its ctx ends, and the error says so.
func TestCloseNamesTheSweepLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &stuckSweep{Store: lease.NewMemoryStore(nil), entered: make(chan struct{}), release: make(chan struct{})}
		m, err := lease.New(3, lease.Options{Store: s, SweepInterval: time.Second})
		require.NoError(t, err)
		<-s.entered // the loop's first sweep
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		err = m.Close(c)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, err.Error(), "the sweep loop still running")
		close(s.release)
		require.NoError(t, m.Close(ctx))
		require.NoError(t, m.Close(ctx), "idempotent")
	})
}

func TestEventKindString(t *testing.T) {
	for k, want := range map[lease.EventKind]string{
		lease.EventGranted: "granted", lease.EventRejected: "rejected", lease.EventHeartbeat: "heartbeat",
		lease.EventReleased: "released", lease.EventExpired: "expired", 0: "EventKind(0)", 99: "EventKind(99)",
	} {
		assert.Equal(t, want, k.String())
	}
}

// TestHolderCheckedCalls: Heartbeat and Release with a holder refuse
// another holder's lease with ErrWrongHolder, change nothing and leave its
// KeepAlive running; with the right holder they heartbeat and release.
func TestHolderCheckedCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newCamerasManager(t, nil)
		l, err := m.Grant(ctx, lease.Request{Holder: "alice", Cost: 2})
		require.NoError(t, err)
		k := m.KeepAlive(ctx, l, 15*time.Second)

		_, err = m.Heartbeat(ctx, l.ID, "bob")
		require.ErrorIs(t, err, lease.ErrWrongHolder)
		_, err = m.Release(ctx, l.ID, "bob")
		require.ErrorIs(t, err, lease.ErrWrongHolder)
		_, err = m.Heartbeat(ctx, l.ID, "")
		require.NoError(t, err, "a heartbeat that names no holder is not checked")
		time.Sleep(time.Minute)
		require.NoError(t, k.Err(), "a refused Release stopped the KeepAlive")
		u, err := usage(m)
		require.NoError(t, err)
		assert.Equal(t, 2, u.Units)

		time.Sleep(10 * time.Second)
		hb, err := m.Heartbeat(ctx, l.ID, "alice")
		require.NoError(t, err)
		assert.Equal(t, time.Now(), hb.Lease.HeartbeatAt)
		assert.Equal(t, 45*time.Second, hb.Remaining)
		assert.Equal(t, hb.Lease.Deadline(), hb.Deadline)
		assert.Equal(t, time.Now().Add(45*time.Second), hb.LocalDeadline)

		got, err := m.Release(ctx, l.ID, "alice")
		require.NoError(t, err)
		assert.Equal(t, l.ID, got.ID)
		<-k.Done()
		require.NoError(t, k.Err(), "released by its holder")
		st := m.Stats()
		assert.Equal(t, uint64(1), st.HeartbeatsFailed, "the wrong holder's heartbeat")
		assert.Zero(t, st.StoreErrors)
	})
}

// TestHeartbeatLocalDeadline: with a store on another clock, the local
// deadline counts from when the Manager sent the heartbeat.
func TestHeartbeatLocalDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := lease.NewMemoryStore(clock.New()) // another clock value, same time source
		m := newManager(t, 35, lease.Options{Store: &slowStore{Store: s, delay: 3 * time.Second}, SweepInterval: -1})
		l, err := m.Grant(ctx, lease.Request{Holder: "alice", Cost: 2})
		require.NoError(t, err)
		sent := time.Now()
		hb, err := m.Heartbeat(ctx, l.ID, "")
		require.NoError(t, err)
		assert.Equal(t, sent.Add(3*time.Second), hb.Lease.HeartbeatAt, "the store stamps on arrival")
		assert.Equal(t, sent.Add(45*time.Second), hb.LocalDeadline)
		assert.True(t, hb.LocalDeadline.Before(hb.Deadline))
	})
}

// slowStore delays every Heartbeat by delay before it reaches the store.
type slowStore struct {
	lease.Store
	delay time.Duration
}

func (s *slowStore) Heartbeat(ctx context.Context, id, holder string) (lease.Lease, error) {
	time.Sleep(s.delay)
	return s.Store.Heartbeat(ctx, id, holder)
}
