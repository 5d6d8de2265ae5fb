package pool

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
)

// Wait timing: every wait is timed up to exactWaits, then every
// sampleWaits-th.
const (
	exactWaits  = 1024
	sampleWaits = 8
)

// Errors returned by Pool methods.
var (
	// ErrClosed is returned by Acquire and TryAcquire once Close has begun.
	ErrClosed = errors.New("pool: closed")
	// ErrUnavailable is returned by TryAcquire when no idle item is ready.
	ErrUnavailable = errors.New("pool: no idle item available")
	// ErrCreate wraps every error a create produced (Provisioner.Create
	// failing, panicking or running past CreateTimeout) as seen by Acquire.
	ErrCreate = errors.New("pool: create")
	// ErrCreateTimeout is wrapped by the error of a Create call that ran
	// past Options.CreateTimeout. It does not match
	// context.DeadlineExceeded: the caller's own deadline did not pass.
	ErrCreateTimeout = errors.New("pool: create ran past CreateTimeout")
)

// createError is a create's error as Acquire returns it: it matches
// ErrCreate and the cause.
type createError struct{ err error }

func (e *createError) Error() string {
	return "pool: create: " + strings.TrimPrefix(e.err.Error(), "pool: ")
}

func (e *createError) Unwrap() []error { return []error{ErrCreate, e.err} }

// createTimeoutError is a Create call that ran past CreateTimeout.
type createTimeoutError struct{ d time.Duration }

func (e *createTimeoutError) Error() string {
	return fmt.Sprintf("ran past CreateTimeout (%v)", e.d)
}

func (e *createTimeoutError) Is(target error) bool { return target == ErrCreateTimeout }

// PanicError is a panic recovered from a Provisioner call.
type PanicError struct {
	Op    string // "create", "destroy" or "check"
	Value any    // the value passed to panic
}

// Error describes the panic.
func (e *PanicError) Error() string { return fmt.Sprintf("pool: %s panicked: %v", e.Op, e.Value) }

// Pool is a pool of items of type T made by a Provisioner. All methods are
// safe for concurrent use.
type Pool[T any] struct {
	prov    Provisioner[T]
	checker Checker[T]
	lister  Lister[T]
	ider    Identifier[T]
	codec   Codec[T]
	inv     Inventory
	opts    Options
	clock   clock.Clock
	start   time.Time

	// stampUse is set when releases must record their time (IdleTimeout,
	// or a shared inventory), checkExpiry when acquires must read the clock
	// (MaxLifetime, WarmTTL): with neither, the hot path never reads it.
	stampUse, checkExpiry bool
	checkOnAcquire        bool // Options.CheckOnAcquire
	realClock             bool // Options.Clock was nil

	ctx    context.Context // the pool's context: creates run under it
	cancel context.CancelFunc

	// idle is the local idle set, a channel so that the hot path takes no
	// mutex and waiters park in the runtime's FIFO queue of receivers, which
	// hands each released item directly to the longest waiter. Its capacity
	// is MaxIdle (MaxSize with a shared Inventory, where it only holds
	// items on their way to a local waiter). It may also carry error
	// tokens (Handle.err) for waiters.
	idle chan *Handle[T]
	// nwait counts the Acquire calls waiting on idle that no item or error
	// in flight is meant for yet: the demand for creates. An item the pool
	// sends to a waiter (a create's result, an error) is "dispatched": nwait
	// drops when it is sent, not when the waiter wakes, so no second create
	// starts for that waiter meanwhile (Handle.dispatched).
	nwait   atomic.Int64
	waiting atomic.Int64 // Acquire calls waiting, for Stats
	closed  atomic.Bool  // mirrors closedLocked for the hot path
	// idleLow is the fewest idle items seen since the last Prune: that many
	// were not needed, whatever their idle times (FIFO rotation keeps every
	// idle time short).
	idleLow atomic.Int64

	mu             sync.Mutex
	items          []*Handle[T] // every item this instance holds, in any state
	checking       int          // idle items taken out by CheckHealth
	creating       int
	late           int            // Create calls past CreateTimeout still running
	calls          map[string]int // Provisioner calls running, by op
	destroying     int
	closedLocked   bool
	warmPaused     bool // warm creates back off after a failure
	cleanupDue     bool // warm creates wait for the start-up cleanup
	backoff        time.Duration
	warmTimer      *clock.Timer
	drained        chan struct{} // closed when no item is in use after Close began
	closeErrs      []error
	firstSeen      map[string]time.Time // orphan candidates without a Created time
	gone           map[string]int       // IDs being destroyed: still known to Reconcile
	lowSince       time.Time            // start of the idleLow window
	createSeq      uint64
	inflight       map[uint64]time.Time // Create calls running, by start time: their items are never orphans
	creates        uint64
	createFailures uint64
	destroyErrors  uint64
	orphans        uint64
	destroyed      [len(reasons)]uint64

	canceledWaits atomic.Int64
	waitCount     atomic.Int64
	waitNanos     atomic.Int64
	eventsDropped atomic.Uint64
	delivering    atomic.Bool // OnEvent is running

	wg         sync.WaitGroup // creates, destroys, provisioner calls, helpers
	events     chan Event
	dispatchWG sync.WaitGroup
	stopEvents chan struct{}

	janitorStop chan struct{}
	janitorDone chan struct{}
	cleanupDone chan struct{} // closed when the start-up cleanup is over
	cleanupErr  error         // its result, set before cleanupDone closes
	closeOnce   sync.Once
	closeDone   chan struct{}
	closeErr    error

	replenishing   atomic.Bool // shared mode: one replenish at a time
	replenishKicks atomic.Int32
	tokenSeq       atomic.Int64
}

