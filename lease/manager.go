package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/event"
)

// Request asks a Manager for a lease. Every store keeps Holder and
// Resource byte for byte and takes any valid UTF-8 without NUL up to 255
// bytes; lease/sqllease refuses a NUL byte, invalid UTF-8 and, on
// MySQL/MariaDB, more than 255 bytes, with an error matching [ErrInvalid].
type Request struct {
	Holder     string        // who asks (a user id); required
	Resource   string        // what the lease is for
	Cost       int           // the preferred cost in budget units, 1..budget
	Fallback   []int         // cheaper costs to try in order; Lease.Cost says which was taken
	TTL, Grace time.Duration // override the Manager's defaults when > 0
}

// Manager grants, heartbeats and releases leases over a [Store], sweeps
// expired ones, and reports events and stats. Several Managers, in one
// process or many, may share one Store.
type Manager struct {
	store  Store
	budget int
	opts   Options
	clock  clock.Clock
	// storeClock: the store's times are readings of the Manager's own
	// clock, taken after each call began, so a lease's CreatedAt and
	// HeartbeatAt serve as the moment the call was sent.
	storeClock bool
	log        *slog.Logger

	events *event.Queue[Event] // nil without OnEvent

	mu         sync.Mutex
	closed     bool
	keepAlives map[*KeepAlive]struct{}
	nKeep      atomic.Int32  // len(keepAlives), read without mu
	closing    chan struct{} // closed by Close
	wg         sync.WaitGroup
	stopped    chan struct{}      // closed once wg is done, after Close
	sweepDone  chan struct{}      // closed when the sweep loop returns; nil without the loop
	ctx        context.Context    // the Manager's own calls: the sweep loop, KeepAlive heartbeats
	cancel     context.CancelFunc // cancels ctx, in Close

	// evMu orders emit with the event queue's Close: an event emitted once
	// evClosed is set is counted as dropped instead of being sent to a
	// closed queue.
	evMu     sync.RWMutex
	evClosed bool

	stats counters
}

// New returns a Manager with a budget of budget units. It starts the sweep
// loop and, with [Options.OnEvent], the event goroutine; Close stops them.
// A budget ≤ 0 or a bad option returns an error matching [ErrInvalid].
func New(budget int, opts Options) (*Manager, error) {
	o, err := opts.resolve(budget)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		store: o.Store, budget: budget, opts: o, clock: o.Clock, log: o.Logger,
		keepAlives: make(map[*KeepAlive]struct{}),
		closing:    make(chan struct{}),
		stopped:    make(chan struct{}),
	}
	if c, ok := o.Store.(clocked); ok {
		m.storeClock = sameClock(c.clock(), o.Clock)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.ctx, m.cancel = ctx, cancel
	m.events = event.New(o.OnEvent, o.EventQueue, o.Logger, "lease")
	if o.SweepInterval > 0 {
		// The ticker starts now, not when the goroutine first runs, so the
		// sweep schedule counts from New (which a mock clock relies on).
		t := m.clock.Ticker(o.SweepInterval)
		m.sweepDone = make(chan struct{})
		m.wg.Go(func() {
			defer close(m.sweepDone)
			m.sweepLoop(ctx, t)
		})
	}
	return m, nil
}

// clocked is a Store in this process that reads its time from a clock
// (NewMemoryStore).
type clocked interface{ clock() clock.Clock }

// sameClock reports whether a and b read the same time source: the same
// clock, or both the real one.
func sameClock(a, b clock.Clock) bool {
	return a == b || reflect.TypeOf(a) == realClock && reflect.TypeOf(b) == realClock
}

// sendTime reads the Manager's clock for the moment a call is sent, unless
// the store's answer will serve (storeClock).
func (m *Manager) sendTime() time.Time {
	if m.storeClock {
		return time.Time{}
	}
	return m.clock.Now()
}

func (m *Manager) isClosed() bool {
	select {
	case <-m.closing:
		return true
	default:
		return false
	}
}

