package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// Request asks a Manager for a lease.
type Request struct {
	// Holder is who asks (a user or session id). Required.
	Holder string
	// Resource is what the lease is for; kept, not interpreted.
	Resource string
	// Cost is the preferred cost in budget units, 1..budget.
	Cost int
	// Fallback lists cheaper costs to take, in order, when Cost does not
	// fit (seed 003: Cost 2 for the main stream, Fallback [1] for the sub
	// stream). The granted Lease.Cost says which one was taken.
	Fallback []int
	// TTL and Grace override the Manager's defaults when > 0.
	TTL, Grace time.Duration
}

// Usage is the budget as seen at one moment.
type Usage struct {
	Units     int // units taken by live leases
	Leases    int // number of live leases
	Budget    int // the Manager's budget
	Available int // Budget − Units, at least 0
}

// Manager grants, heartbeats and releases leases over a Store, runs the
// sweep loop, and reports events and stats. Several Managers, in one process
// or many, may share one Store: every decision is the store's.
type Manager struct {
	store Store
	mem   *MemoryStore // store, when it is one: Grant calls it directly
	// memClock: mem reads the Manager's time source, so a lease's
	// CreatedAt is a Manager clock reading taken no earlier than the call.
	memClock bool
	budget   int
	opts     Options
	clock    clock.Clock
	log      *slog.Logger

	events chan Event // nil without OnEvent

	mu         sync.Mutex
	closed     bool
	keepAlives map[*KeepAlive]struct{}
	nKeep      atomic.Int32  // len(keepAlives), read without mu
	closing    chan struct{} // closed by Close
	wg         sync.WaitGroup
	ctx        context.Context    // the Manager's own calls: the sweep loop, KeepAlive heartbeats
	cancel     context.CancelFunc // cancels ctx, in Close

	// evMu orders emit with Close: an event emitted once evClosed is set
	// is counted as dropped instead of queued after the final drain.
	evMu     sync.RWMutex
	evClosed bool

	stats counters
}

// New returns a Manager that grants leases from a budget of budget units
// (seed 003: 35). It starts the sweep loop and, with Options.OnEvent, the
// event goroutine; Close stops them.
func New(budget int, opts Options) (*Manager, error) {
	o, err := opts.resolve(budget)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		store: o.Store, budget: budget, opts: o, clock: o.Clock, log: o.Logger,
		keepAlives: make(map[*KeepAlive]struct{}),
		closing:    make(chan struct{}),
	}
	if m.mem, _ = o.Store.(*MemoryStore); m.mem != nil {
		m.memClock = sameClock(m.mem.clock, o.Clock)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.ctx, m.cancel = ctx, cancel
	if o.OnEvent != nil {
		m.events = make(chan Event, o.EventQueue)
		m.wg.Go(m.deliver)
	}
	if !o.ManualSweep {
		// The ticker starts now, not when the goroutine first runs, so the
		// sweep schedule counts from New (which a mock clock relies on).
		t := m.clock.Ticker(o.SweepInterval)
		m.wg.Go(func() { m.sweepLoop(ctx, t) })
	}
	return m, nil
}

// Budget returns the Manager's budget in units.
func (m *Manager) Budget() int { return m.budget }

// Store returns the Manager's store.
func (m *Manager) Store() Store { return m.store }

func (m *Manager) isClosed() bool {
	select {
	case <-m.closing:
		return true
	default:
		return false
	}
}

// Grant asks the store for a lease. The decision is one atomic step in the
// store, in this order: the Gate (ReasonOverloaded), one live lease per
// holder (ReasonHolderHasLease), the budget (ReasonOverCapacity); a refusal is a
// *RejectedError. Bad input (empty holder, a cost ≤ 0 or above the budget,
// negative TTL or Grace) returns an error wrapping ErrInvalid and stores
// nothing.
func (m *Manager) Grant(ctx context.Context, r Request) (Lease, error) {
	if m.isClosed() {
		return Lease{}, ErrClosed
	}
	if r.TTL < 0 {
		m.stats.invalid.Add(1)
		return Lease{}, fmt.Errorf("%w: TTL (%v) < 0", ErrInvalid, r.TTL)
	}
	if r.Grace < 0 {
		m.stats.invalid.Add(1)
		return Lease{}, fmt.Errorf("%w: Grace (%v) < 0", ErrInvalid, r.Grace)
	}
	a := GrantArgs{
		ID: NewID(), Holder: r.Holder, Resource: r.Resource,
		TTL: r.TTL, Grace: r.Grace, Budget: m.budget,
		OnePerHolder: !m.opts.AllowMultiplePerHolder,
	}
	if a.TTL == 0 {
		a.TTL = m.opts.TTL
	}
	if a.Grace == 0 {
		a.Grace = m.opts.Grace
	}
	var l Lease
	var err error
	if m.mem != nil {
		err = m.grantMemory(ctx, a, r.Cost, r.Fallback, &l)
	} else {
		a.Costs = make([]int, 0, 1+len(r.Fallback))
		a.Costs = append(append(a.Costs, r.Cost), r.Fallback...)
		if err = m.admit(&a); err == nil {
			sent := m.clock.Now()
			if l, err = m.store.Grant(ctx, a); err == nil {
				l.sent = sent
			}
		}
	}
	if err != nil {
		var re *RejectedError
		switch {
		case errors.As(err, &re):
			switch re.Reason {
			case ReasonOverloaded:
				m.stats.rejOverloaded.Add(1)
			case ReasonHolderHasLease:
				m.stats.rejHolder.Add(1)
			case ReasonOverCapacity:
				m.stats.rejCapacity.Add(1)
			}
			if m.events != nil {
				m.emit(Event{Kind: EventRejected, Lease: Lease{Holder: r.Holder, Resource: r.Resource}, Reason: re.Reason})
			}
		case errors.Is(err, ErrInvalid):
			m.stats.invalid.Add(1)
		default:
			m.countFailure(err, nil)
		}
		return Lease{}, err
	}
	m.stats.granted.Add(1)
	if m.events != nil {
		m.emit(Event{Kind: EventGranted, Lease: l})
	}
	return l, nil
}