// New returns a pool of items made by prov, validated against opts. It starts
// the janitor (unless Options.JanitorInterval is negative) and the warm
// creates for Options.MinIdle; Close stops them.
func New[T any](prov Provisioner[T], opts Options) (*Pool[T], error) {
	return newPool(prov, opts, true)
}

func newPool[T any](prov Provisioner[T], opts Options, janitor bool) (*Pool[T], error) {
	if prov == nil {
		return nil, invalid("pool: Provisioner is nil")
	}
	o, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	p := &Pool[T]{prov: prov, opts: o, clock: o.Clock, inv: o.Inventory, closeDone: make(chan struct{}), realClock: opts.Clock == nil}
	p.checker, _ = prov.(Checker[T])
	p.lister, _ = prov.(Lister[T])
	p.ider, _ = prov.(Identifier[T])
	if c, ok := prov.(Codec[T]); ok {
		p.codec = c
	} else {
		p.codec = JSONCodec[T]{}
	}
	if p.inv != nil && p.ider == nil {
		return nil, invalid("pool: Inventory needs a Provisioner that implements Identifier (ID(T) string)")
	}
	if o.CleanupOnStart && p.lister == nil {
		return nil, invalid("pool: CleanupOnStart needs a Provisioner that implements Lister")
	}
	if p.opts.Instance == "" {
		var b [8]byte
		_, _ = crand.Read(b[:])
		p.opts.Instance = hex.EncodeToString(b[:])
	}
	if o.CheckOnAcquire && p.checker == nil {
		return nil, invalid("pool: CheckOnAcquire needs a Provisioner that implements Checker")
	}
	p.checkOnAcquire = o.CheckOnAcquire
	p.stampUse = o.IdleTimeout > 0 || p.inv != nil
	p.checkExpiry = o.MaxLifetime > 0 || o.WarmTTL > 0
	p.start = p.clock.Now()
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if p.inv != nil {
		p.idle = make(chan *Handle[T], o.MaxSize)
	} else {
		p.idle = make(chan *Handle[T], o.MaxIdle)
	}
	p.lowSince = p.start
	p.idleLow.Store(math.MaxInt64)
	if o.OnEvent != nil {
		p.events = make(chan Event, o.EventQueue)
		p.stopEvents = make(chan struct{})
		p.dispatchWG.Add(1)
		go p.dispatch(p.stopEvents)
	}
	p.cleanupDue = o.CleanupOnStart
	p.cleanupDone = make(chan struct{})
	if !o.CleanupOnStart {
		close(p.cleanupDone)
	} else {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer close(p.cleanupDone)
			_, err := p.Cleanup(p.ctx)
			if err != nil {
				p.warn("start-up cleanup", err)
			}
			p.cleanupErr = err
			p.mu.Lock()
			p.cleanupDue = false
			p.fillLocked()
			p.mu.Unlock()
			if p.inv != nil {
				p.kickReplenish()
			}
		}()
	}
	if janitor && o.JanitorInterval > 0 {
		p.janitorStop = make(chan struct{})
		p.janitorDone = make(chan struct{})
		go p.janitorLoop()
	}
	p.mu.Lock()
	p.fillLocked()
	p.mu.Unlock()
	if p.inv != nil && !o.CleanupOnStart {
		p.kickReplenish()
	}
	return p, nil
}

// Instance returns this pool instance's name in a shared Inventory.
func (p *Pool[T]) Instance() string { return p.opts.Instance }

func (p *Pool[T]) totalLocked() int { return len(p.items) + p.creating + p.late + p.destroying }

// Acquire returns an item, waiting while the pool is at MaxSize. Waiters are
// served first come, first served, by direct hand-off. If ctx ends first,
// Acquire returns an error wrapping context.Cause(ctx) and leaves no trace: a
// create it started goes on under the pool's context and its item goes to
// the next waiter or to the idle set. A failed create is returned to one
// waiter as an error wrapping ErrCreate.
func (p *Pool[T]) Acquire(ctx context.Context) (*Handle[T], error) {
	if ctx.Err() != nil {
		return nil, fmt.Errorf("pool: acquire: %w", context.Cause(ctx))
	}
	for {
		select {
		case h := <-p.idle:
			if h.dispatched {
				p.undispatch(h) // meant for a waiter; it still waits
			}
			if h, err, ok := p.take(ctx, h); ok {
				return h, err
			}
			continue
		default:
		}
		if h, err, ok := p.wait(ctx); ok {
			return h, err
		}
	}
}

