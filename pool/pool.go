package pool

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"github.com/ttlkit/ttlkit/pool/shared"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/event"
)

// Pool is a pool of items of type T made by a Provisioner. All methods are
// safe for concurrent use.
type Pool[T any] struct {
	prov    Provisioner[T]
	checker Checker[T]
	watcher Watcher[T]
	lister  Lister[T]
	ider    interface{ ID(T) string }
	codec   shared.Codec[T]
	set     idleSet[T] // local, or the shared Inventory's
	opts    Options
	clock   clock.Clock
	start   time.Time

	// stampUse is set when releases must record their time (IdleTimeout,
	// or a shared Inventory), checkExpiry when acquires must read the clock
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
	// items on their way to a local waiter: see idleSet). It may also carry
	// error tokens (Handle.err) for waiters.
	idle chan *Handle[T]
	// nwait counts the Acquire calls waiting on idle that no item or error
	// in flight is meant for yet: the demand for creates. An item the pool
	// sends to a waiter (a create's result, an error) is "dispatched": nwait
	// drops when it is sent, not when the waiter wakes, so no second create
	// starts for that waiter meanwhile (Handle.dispatched). It may go below
	// zero for a while: see fillLocked.
	nwait   atomic.Int64
	waiting atomic.Int64 // Acquire calls waiting, for Stats
	closed  atomic.Bool  // mirrors closedLocked for the hot path
	// minIdle mirrors opts.MinIdle for the hot path, over tells settle that
	// a shrink left more items than MaxSize (both set by SetLimits).
	minIdle atomic.Int64
	over    atomic.Bool
	// idleLow is the fewest idle items seen since the last prune: that many
	// were not needed, whatever their idle times (FIFO rotation keeps every
	// idle time short).
	idleLow atomic.Int64

	mu             sync.Mutex
	items          []*Handle[T] // every item this instance holds, in any state
	checking       int          // idle items taken out by CheckHealth
	settling       int          // new items on their way from their create to the idle set
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
	detached       uint64
	spared         uint64
	destroyed      [len(reasons)]uint64

	canceledWaits atomic.Int64
	waitCount     atomic.Int64
	waitNanos     atomic.Int64

	wg         sync.WaitGroup      // creates, destroys, provisioner calls, helpers
	events     *event.Queue[Event] // nil without OnEvent
	eventsSent atomic.Uint64       // events given to the queue, for Close's report
	delivering atomic.Bool         // OnEvent is running

	janitorStop chan struct{}
	janitorDone chan struct{}
	cleanupDone chan struct{} // closed when the start-up cleanup is over
	cleanupErr  error         // its result, set before cleanupDone closes
	closeOnce   sync.Once
	closeDone   chan struct{}
	closeErr    error
}

// New returns a pool of prov's items with its janitor and warm creates started; bad
// opts match [ErrInvalid].
func New[T any](prov Provisioner[T], opts Options) (*Pool[T], error) {
	return newPool(prov, opts, true)
}

func newPool[T any](prov Provisioner[T], opts Options, janitor bool) (*Pool[T], error) {
	if prov == nil {
		return nil, errs.Invalid(ErrInvalid, "pool: Provisioner is nil")
	}
	o, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	p := &Pool[T]{prov: prov, opts: o, clock: o.Clock, closeDone: make(chan struct{}), realClock: opts.Clock == nil}
	p.checker, _ = prov.(Checker[T])
	p.watcher, _ = prov.(Watcher[T])
	p.lister, _ = prov.(Lister[T])
	p.ider, _ = prov.(interface{ ID(T) string })
	if c, ok := prov.(shared.Codec[T]); ok {
		p.codec = c
	} else {
		p.codec = jsonCodec[T]{}
	}
	if o.Inventory != nil && p.ider == nil {
		return nil, errs.Invalid(ErrInvalid, "pool: Inventory needs a Provisioner with an ID(T) string method")
	}
	if o.CleanupOnStart && p.lister == nil {
		return nil, errs.Invalid(ErrInvalid, "pool: CleanupOnStart needs a Provisioner that implements Lister")
	}
	if p.opts.Instance == "" {
		var b [8]byte
		_, _ = crand.Read(b[:])
		p.opts.Instance = hex.EncodeToString(b[:])
	}
	if o.CheckOnAcquire && p.checker == nil {
		return nil, errs.Invalid(ErrInvalid, "pool: CheckOnAcquire needs a Provisioner that implements Checker")
	}
	p.checkOnAcquire = o.CheckOnAcquire
	p.stampUse = o.IdleTimeout > 0
	p.checkExpiry = o.MaxLifetime > 0 || o.WarmTTL > 0
	if o.Inventory != nil {
		p.set = &sharedSet[T]{p: p, inv: o.Inventory}
		p.idle = make(chan *Handle[T], o.MaxSize)
		p.stampUse = true // records carry LastUsed
	} else {
		p.set = &localSet[T]{p: p}
		p.idle = make(chan *Handle[T], o.MaxIdle)
	}
	p.minIdle.Store(int64(o.MinIdle))
	p.start = p.clock.Now()
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.lowSince = p.start
	p.idleLow.Store(math.MaxInt64)
	if o.OnEvent != nil {
		p.events = event.New(func(ev Event) {
			p.delivering.Store(true)
			defer p.delivering.Store(false)
			o.OnEvent(ev)
		}, o.EventQueue, o.Logger, "pool")
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
			_, err := p.cleanup(p.ctx)
			if err != nil {
				p.warn("start-up cleanup", err)
			}
			p.cleanupErr = err
			p.mu.Lock()
			p.cleanupDue = false
			p.fillLocked()
			p.mu.Unlock()
			p.set.kick()
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
	if !o.CleanupOnStart {
		p.set.kick() // else once the cleanup is over
	}
	return p, nil
}

func (p *Pool[T]) totalLocked() int { return len(p.items) + p.creating + p.late + p.destroying }

func (p *Pool[T]) addItemLocked(h *Handle[T]) {
	h.idx = len(p.items)
	p.items = append(p.items, h)
}

func (p *Pool[T]) removeItemLocked(h *Handle[T]) {
	if h.idx < 0 {
		return
	}
	unwatchItem(h)
	last := len(p.items) - 1
	p.items[h.idx] = p.items[last]
	p.items[h.idx].idx = h.idx
	p.items[last] = nil
	p.items = p.items[:last]
	h.idx = -1
}

func (p *Pool[T]) warn(what string, err error, args ...any) {
	if p.opts.Logger != nil {
		p.opts.Logger.Warn("pool: "+what, append([]any{"err", err, "instance", p.opts.Instance}, args...)...)
	}
}