// admit validates a and, if it is valid, asks the Gate. Grant counts the
// error in Stats.Invalid like a store's ErrInvalid.
func (m *Manager) admit(a *GrantArgs) error {
	if err := a.Validate(); err != nil {
		return err
	}
	if m.opts.Gate != nil {
		a.Overloaded = m.opts.Gate.Overloaded()
	}
	return nil
}

// grantMemory is Grant on the Manager's *MemoryStore, called directly
// rather than through the Store interface, so that a is validated once
// (here, not again in MemoryStore.Grant), the costs stay on the stack
// (they are kept out of a, which the store keeps parts of) and the lease is
// written once, into *l.
func (m *Manager) grantMemory(ctx context.Context, a GrantArgs, cost int, fallback []int, l *Lease) error {
	var buf [4]int
	costs := append(append(buf[:0], cost), fallback...)
	v := a
	v.Costs = costs
	if err := m.admit(&v); err != nil {
		return err
	}
	a.Overloaded = v.Overloaded
	if m.memClock {
		// The store reads the same clock after this point, and its
		// CreatedAt is where the lease's deadlines count from: it serves
		// as the send time without a clock read of our own.
		if err := m.mem.grant(ctx, a, costs, l); err != nil {
			return err
		}
		l.sent = l.CreatedAt
		return nil
	}
	sent := m.clock.Now()
	if err := m.mem.grant(ctx, a, costs, l); err != nil {
		return err
	}
	l.sent = sent
	return nil
}

// realClock is the type of clock.New()'s clock: every value of it reads
// the same time source.
var realClock = reflect.TypeOf(clock.New())

// sameClock reports whether a and b read the same time source: the same
// clock, or both the real one.
func sameClock(a, b clock.Clock) bool {
	return a == b || reflect.TypeOf(a) == realClock && reflect.TypeOf(b) == realClock
}

// Heartbeat records a heartbeat for lease id and returns how long the lease
// now stays live without another one: min(Grace, time left to ExpiresAt),
// by the store's clock. A lease that is expired (ErrExpired) or unknown
// (ErrNotFound) stays so.
func (m *Manager) Heartbeat(ctx context.Context, id string) (time.Duration, error) {
	if m.isClosed() {
		return 0, ErrClosed
	}
	var l Lease
	var err error
	if m.mem != nil {
		err = m.mem.heartbeat(ctx, id, &l)
	} else {
		l, err = m.store.Heartbeat(ctx, id)
	}
	if err != nil {
		m.countFailure(err, &m.stats.heartbeatsFailed)
		return 0, err
	}
	m.stats.heartbeats.Add(1)
	if m.events != nil {
		m.emit(Event{Kind: EventHeartbeat, Lease: l})
	}
	return l.Remaining(l.HeartbeatAt), nil
}

// Release ends lease id at once and returns its units to the budget. It
// first stops the lease's KeepAlives of this Manager (with a nil Err),
// whatever the outcome. An expired lease returns ErrExpired and is left for
// the sweep to report.
func (m *Manager) Release(ctx context.Context, id string) (Lease, error) {
	if m.isClosed() {
		return Lease{}, ErrClosed
	}
	// Stop KeepAlives first, so none reports as lost the lease its owner
	// is releasing.
	m.releasedKeepAlives(id)
	var l Lease
	var err error
	if m.mem != nil {
		err = m.mem.release(ctx, id, &l)
	} else {
		l, err = m.store.Release(ctx, id)
	}
	if err != nil {
		m.countFailure(err, nil)
		return Lease{}, err
	}
	m.stats.released.Add(1)
	if m.events != nil {
		m.emit(Event{Kind: EventReleased, Lease: l})
	}
	return l, nil
}