// Do runs fn with an item: it acquires one, calls fn, and releases the item
// when fn returns nil. When fn fails (or panics) the item is destroyed with
// ReasonUnhealthy, and fn is called once more with another item, unless
// ctx has ended. Do returns nil, or the errors of Acquire and fn joined.
// Use it when a failure of fn may mean a dead item (a worker that crashed
// while idle) and fn may safely run twice.
func (p *Pool[T]) Do(ctx context.Context, fn func(T) error) error {
	var errs []error
	for attempt := 0; attempt < 2 && (attempt == 0 || ctx.Err() == nil); attempt++ {
		h, err := p.Acquire(ctx)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		if err = p.run(h, fn); err == nil {
			h.Release()
			return nil
		}
		h.Destroy(ReasonUnhealthy)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// run calls fn with h's item, destroying the item if fn panics.
func (p *Pool[T]) run(h *Handle[T], fn func(T) error) error {
	ok := false
	defer func() {
		if !ok {
			h.Destroy(ReasonUnhealthy)
		}
	}()
	err := fn(h.value)
	ok = true
	return err
}

// undispatch returns the demand of a dispatched item or error that will not
// reach a waiter: that waiter still waits.
func (p *Pool[T]) undispatch(h *Handle[T]) {
	h.dispatched = false
	p.nwait.Add(1)
}

// take turns h, received from p.idle, into the result of an acquire. ok is
// false when h was expired (and is being destroyed): try again.
func (p *Pool[T]) take(ctx context.Context, h *Handle[T]) (_ *Handle[T], _ error, ok bool) {
	if h.err != nil {
		return nil, h.err, true
	}
	fresh := h.fresh
	h.fresh = false
	if p.checkOnAcquire && !fresh && !p.closed.Load() {
		h.state.Store(stateChecking)
		if err := p.check(ctx, h.value); err != nil {
			if ctx.Err() != nil { // the caller gave up, not the item
				h.state.Store(stateIdle)
				p.settle(h)
				return nil, fmt.Errorf("pool: acquire: %w", context.Cause(ctx)), true
			}
			p.discard(h, ReasonUnhealthy)
			return nil, nil, false
		}
	}
	if p.closed.Load() {
		p.discard(h, ReasonShutdown)
		return nil, ErrClosed, true
	}
	if p.checkExpiry {
		if r := p.expired(h, p.clock.Now()); r != "" {
			p.discard(h, r)
			return nil, nil, false
		}
	}
	h.state.Store(stateInUse)
	n := len(p.idle)
	if p.opts.IdleTimeout > 0 && int64(n) < p.idleLow.Load() {
		p.idleLow.Store(int64(n))
	}
	if n < p.opts.MinIdle {
		p.mu.Lock()
		p.fillLocked()
		p.mu.Unlock()
	}
	return h, nil, true
}

// discard destroys h, an item not in use that is out of p.idle.
func (p *Pool[T]) discard(h *Handle[T], r Reason) {
	p.mu.Lock()
	p.destroyLocked(h, r)
	p.fillLocked()
	p.checkDrainedLocked()
	p.mu.Unlock()
}

// wait parks the caller until an item or an error token arrives on p.idle.
// ok is false when the item it got had expired: try again.
func (p *Pool[T]) wait(ctx context.Context) (_ *Handle[T], _ error, ok bool) {
	p.mu.Lock()
	if p.closedLocked {
		p.mu.Unlock()
		return nil, ErrClosed, true
	}
	p.waiting.Add(1)
	defer p.waiting.Add(-1)
	nw := p.nwait.Add(1)
	p.fillLocked()
	// Like sql.DBStats, count only waits for capacity, not for a create.
	full := int64(p.creating) < nw
	p.mu.Unlock()
	// Reading the clock costs as much as a whole hand-off on some machines,
	// so past the first exactWaits waits only every sampleWaits-th wait is
	// timed, and weighted.
	var start, weight int64
	if full {
		if n := p.waitCount.Add(1); n <= exactWaits {
			weight = 1
		} else if n%sampleWaits == 0 {
			weight = sampleWaits
		}
		if weight != 0 {
			start = p.monotonic()
		}
	}
	var h *Handle[T]
	if done := ctx.Done(); done == nil {
		h = <-p.idle // cannot be cancelled: a plain receive is cheapest
	} else {
		select {
		case h = <-p.idle:
		case <-done:
			p.nwait.Add(-1)
			p.canceledWaits.Add(1)
			return nil, fmt.Errorf("pool: acquire: %w", context.Cause(ctx)), true
		}
	}
	if h.dispatched {
		h.dispatched = false // counted when it was sent
	} else {
		p.nwait.Add(-1)
	}
	if weight != 0 {
		p.waitNanos.Add((p.monotonic() - start) * weight)
	}
	return p.take(ctx, h)
}

// monotonic returns a monotonic time in nanoseconds for wait statistics:
// the runtime's clock (cheaper than time.Now, which also reads the wall
// clock) unless Options.Clock was set.
func (p *Pool[T]) monotonic() int64 {
	if p.realClock {
		return nanotime()
	}
	return p.clock.Now().UnixNano()
}

// offerDispatch is offer, dispatching h when a waiter waits: the item is
// meant for it, and no create should start for it meanwhile.
func (p *Pool[T]) offerDispatch(h *Handle[T]) bool {
	for n := p.nwait.Load(); n > 0; n = p.nwait.Load() {
		if p.nwait.CompareAndSwap(n, n-1) {
			h.dispatched = true
			break
		}
	}
	if p.offer(h) {
		return true
	}
	if h.dispatched {
		p.undispatch(h)
	}
	return false
}

// offer puts h (state idle) into p.idle: to the longest waiter, else to the
// idle set. It reports false when the idle set is full.
func (p *Pool[T]) offer(h *Handle[T]) bool {
	select {
	case p.idle <- h:
	default:
		return false
	}
	if p.closed.Load() {
		// Close may have drained p.idle before h arrived.
		p.mu.Lock()
		p.drainClosedLocked()
		p.checkDrainedLocked()
		p.mu.Unlock()
	}
	return true
}

// TryAcquire returns an idle item at once, or ErrUnavailable (ErrClosed once
// closed). When it finds none and there is capacity, it starts a create in
// the background so that a later call may succeed. With a shared Inventory
// it pops from the inventory, which is I/O, hence the ctx.
func (p *Pool[T]) TryAcquire(ctx context.Context) (*Handle[T], error) {
	for {
		select {
		case h := <-p.idle:
			if h.dispatched {
				p.undispatch(h)
			}
			if h, err, ok := p.take(ctx, h); ok {
				return h, err
			}
			continue
		default:
		}
		break
	}
	p.mu.Lock()
	if p.closedLocked {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if p.inv != nil && p.nwait.Load() == 0 && p.totalLocked() < p.opts.MaxSize {
		p.creating++ // a slot for the pop
		p.mu.Unlock()
		h, err := p.popShared(ctx)
		if h != nil && p.checkOnAcquire && p.check(ctx, h.value) != nil {
			p.destroyClaimed(h, ReasonUnhealthy)
			h = nil
		}
		p.mu.Lock()
		p.creating--
		if h != nil {
			p.addItemLocked(h)
			if p.closedLocked {
				p.destroyLocked(h, ReasonShutdown)
				h = nil
			} else {
				h.state.Store(stateInUse)
			}
		}
		p.mu.Unlock()
		if h != nil {
			p.kickReplenish()
			return h, nil
		}
		if err != nil {
			return nil, err
		}
		return nil, ErrUnavailable
	}
	if p.nwait.Load() == 0 && p.creating == 0 && p.totalLocked() < p.opts.MaxSize {
		p.startCreateLocked()
	}
	p.mu.Unlock()
	return nil, ErrUnavailable
}

// expired returns why h must not be handed out or kept idle at now, or "".
func (p *Pool[T]) expired(h *Handle[T], now time.Time) Reason {
	n := now.UnixNano()
	if h.deadline != 0 && n >= h.deadline {
		return ReasonLifetime
	}
	if p.opts.WarmTTL > 0 && h.lastUsed == 0 && n-h.created >= int64(p.opts.WarmTTL) {
		return ReasonWarmTTL
	}
	return ""
}

// fillLocked starts the creates needed by the waiters and the warm target,
// within MaxSize and MaxConcurrentCreates, and returns how many it started.
func (p *Pool[T]) fillLocked() (started int) {
	if p.closedLocked {
		return 0
	}
	demand := int(p.nwait.Load())
	if idle := len(p.idle) + p.checking; p.inv == nil && !p.warmPaused && !p.cleanupDue && idle < p.opts.MinIdle {
		demand += p.opts.MinIdle - idle
	}
	for p.creating < demand && p.totalLocked() < p.opts.MaxSize && p.creating+p.late < p.opts.MaxConcurrentCreates {
		p.startCreateLocked()
		started++
	}
	return started
}

func (p *Pool[T]) startCreateLocked() {
	p.creating++
	p.wg.Add(1)
	go p.obtain()
}

// obtain produces one item (a shared pop, else a create) and settles it or
// its error.
func (p *Pool[T]) obtain() {
	defer p.wg.Done()
	var h *Handle[T]
	var err error
	var call uint64
	popped := false
	if p.inv != nil {
		h, err = p.popShared(p.ctx)
		popped = h != nil
	}
	if h == nil && err == nil {
		h, call, err = p.createItem()
	}
	p.mu.Lock()
	p.creating--
	if call != 0 {
		p.endCreateLocked(call)
	}
	if err != nil {
		p.createFailures++
		// The error goes to one waiter, if any; else warm creates back off.
		if p.nwait.Load() > 0 && p.dispatchLocked(&Handle[T]{err: &createError{err}}) {
			p.fillLocked() // other waiters, held back by MaxConcurrentCreates
		} else if !p.closedLocked && !p.warmPaused {
			p.pauseWarmLocked()
		}
		p.mu.Unlock()
		p.emit(EventCreateFailed, "", "", err)
		p.warn("create", err)
		return
	}
	if !popped {
		p.creates++
		p.backoff = 0
	}
	p.addItemLocked(h)
	h.state.Store(stateIdle)
	h.fresh = !popped // just created: no need to check it on acquire
	dispatched := !p.closedLocked && !h.lost.Load() && p.nwait.Load() > 0 && p.dispatchLocked(h)
	if !dispatched {
		h.fresh = false
	}
	if dispatched {
		p.fillLocked() // other waiters, held back by MaxConcurrentCreates
	}
	p.mu.Unlock()
	if !dispatched {
		p.settle(h)
	}
	if popped {
		p.kickReplenish()
	} else {
		p.emit(EventCreated, "", h.id, nil)
	}
}

// dispatchLocked sends h, an item or an error token, to a waiter: nwait
// drops now, so that no create starts for that waiter meanwhile.
func (p *Pool[T]) dispatchLocked(h *Handle[T]) bool {
	p.nwait.Add(-1)
	h.dispatched = true
	if p.offerLocked(h) {
		return true
	}
	p.undispatch(h)
	return false
}

// offerLocked is a non-blocking send to p.idle.
func (p *Pool[T]) offerLocked(tok *Handle[T]) bool {
	select {
	case p.idle <- tok:
		return true
	default:
		return false
	}
}

// settle finds a home for h, an item in p.items in state idle that is not
// in p.idle: the longest waiter, else the idle set (local, or the shared
// Inventory); h is destroyed when closed, lost, or beyond MaxIdle.
func (p *Pool[T]) settle(h *Handle[T]) {
	if !p.closed.Load() && !h.lost.Load() && (p.inv == nil || p.nwait.Load() > 0) && p.offerDispatch(h) {
		return
	}
	p.mu.Lock()
	switch {
	case p.closedLocked:
		p.destroyLocked(h, ReasonShutdown)
	case h.lost.Load():
		p.destroyLocked(h, ReasonLost)
	case p.inv != nil:
		h.state.Store(stateReturning)
		p.mu.Unlock()
		p.putShared(h)
		return
	default:
		p.destroyLocked(h, ReasonIdle) // beyond MaxIdle
	}
	p.checkDrainedLocked()
	p.mu.Unlock()
}

// pauseWarmLocked stops warm creates for a backoff after a failed create
// nobody was waiting for, so a broken provider is not hammered.
func (p *Pool[T]) pauseWarmLocked() {
	p.warmPaused = true
	if p.backoff == 0 {
		p.backoff = 100 * time.Millisecond
	} else {
		p.backoff = min(2*p.backoff, max(p.opts.JanitorInterval, time.Second))
	}
	p.warmTimer = p.clock.AfterFunc(p.backoff, func() {
		p.mu.Lock()
		p.warmPaused = false
		p.fillLocked()
		p.mu.Unlock()
		if p.inv != nil {
			p.kickReplenish()
		}
	})
}

// createItem calls Create and wraps the result in a Handle (not yet in
// p.items). With a shared Inventory the item is registered as in use by
// this instance. The caller ends the create call when the item is in
// p.items.
func (p *Pool[T]) createItem() (*Handle[T], uint64, error) {
	started := p.clock.Now()
	v, call, err := p.callCreate()
	if err != nil {
		return nil, 0, err
	}
	h := p.newHandle(v, p.clock.Now())
	if p.inv != nil {
		rec, err := p.record(h, p.opts.Instance)
		out := addUnknown
		if err == nil {
			out, err = p.addRecord(rec, started)
		}
		switch out {
		case addDone:
		case addTaken:
			// Another instance claimed it as an orphan meanwhile: the
			// record is theirs, and so is the destroy.
			p.mu.Lock()
			p.endCreateLocked(call)
			p.mu.Unlock()
			return nil, 0, err
		default:
			// Not recorded as far as anyone knows, and never idle: only
			// this instance can have it.
			p.mu.Lock()
			p.endCreateLocked(call)
			p.destroyingLocked(h)
			p.mu.Unlock()
			go p.destroy(h, ReasonEvicted)
			return nil, 0, err
		}
	}
	return h, call, nil
}

func (p *Pool[T]) newHandle(v T, now time.Time) *Handle[T] {
	h := &Handle[T]{p: p, value: v, created: now.UnixNano(), idx: -1}
	if p.ider != nil {
		h.id = p.ider.ID(v)
	}
	if p.opts.MaxLifetime > 0 {
		life := p.opts.MaxLifetime
		if p.opts.LifetimeJitter > 0 {
			life -= rand.N(p.opts.LifetimeJitter)
		}
		h.deadline = h.created + int64(life)
	}
	return h
}

func (p *Pool[T]) addItemLocked(h *Handle[T]) {
	h.idx = len(p.items)
	p.items = append(p.items, h)
}

func (p *Pool[T]) removeItemLocked(h *Handle[T]) {
	if h.idx < 0 {
		return
	}
	last := len(p.items) - 1
	p.items[h.idx] = p.items[last]
	p.items[h.idx].idx = h.idx
	p.items[last] = nil
	p.items = p.items[:last]
	h.idx = -1
}

// destroyLocked forgets h and destroys it in the background. h counts
// against capacity until Destroy returns.
func (p *Pool[T]) destroyLocked(h *Handle[T], reason Reason) {
	p.removeItemLocked(h)
	h.state.Store(stateGone)
	p.destroyingLocked(h)
	go p.destroy(h, reason)
}

// destroyingLocked counts h as being destroyed until destroy returns.
func (p *Pool[T]) destroyingLocked(h *Handle[T]) {
	p.destroying++
	if h.id != "" {
		p.goneLocked(h.id)
	}
	p.wg.Add(1)
}

// goneLocked marks id as being destroyed: Reconcile still knows it.
func (p *Pool[T]) goneLocked(id string) {
	if p.gone == nil {
		p.gone = map[string]int{}
	}
	p.gone[id]++
}

// forgetGoneLocked ends a goneLocked.
func (p *Pool[T]) forgetGoneLocked(id string) {
	if p.gone[id]--; p.gone[id] <= 0 {
		delete(p.gone, id)
	}
}

func (p *Pool[T]) destroy(h *Handle[T], reason Reason) {
	defer p.wg.Done()
	err := p.callDestroy(h.value)
	if p.inv != nil && h.id != "" {
		ctx, cancel := p.clock.WithTimeout(context.Background(), p.opts.DestroyTimeout)
		if _, rerr := p.inv.Remove(ctx, h.id); rerr != nil {
			p.warn("inventory remove", rerr)
		}
		cancel()
	}
	p.mu.Lock()
	p.destroying--
	if h.id != "" {
		p.forgetGoneLocked(h.id)
	}
	p.countDestroyLocked(reason, err)
	p.fillLocked()
	p.mu.Unlock()
	p.afterDestroy(h.id, reason, err)
}

// destroyValue destroys an item the pool never held (a create that
// returned after its timeout). Like an orphan it is claimed first, so that
// no Reconcile destroys it again: the caller has marked id as being
// destroyed (goneLocked), and it is recorded as this instance's in a
// shared Inventory (where another instance may have claimed it first).
func (p *Pool[T]) destroyValue(v T, id string, reason Reason) {
	defer p.wg.Done()
	if id != "" {
		defer func() {
			p.mu.Lock()
			p.forgetGoneLocked(id)
			p.mu.Unlock()
		}()
		if p.inv != nil {
			claimed, err := p.claimValue(id, v)
			if err != nil {
				p.warn("inventory add", err, "id", id)
			}
			if !claimed {
				p.mu.Lock()
				p.late--
				p.fillLocked()
				p.mu.Unlock()
				return // another instance destroys it
			}
			defer func() {
				ctx, cancel := p.ioContext()
				if _, err := p.inv.Remove(ctx, id); err != nil {
					p.warn("inventory remove", err, "id", id)
				}
				cancel()
			}()
		}
	}
	err := p.callDestroy(v)
	p.mu.Lock()
	p.late--
	p.countDestroyLocked(reason, err)
	p.fillLocked()
	p.mu.Unlock()
	p.afterDestroy(id, reason, err)
}

// claimValue records v, unknown to every instance, as this instance's
// before it is destroyed. It reports false when another instance recorded
// it first. An Add that failed otherwise cannot have left the record idle,
// so v is destroyed anyway.
func (p *Pool[T]) claimValue(id string, v T) (bool, error) {
	data, err := p.codec.Encode(v)
	if err != nil {
		return true, fmt.Errorf("pool: encode: %w", err)
	}
	ctx, cancel := p.ioContext()
	defer cancel()
	err = p.inv.Add(ctx, Record{ID: id, Owner: p.opts.Instance, Data: data, Created: p.clock.Now()}, p.heldTTL())
	if errors.Is(err, ErrExists) {
		return false, nil
	}
	return true, err
}

func (p *Pool[T]) callDestroy(v T) error {
	_, err := callTimeout(p, context.Background(), p.opts.DestroyTimeout, "destroy", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, p.prov.Destroy(ctx, v)
	}, nil, nil)
	return err
}

func (p *Pool[T]) countDestroyLocked(reason Reason, err error) {
	if err != nil {
		p.destroyErrors++
		if p.closedLocked {
			p.closeErrs = append(p.closeErrs, err)
		}
		return
	}
	p.destroyed[reasonIndex(reason)]++
}

func (p *Pool[T]) afterDestroy(id string, reason Reason, err error) {
	if err != nil {
		p.emit(EventDestroyFailed, reason, id, err)
		p.warn("destroy", err, "reason", string(reason), "id", id)
		return
	}
	p.emit(EventDestroyed, reason, id, nil)
}

func (p *Pool[T]) warn(what string, err error, args ...any) {
	if p.opts.Logger != nil {
		p.opts.Logger.Warn("pool: "+what, append([]any{"err", err, "instance", p.opts.Instance}, args...)...)
	}
}

// callTimeout runs fn on its own goroutine under a context derived from
// parent with timeout d, recovering panics, and returns when fn does or the
// context ends, whichever is first. A fn that ignores its context keeps
// running, tracked by p.wg: abandoned, if set, runs when the caller gives up
// on it, and late, if set, receives what fn returns after that (never
// before abandoned has returned).
func callTimeout[T, R any](p *Pool[T], parent context.Context, d time.Duration, op string, fn func(context.Context) (R, error), abandoned func(), late func(R, error)) (R, error) {
	ctx, cancel := p.clock.WithTimeout(parent, d)
	defer cancel()
	type result struct {
		v   R
		err error
	}
	ch := make(chan result, 1)
	var mu sync.Mutex
	state := 0 // 0 running, 1 delivered, 2 abandoned
	p.wg.Add(1)
	p.mu.Lock()
	if p.calls == nil {
		p.calls = map[string]int{}
	}
	p.calls[op]++
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		defer func() {
			p.mu.Lock()
			p.calls[op]--
			p.mu.Unlock()
		}()
		var r result
		func() {
			defer func() {
				if x := recover(); x != nil {
					r.err = &PanicError{Op: op, Value: x}
				}
			}()
			r.v, r.err = fn(ctx)
		}()
		mu.Lock()
		if state == 0 {
			state = 1
			mu.Unlock()
			ch <- r
			return
		}
		mu.Unlock()
		if late != nil {
			late(r.v, r.err)
		}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		mu.Lock()
		if state == 0 {
			state = 2
			if abandoned != nil {
				abandoned()
			}
			mu.Unlock()
			var zero R
			return zero, fmt.Errorf("pool: %s: %w", op, context.Cause(ctx))
		}
		mu.Unlock()
		r := <-ch
		return r.v, r.err
	}
}

// timedOut reports whether err is the end of a call that ran past its own
// timeout, rather than of the pool's context.
func (p *Pool[T]) timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) && p.ctx.Err() == nil
}