// Grant asks the store for a lease. The store decides in one atomic step,
// in this order: the Gate ([ErrOverloaded]), one live lease per holder
// ([ErrHolderHasLease]), the budget ([ErrOverCapacity]); a refusal is a
// [*RejectedError]. Bad input (an empty holder, a cost ≤ 0 or above the
// budget, a negative TTL or Grace) returns an error matching [ErrInvalid].
func (m *Manager) Grant(ctx context.Context, r Request) (Lease, error) {
	if m.isClosed() {
		return Lease{}, ErrClosed
	}
	if r.TTL < 0 {
		m.stats.invalid.Add(1)
		return Lease{}, errs.Invalid(ErrInvalid, "lease: Request.TTL (%v) must not be negative", r.TTL)
	}
	if r.Grace < 0 {
		m.stats.invalid.Add(1)
		return Lease{}, errs.Invalid(ErrInvalid, "lease: Request.Grace (%v) must not be negative", r.Grace)
	}
	a := GrantArgs{
		ID: newID(), Holder: r.Holder, Resource: r.Resource,
		TTL: r.TTL, Grace: r.Grace, Budget: m.budget,
		OnePerHolder: !m.opts.AllowMultiplePerHolder,
	}
	if a.TTL == 0 {
		a.TTL = m.opts.TTL
	}
	if a.Grace == 0 {
		a.Grace = m.opts.Grace
	}
	cs := costSlices.Get().(*[]int)
	a.Costs = append(append((*cs)[:0], r.Cost), r.Fallback...)
	var err error
	if m.opts.Gate != nil {
		// The Gate is asked only about a request the store would decide.
		if err = a.Validate(); err == nil {
			a.Overloaded = m.opts.Gate.Overloaded()
		}
	}
	var l Lease
	if err == nil {
		sent := m.sendTime()
		if l, err = m.store.Grant(ctx, a); err == nil {
			l.sent = sent
			if m.storeClock {
				l.sent = l.CreatedAt
			}
		}
	}
	*cs = a.Costs
	a.Costs = nil
	costSlices.Put(cs)
	if err != nil {
		var re *RejectedError
		switch {
		case errors.As(err, &re):
			switch re.Err {
			case ErrRecovering:
				m.stats.rejRecovering.Add(1)
			case ErrOverloaded:
				m.stats.rejOverloaded.Add(1)
			case ErrHolderHasLease:
				m.stats.rejHolder.Add(1)
			case ErrOverCapacity:
				m.stats.rejCapacity.Add(1)
			}
			if m.events.Enabled() {
				m.emit(rejected(r, a, re))
			}
		case errors.Is(err, ErrInvalid):
			m.stats.invalid.Add(1)
		default:
			m.countFailure(err, nil)
		}
		return Lease{}, err
	}
	m.stats.granted.Add(1)
	if m.events.Enabled() {
		m.emit(Event{Kind: EventGranted, Lease: l})
	}
	return l, nil
}

// costSlices recycles the GrantArgs.Costs of Grant, which a Store does not
// keep, so that a grant allocates no slice for them.
var costSlices = sync.Pool{New: func() any { return new([]int) }}

// rejected is the event of the refusal re of request r, granted as a:
// OnEvent runs later, so it gets copies of what the caller may change.
func rejected(r Request, a GrantArgs, re *RejectedError) Event {
	rej := *re
	r.Fallback = slices.Clone(r.Fallback)
	r.TTL, r.Grace = a.TTL, a.Grace
	return Event{
		Kind:      EventRejected,
		Lease:     Lease{Holder: r.Holder, Resource: r.Resource, Cost: r.Cost, Grace: r.Grace},
		Request:   r,
		Rejection: &rej,
	}
}

// HeartbeatResult is what a successful heartbeat returns. LocalDeadline, on the Manager's clock, is when the heartbeat was sent plus
// Remaining: never later than the store's deadline (clocks running at the
// same rate), so stop trusting the lease then.
type HeartbeatResult struct {
	Lease         Lease         // as the store holds it after the heartbeat
	Remaining     time.Duration // Lease.Deadline() − Lease.HeartbeatAt
	Deadline      time.Time     // Lease.Deadline(), store clock
	LocalDeadline time.Time
}

// Heartbeat restarts the grace of lease id from now (never past ExpiresAt)
// and returns its new deadlines.
// An expired or unknown lease returns [ErrExpired] or [ErrNotFound]. With
// a holder other than "", a lease of another holder returns
// [ErrWrongHolder], checked in the same atomic step.
func (m *Manager) Heartbeat(ctx context.Context, id, holder string) (HeartbeatResult, error) {
	if m.isClosed() {
		return HeartbeatResult{}, ErrClosed
	}
	var (
		r   HeartbeatResult
		err error
	)
	sent := m.sendTime()
	if r.Lease, err = m.store.Heartbeat(ctx, id, holder); err != nil {
		m.countFailure(err, &m.stats.heartbeatsFailed)
		return HeartbeatResult{}, err
	}
	if m.storeClock {
		sent = r.Lease.HeartbeatAt
	}
	m.stats.heartbeats.Add(1)
	if m.events.Enabled() {
		m.emit(Event{Kind: EventHeartbeat, Lease: r.Lease})
	}
	// remaining(Lease, HeartbeatAt), computing the deadline once.
	r.Deadline = r.Lease.Deadline()
	r.Remaining = max(r.Deadline.Sub(r.Lease.HeartbeatAt), 0)
	r.LocalDeadline = sent.Add(r.Remaining)
	return r, nil
}

