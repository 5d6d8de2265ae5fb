package pool

import (
	"context"
	"fmt"
	"github.com/ttlkit/ttlkit/pool/shared"
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/event"
)

// Defaults for zero Options fields.
const (
	DefaultMaxSize               = 10
	DefaultJanitorInterval       = 30 * time.Second
	DefaultHealthCheckInterval   = 30 * time.Second
	DefaultOrphanGracePeriod     = 60 * time.Second
	DefaultCreateTimeout         = time.Minute
	DefaultDestroyTimeout        = 30 * time.Second
	DefaultMaxConcurrentDestroys = 4
	DefaultEventQueue            = 1024
)

// Options configures a Pool. The zero value is usable: a pool of up to
// DefaultMaxSize items, created on demand, kept idle until the pool closes.
// Durations left zero disable the behaviour they govern unless a default is
// documented; zero never means "evict everything".
type Options struct {
	// MinIdle is the warm target: the pool keeps at least this many idle
	// items, counting creates in flight, and refills after each acquire.
	// Zero lets the pool scale to zero.
	MinIdle int
	// MaxIdle caps the idle items; an item released beyond it is destroyed.
	// Zero means MaxSize. With an Inventory both limits are global.
	MaxIdle int
	// MaxSize is the capacity: items in use, idle, being created (including
	// Create calls past CreateTimeout that have not returned) and being
	// destroyed by this pool instance. Acquire waits when it is reached.
	// Zero means DefaultMaxSize, or MinIdle if that is larger. A Group
	// requires it.
	MaxSize int
	// IdleTimeout destroys items idle for longer, but only those above
	// MinIdle. Zero disables it.
	IdleTimeout time.Duration
	// MaxLifetime is an item's absolute TTL from its creation, enforced on
	// acquire, on release and by the janitor. Zero disables it.
	MaxLifetime time.Duration
	// LifetimeJitter shortens each item's MaxLifetime by a random amount in
	// [0, LifetimeJitter), chosen once at creation, so that items created
	// together do not all expire together. It must be below MaxLifetime.
	LifetimeJitter time.Duration
	// WarmTTL replaces an idle item that was never used within WarmTTL of
	// its creation. Zero disables it.
	WarmTTL time.Duration
	// HealthCheckInterval is how often idle items are checked when the
	// Provisioner implements Checker. Zero means DefaultHealthCheckInterval;
	// negative disables periodic checks (CheckHealth still works).
	HealthCheckInterval time.Duration
	// CheckOnAcquire checks each idle item with the Provisioner's Check
	// before Acquire hands it out, and destroys it (ReasonUnhealthy) and
	// takes another if the check fails: a worker that died while idle is
	// never handed out. It costs a Check call per acquire of an idle item
	// (bounded by CreateTimeout and the caller's context); items handed
	// straight from their create are not checked. It needs a Provisioner
	// that implements Checker. False means idle items are only checked
	// every HealthCheckInterval. A Provisioner that implements Watcher has
	// the items whose death it learns destroyed without it: CheckOnAcquire
	// is for failures nobody reports (a worker that hangs).
	CheckOnAcquire bool
	// JanitorInterval is how often Tick (Prune, Reconcile, Replenish) runs.
	// Zero means DefaultJanitorInterval; negative starts no janitor, and the
	// steps run only when called.
	JanitorInterval time.Duration
	// OrphanGracePeriod protects items the provider lists but the pool does
	// not know (yet) from Reconcile for this long after their creation.
	// Zero means DefaultOrphanGracePeriod.
	//
	// It may be shorter than CreateTimeout: an item listed while a Create
	// call of this pool that started before the item was created is still
	// running may be that call's (a worker listed before it is ready), and
	// is never taken for an orphan, however long the create takes. Other
	// instances sharing an Inventory cannot see this pool's creates in
	// flight, though: with an Inventory keep it longer than a Create takes.
	OrphanGracePeriod time.Duration
	// MaxConcurrentCreates limits Create calls in flight. Zero means MaxSize.
	MaxConcurrentCreates int
	// MaxConcurrentDestroys limits the Destroy calls one Reconcile (or the
	// start-up cleanup) runs at once for orphans, which the pool does not
	// count against MaxSize. Zero means DefaultMaxConcurrentDestroys.
	MaxConcurrentDestroys int
	// CreateTimeout bounds each Create and Check call. Zero means
	// DefaultCreateTimeout.
	CreateTimeout time.Duration
	// DestroyTimeout bounds each Destroy call. Zero means
	// DefaultDestroyTimeout.
	DestroyTimeout time.Duration
	// CleanupOnStart destroys, when the pool starts, every item the
	// provider lists that the pool (and its Inventory) does not know and that
	// was created before the pool started: the leftovers of an earlier
	// process. With an Inventory it spares the items younger than
	// OrphanGracePeriod, which the other instances may still be creating
	// (see Cleanup). It needs a Provisioner that implements Lister.
	CleanupOnStart bool
	// Owned, if set, tells Reconcile and Cleanup which of the listed items
	// nobody in the pool knows are owned outside it: the items handed out
	// for good with Handle.Detach, which the application records (an
	// assignment in a database) before it detaches them. It receives the IDs
	// of would-be orphans and returns those it owns; they are spared. An
	// error spares every would-be orphan of that pass and is returned by
	// Reconcile. Nil means the pool owns everything its Lister lists.
	Owned func(ctx context.Context, ids []string) (owned []string, err error)
	// Inventory shares the idle set and item records with other pool
	// instances. Nil keeps them in this Pool's memory (the fast path).
	Inventory shared.Inventory
	// Instance names this pool instance in a shared Inventory. Empty means
	// a random name.
	Instance string
	// Clock is the time source; nil means real time.
	Clock clock.Clock
	// OnEvent receives lifecycle events, in order, on one goroutine of the
	// pool's, outside every lock, so it never delays Acquire or Release and
	// may call the pool. Events that arrive while it is busy are queued,
	// and dropped (counted in Stats.EventsDropped) when the queue is full.
	// Close delivers the events queued before it.
	OnEvent func(Event)
	// EventQueue is how many events may wait for OnEvent. Zero means
	// DefaultEventQueue; negative or above 1048576 is an error.
	EventQueue int
	// Logger receives warnings (create and destroy failures, and the first
	// event dropped because OnEvent fell behind); nil means none are
	// logged.
	Logger *slog.Logger
}