// beginCreateLocked registers a Create call about to start: until it
// ends, Reconcile takes no item created after it for an orphan.
func (p *Pool[T]) beginCreateLocked() uint64 {
	if p.inflight == nil {
		p.inflight = map[uint64]time.Time{}
	}
	p.createSeq++
	p.inflight[p.createSeq] = p.clock.Now()
	return p.createSeq
}

// endCreateLocked ends a beginCreateLocked, once the Create call has
// returned and its item (if any) is known to the pool.
func (p *Pool[T]) endCreateLocked(call uint64) { delete(p.inflight, call) }

// createsSinceLocked reports whether a Create call that started at or
// before t is still running: an item created at t may be its.
func (p *Pool[T]) createsSinceLocked(t time.Time) bool {
	for _, start := range p.inflight {
		if !start.After(t) {
			return true
		}
	}
	return false
}

// callCreate calls Create under the pool's context and CreateTimeout. The
// call stays registered as in flight until endCreateLocked(call) when it
// succeeds, and until it returns if it fails or runs past CreateTimeout (an
// item it then returns is destroyed as an orphan).
func (p *Pool[T]) callCreate() (T, uint64, error) {
	p.mu.Lock()
	call := p.beginCreateLocked()
	p.mu.Unlock()
	gaveUp := false
	abandoned := func() {
		// The call goes on past CreateTimeout: it keeps counting against
		// MaxSize (its item may exist at the provider) until it returns.
		gaveUp = true
		p.mu.Lock()
		p.late++
		p.mu.Unlock()
	}
	v, err := callTimeout(p, p.ctx, p.opts.CreateTimeout, "create", p.prov.Create, abandoned, func(v T, err error) {
		// Create returned after its caller gave up: nobody owns v. It is
		// marked as being destroyed before the call stops counting as in
		// flight, so Reconcile never sees it unknown.
		id := ""
		if err == nil && p.ider != nil {
			id = p.ider.ID(v)
		}
		p.mu.Lock()
		if id != "" {
			p.goneLocked(id)
		}
		p.endCreateLocked(call)
		if err == nil {
			p.wg.Add(1) // destroyValue ends the late count
		} else {
			p.late--
			p.fillLocked()
		}
		p.mu.Unlock()
		if err == nil {
			go p.destroyValue(v, id, ReasonOrphan)
		}
	})
	if err != nil {
		if !gaveUp {
			p.mu.Lock()
			p.endCreateLocked(call)
			p.mu.Unlock()
		}
		if gaveUp || p.timedOut(err) {
			err = &createTimeoutError{p.opts.CreateTimeout}
		}
		return v, 0, err
	}
	return v, call, nil
}