// Release ends lease id at once, returning its units to the budget. It
// first stops this Manager's KeepAlives of the lease (their Err is nil),
// whatever the outcome. An expired lease returns [ErrExpired] and is left
// for the sweep to report. With a holder other than "", a lease of another
// holder returns [ErrWrongHolder], checked in the same atomic step, and
// keeps its KeepAlives.
func (m *Manager) Release(ctx context.Context, id, holder string) (Lease, error) {
	if m.isClosed() {
		return Lease{}, ErrClosed
	}
	// Stop KeepAlives first, so none reports as lost the lease its owner
	// is releasing.
	m.releasedKeepAlives(id, holder)
	l, err := m.store.Release(ctx, id, holder)
	if err != nil {
		m.countFailure(err, nil)
		return Lease{}, err
	}
	m.stats.released.Add(1)
	if m.events.Enabled() {
		m.emit(Event{Kind: EventReleased, Lease: l})
	}
	return l, nil
}

// Get returns the live lease id, or [ErrExpired] or [ErrNotFound].
func (m *Manager) Get(ctx context.Context, id string) (Lease, error) {
	l, err := m.store.Get(ctx, id)
	if err != nil {
		m.countFailure(err, nil)
	}
	return l, err
}

// Usage returns the units taken by the live leases and their number, and
// refreshes the Stats gauges.
func (m *Manager) Usage(ctx context.Context) (units, leases int, err error) {
	units, leases, err = m.store.Usage(ctx)
	if err != nil {
		m.countFailure(err, nil)
		return 0, 0, err
	}
	m.stats.unitsInUse.Store(int64(units))
	m.stats.activeLeases.Store(int64(leases))
	return units, leases, nil
}

// Close stops the sweep loop, this Manager's KeepAlives (their Err becomes
// [ErrClosed]) and, once the queued events are delivered, the event
// goroutine, cancelling their store calls. It waits for them (and an
// OnEvent call in progress) until ctx ends, then returns an error wrapping
// context.Cause(ctx) that names what still runs. A sweep it cuts short may
// have removed leases it never reports; events of calls in flight are
// counted in Stats.EventsDropped. Leases stay in the store. After Close, Grant, Heartbeat, Release, Sweep
// and KeepAlive return ErrClosed; Get, Usage and Stats keep working. Close
// is idempotent: a later call waits the same way, and returns nil once
// all has stopped.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		close(m.closing)
		m.cancel()
		go func() {
			m.wg.Wait()
			close(m.stopped)
		}()
	}
	m.mu.Unlock()
	select {
	case <-m.stopped:
	case <-ctx.Done():
		return fmt.Errorf("lease: close: %s still running: %w", m.running(), context.Cause(ctx))
	}
	// Nothing of the Manager's own emits any more; calls still in flight
	// count their events as dropped from here on.
	m.evMu.Lock()
	m.evClosed = true
	m.evMu.Unlock()
	return m.events.Close(ctx)
}

// running names the goroutines Close is still waiting for.
func (m *Manager) running() string {
	var parts []string
	if m.sweepDone != nil {
		select {
		case <-m.sweepDone:
		default:
			parts = append(parts, "the sweep loop")
		}
	}
	if n := m.nKeep.Load(); n > 0 {
		parts = append(parts, fmt.Sprintf("%d KeepAlives", n))
	}
	if len(parts) == 0 {
		return "a KeepAlive"
	}
	return strings.Join(parts, " and ")
}

// countFailure counts a failed store call: a rule outcome (expired,
// unknown, another holder's) in rule, if given; the caller's own
// cancellation or deadline not at all; anything else as a store error.
func (m *Manager) countFailure(err error, rule interface{ Add(uint64) uint64 }) {
	switch {
	case errors.Is(err, ErrExpired), errors.Is(err, ErrNotFound), errors.Is(err, ErrWrongHolder):
		if rule != nil {
			rule.Add(1)
		}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
	default:
		m.stats.storeErrors.Add(1)
	}
}

// emit queues e for OnEvent without ever blocking. Callers check
// m.events.Enabled() first, so that without OnEvent no Event (a copy of the
// Lease) is even built on the hot path.
func (m *Manager) emit(e Event) {
	e.Time = m.clock.Now()
	m.evMu.RLock()
	defer m.evMu.RUnlock()
	if m.evClosed {
		// A call that began before Close: the queue is closed.
		m.stats.eventsLate.Add(1)
		return
	}
	m.events.Send(e)
}