// normalize validates o and fills defaults. Its errors match ErrInvalid
// and name the first bad field as the user set it.
func (o Options) normalize() (Options, error) {
	type neg struct {
		name string
		v    int64
	}
	for _, f := range []neg{
		{"MinIdle", int64(o.MinIdle)}, {"MaxIdle", int64(o.MaxIdle)}, {"MaxSize", int64(o.MaxSize)},
		{"IdleTimeout", int64(o.IdleTimeout)}, {"MaxLifetime", int64(o.MaxLifetime)},
		{"LifetimeJitter", int64(o.LifetimeJitter)}, {"WarmTTL", int64(o.WarmTTL)},
		{"OrphanGracePeriod", int64(o.OrphanGracePeriod)}, {"MaxConcurrentCreates", int64(o.MaxConcurrentCreates)},
		{"MaxConcurrentDestroys", int64(o.MaxConcurrentDestroys)},
		{"CreateTimeout", int64(o.CreateTimeout)}, {"DestroyTimeout", int64(o.DestroyTimeout)},
		{"EventQueue", int64(o.EventQueue)},
	} {
		if f.v < 0 {
			return o, errs.Invalid(ErrInvalid, "pool: %s (%d) is negative", f.name, f.v)
		}
	}
	if err := event.CheckSize("pool", "EventQueue", o.EventQueue); err != nil {
		return o, errs.Invalid(ErrInvalid, "%v", err)
	}
	maxSize := fmt.Sprintf("MaxSize (%d)", o.MaxSize)
	if o.MaxSize == 0 {
		o.MaxSize = max(DefaultMaxSize, o.MinIdle)
		maxSize = fmt.Sprintf("MaxSize (%d, the default)", o.MaxSize)
	}
	setMaxIdle := o.MaxIdle != 0
	if !setMaxIdle {
		o.MaxIdle = o.MaxSize
	}
	switch {
	case setMaxIdle && o.MinIdle > o.MaxIdle:
		return o, errs.Invalid(ErrInvalid, "pool: MinIdle (%d) > MaxIdle (%d)", o.MinIdle, o.MaxIdle)
	case setMaxIdle && o.MaxIdle > o.MaxSize && o.Inventory == nil:
		return o, errs.Invalid(ErrInvalid, "pool: MaxIdle (%d) > %s", o.MaxIdle, maxSize)
	case o.MinIdle > o.MaxSize:
		return o, errs.Invalid(ErrInvalid, "pool: MinIdle (%d) > %s", o.MinIdle, maxSize)
	case o.LifetimeJitter > 0 && o.MaxLifetime == 0:
		return o, errs.Invalid(ErrInvalid, "pool: LifetimeJitter (%v) needs MaxLifetime", o.LifetimeJitter)
	case o.LifetimeJitter > 0 && o.LifetimeJitter >= o.MaxLifetime:
		return o, errs.Invalid(ErrInvalid, "pool: LifetimeJitter (%v) >= MaxLifetime (%v)", o.LifetimeJitter, o.MaxLifetime)
	case o.MaxConcurrentCreates > o.MaxSize:
		return o, errs.Invalid(ErrInvalid, "pool: MaxConcurrentCreates (%d) > %s", o.MaxConcurrentCreates, maxSize)
	}
	if o.MaxConcurrentCreates == 0 {
		o.MaxConcurrentCreates = o.MaxSize
	}
	if o.MaxConcurrentDestroys == 0 {
		o.MaxConcurrentDestroys = DefaultMaxConcurrentDestroys
	}
	if o.HealthCheckInterval == 0 {
		o.HealthCheckInterval = DefaultHealthCheckInterval
	}
	if o.JanitorInterval == 0 {
		o.JanitorInterval = DefaultJanitorInterval
	}
	if o.OrphanGracePeriod == 0 {
		o.OrphanGracePeriod = DefaultOrphanGracePeriod
	}
	if o.CreateTimeout == 0 {
		o.CreateTimeout = DefaultCreateTimeout
	}
	if o.DestroyTimeout == 0 {
		o.DestroyTimeout = DefaultDestroyTimeout
	}
	if o.EventQueue == 0 {
		o.EventQueue = DefaultEventQueue
	}
	if o.Clock == nil {
		o.Clock = clock.New()
	}
	return o, nil
}