// Close drains the pool: new acquires fail with ErrClosed, waiters are woken
// with ErrClosed, idle items are destroyed, and Close waits until every
// handle is released (each is destroyed on release) or ctx ends, when the
// items still in use are destroyed anyway and their handles become inert.
// It then waits for the janitor, every create, check and destroy in flight
// and the delivery of the events queued so far, until ctx ends.
//
// It returns the destroy errors joined, plus an error wrapping
// context.Cause(ctx) if it had to destroy items in use, and one that says
// what is still running (a Create that ignores its context, say) if ctx
// ended before everything stopped. With a shared Inventory only this
// instance's items are destroyed; the shared idle set stays for the other
// instances. Close is idempotent: a later call waits the same way, and
// once everything has stopped returns the destroy errors only.
func (p *Pool[T]) Close(ctx context.Context) error {
	p.closeOnce.Do(p.beginClose)
	var errs []error
	select {
	case <-p.drained:
	case <-ctx.Done():
		if n := p.forceInUse(); n > 0 {
			errs = append(errs, fmt.Errorf("pool: close: %d items still in use destroyed: %w", n, context.Cause(ctx)))
		}
	}
	select {
	case <-p.closeDone:
	default:
		select {
		case <-p.closeDone:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("pool: close: still running: %s: %w", p.running(), context.Cause(ctx)))
			return errors.Join(errs...)
		}
	}
	return errors.Join(append(errs, p.closeErr)...)
}