// Get returns the live lease id, or ErrExpired or ErrNotFound.
func (m *Manager) Get(ctx context.Context, id string) (Lease, error) {
	if m.isClosed() {
		return Lease{}, ErrClosed
	}
	l, err := m.store.Get(ctx, id)
	if err != nil {
		m.countFailure(err, nil)
	}
	return l, err
}

// List returns the live leases, oldest grant first.
func (m *Manager) List(ctx context.Context) ([]Lease, error) {
	if m.isClosed() {
		return nil, ErrClosed
	}
	ls, err := m.store.List(ctx)
	if err != nil {
		m.countFailure(err, nil)
	}
	return ls, err
}

// Usage returns the units and number of live leases and the budget left.
func (m *Manager) Usage(ctx context.Context) (Usage, error) {
	if m.isClosed() {
		return Usage{}, ErrClosed
	}
	units, n, err := m.store.Usage(ctx)
	if err != nil {
		m.countFailure(err, nil)
		return Usage{}, err
	}
	m.stats.unitsInUse.Store(int64(units))
	m.stats.activeLeases.Store(int64(n))
	return Usage{Units: units, Leases: n, Budget: m.budget, Available: max(m.budget-units, 0)}, nil
}

// Sweep reclaims the records of expired leases, fires one EventExpired per
// lease, refreshes the Stats gauges and returns how many it reclaimed. The
// background loop calls it every SweepInterval. Expired leases are absent for
// every read and for the budget whether or not Sweep has run.
func (m *Manager) Sweep(ctx context.Context) (int, error) {
	if m.isClosed() {
		return 0, ErrClosed
	}
	n := 0
	for {
		ls, err := m.store.Sweep(ctx, m.opts.SweepBatch)
		n += len(ls)
		m.stats.expired.Add(uint64(len(ls)))
		for _, l := range ls {
			if l.Lapsed() {
				m.stats.expiredLapsed.Add(1)
			}
			if m.events != nil {
				m.emit(Event{Kind: EventExpired, Lease: l})
			}
		}
		if err != nil {
			m.countFailure(err, nil)
			return n, err
		}
		if len(ls) < m.opts.SweepBatch {
			break
		}
	}
	m.stats.sweeps.Add(1)
	if _, err := m.Usage(ctx); err != nil {
		return n, err
	}
	return n, nil
}

// Close stops the sweep loop, every KeepAlive of this Manager (their Err
// becomes ErrClosed) and, after delivering the events already queued, the
// event goroutine, and waits for them. Leases stay in the store: they belong
// to their holders and end by release or expiry. Close cancels the store
// calls of the sweep loop and the KeepAlives, so a hanging store does not
// hold it up (a Sweep it cuts short may have removed leases on the server
// that it then never reports), and waits for an OnEvent call in progress to
// return. Events of calls still in flight when Close runs are counted in
// Stats.EventsDropped. It is idempotent; after it every method returns
// ErrClosed.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.wg.Wait()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.evMu.Lock()
	m.evClosed = true
	m.evMu.Unlock()
	close(m.closing)
	m.cancel()
	m.wg.Wait()
	return nil
}

func (m *Manager) sweepLoop(ctx context.Context, t *clock.Ticker) {
	defer t.Stop()
	for {
		select {
		case <-m.closing:
			return
		case <-t.C:
			n, err := m.Sweep(ctx)
			switch {
			case err != nil && !m.isClosed():
				if m.log != nil {
					m.log.Warn("lease: sweep", "err", err, "expired", n)
				}
			case n > 0 && m.log != nil:
				m.log.Debug("lease: sweep", "expired", n)
			}
		}
	}
}

// countFailure counts a failed store call: a rule outcome (expired,
// unknown) in rule, if given; the caller's own cancellation or deadline not
// at all; anything else as a store error.
func (m *Manager) countFailure(err error, rule interface{ Add(uint64) uint64 }) {
	switch {
	case errors.Is(err, ErrExpired), errors.Is(err, ErrNotFound):
		if rule != nil {
			rule.Add(1)
		}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
	default:
		m.stats.storeErrors.Add(1)
	}
}

// emit queues e for OnEvent without ever blocking. Callers check
// m.events != nil first, so that without OnEvent no Event (a copy of the
// Lease) is even built on the hot path.
func (m *Manager) emit(e Event) {
	e.Time = m.clock.Now()
	m.evMu.RLock()
	defer m.evMu.RUnlock()
	if m.evClosed {
		// A call that began before Close: the final drain may be over.
		m.stats.eventsDropped.Add(1)
		return
	}
	select {
	case m.events <- e:
	default:
		if m.stats.eventsDropped.Add(1) == 1 && m.log != nil {
			m.log.Warn("lease: event queue full, dropping events", "kind", e.Kind.String())
		}
	}
}

// deliver runs OnEvent for queued events until Close, then drains the queue.
func (m *Manager) deliver() {
	for {
		select {
		case e := <-m.events:
			m.opts.OnEvent(e)
		case <-m.closing:
			for {
				select {
				case e := <-m.events:
					m.opts.OnEvent(e)
				default:
					return
				}
			}
		}
	}
}