// beginClose starts closing the pool and starts finishClose, which owns the
// rest; it does not wait for anything a provider or a holder does.
func (p *Pool[T]) beginClose() {
	p.mu.Lock()
	p.closedLocked = true
	p.closed.Store(true)
	p.drainClosedLocked()
	if p.warmTimer != nil {
		p.warmTimer.Stop()
	}
	p.drained = make(chan struct{})
	p.checkDrainedLocked()
	p.mu.Unlock()

	// Wake the waiters: each takes one ErrClosed token. New ones cannot
	// start (closedLocked), and tokens left over are drained below.
	closedTok := &Handle[T]{err: ErrClosed}
	for p.nwait.Load() > 0 {
		select {
		case p.idle <- closedTok:
		default:
			runtime.Gosched()
		}
	}
	p.mu.Lock()
	p.drainClosedLocked()
	p.mu.Unlock()

	p.cancel() // creates and janitor steps in flight give up
	if p.janitorStop != nil {
		close(p.janitorStop)
	}
	go p.finishClose()
}

// finishClose waits for the handles, the janitor, every call in flight and
// the events queued, then records the result and ends every Close.
func (p *Pool[T]) finishClose() {
	<-p.drained
	if p.janitorDone != nil {
		<-p.janitorDone
	}
	// Wait for every create and destroy, and for stragglers: an Acquire
	// that took an item from the idle set just before Close drained it
	// finds the pool closed and destroys the item itself.
	for {
		p.wg.Wait()
		p.mu.Lock()
		p.drainClosedLocked()
		n := p.totalLocked()
		p.mu.Unlock()
		if n == 0 {
			break
		}
		runtime.Gosched()
	}
	if p.stopEvents != nil {
		close(p.stopEvents)
		p.dispatchWG.Wait()
	}
	p.mu.Lock()
	p.closeErr = errors.Join(p.closeErrs...)
	p.mu.Unlock()
	close(p.closeDone)
}

// forceInUse destroys the items still in use, whose handles become inert,
// and returns how many there were.
func (p *Pool[T]) forceInUse() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, h := range append([]*Handle[T](nil), p.items...) {
		if h.state.CompareAndSwap(stateInUse, stateForced) {
			n++
			p.removeItemLocked(h)
			p.destroyingLocked(h)
			go p.destroy(h, ReasonShutdown)
		}
	}
	p.checkDrainedLocked()
	return n
}

// running says what Close is still waiting for.
func (p *Pool[T]) running() string {
	p.mu.Lock()
	var parts []string
	add := func(n int, one, many string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+one)
		case n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", n, many))
		}
	}
	inUse := 0
	for _, h := range p.items {
		if st := h.state.Load(); st == stateInUse || st == stateSettling || st == stateReturning {
			inUse++
		}
	}
	add(p.calls["create"], "Create call", "Create calls")
	add(p.late, "of them past CreateTimeout", "of them past CreateTimeout")
	add(p.calls["destroy"], "Destroy call", "Destroy calls")
	add(p.calls["check"], "Check call", "Check calls")
	add(inUse, "item in use", "items in use")
	p.mu.Unlock()
	if p.janitorDone != nil {
		select {
		case <-p.janitorDone:
		default:
			parts = append(parts, "a janitor step")
		}
	}
	if p.delivering.Load() {
		parts = append(parts, "an OnEvent call")
	}
	if p.events != nil {
		add(len(p.events), "queued event", "queued events")
	}
	if len(parts) == 0 {
		return "pool bookkeeping"
	}
	return strings.Join(parts, ", ")
}

// drainClosedLocked empties p.idle after Close began: items are destroyed,
// tokens dropped.
func (p *Pool[T]) drainClosedLocked() {
	for {
		select {
		case h := <-p.idle:
			if h.dispatched {
				p.undispatch(h) // its waiter needs ErrClosed instead
			}
			if h.err == nil {
				p.destroyLocked(h, ReasonShutdown)
			}
		default:
			return
		}
	}
}

// drainIdleLocked takes every item out of p.idle (dropping error tokens,
// whose waiters will be served by a new create) for the janitor.
func (p *Pool[T]) drainIdleLocked() []*Handle[T] {
	var out []*Handle[T]
	for {
		select {
		case h := <-p.idle:
			if h.dispatched {
				p.undispatch(h)
			}
			if h.err == nil {
				h.state.Store(stateIdle) // a release may have left it settling
				out = append(out, h)
			}
		default:
			return out
		}
	}
}

// restoreIdleLocked puts items the janitor kept back into p.idle.
func (p *Pool[T]) restoreIdleLocked(hs []*Handle[T]) {
	for _, h := range hs {
		if !p.offerLocked(h) {
			p.destroyLocked(h, ReasonIdle)
		}
	}
}

// checkDrainedLocked signals Close when no item is in use any more.
func (p *Pool[T]) checkDrainedLocked() {
	if p.drained == nil {
		return
	}
	select {
	case <-p.drained:
		return
	default:
	}
	for _, h := range p.items {
		if st := h.state.Load(); st == stateInUse || st == stateSettling || st == stateReturning {
			return
		}
	}
	close(p.drained)
}
