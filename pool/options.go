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

// Defaults of the Options fields left zero.
const (
	defaultMaxSize               = 10
	defaultIdleTimeout           = 30 * time.Minute
	defaultMaxLifetime           = time.Hour
	defaultJanitorInterval       = 30 * time.Second
	defaultHealthCheckInterval   = 30 * time.Second
	defaultOrphanGracePeriod     = time.Minute
	defaultCreateTimeout         = time.Minute
	defaultDestroyTimeout        = 30 * time.Second
	defaultMaxConcurrentDestroys = 4
)

// Options configures a Pool. The zero value of every field means its
// default, stated on the field; a duration that can be switched off is
// switched off by a negative value.
type Options struct {
	// MinIdle is the warm target: the idle items, counting creates in
	// flight, that the pool keeps and refills after each acquire. Zero means
	// none: the pool scales to zero.
	MinIdle int
	// MaxIdle caps the idle items; one released beyond it is destroyed.
	// Zero means MaxSize. With an Inventory, MinIdle and MaxIdle count the
	// idle items of every instance.
	MaxIdle int
	// MaxSize is the capacity: the items in use, idle, being created or
	// being destroyed by this instance. Acquire waits while it is reached.
	// Zero means 10, or MinIdle if that is larger; a [Group] requires it.
	MaxSize int
	// IdleTimeout destroys the idle items above MinIdle that were not
	// needed for this long. Zero means 30 minutes; negative keeps them.
	IdleTimeout time.Duration
	// MaxLifetime is each item's absolute TTL from its creation, enforced
	// on acquire, on release and by the janitor. Zero means 1 hour;
	// negative means none.
	MaxLifetime time.Duration
	// LifetimeJitter shortens each item's MaxLifetime by a random amount
	// in [0, LifetimeJitter), so that items created together do not expire
	// together. It must be below MaxLifetime. Zero means none.
	LifetimeJitter time.Duration
	// WarmTTL replaces an idle item never used within this time of its
	// creation. Zero means MaxLifetime; negative switches it off.
	WarmTTL time.Duration
	// HealthCheckInterval is how often CheckHealth checks the idle items,
	// when the Provisioner is a [Checker]. Zero means 30 seconds; negative
	// switches the periodic check off.
	HealthCheckInterval time.Duration
	// CheckOnAcquire checks an idle item with the [Checker] before Acquire
	// hands it out, and takes another if the check fails (an item handed
	// straight from its create is not checked). It costs a Check per
	// acquire; a [Watcher] finds dead items without it, so it is for
	// failures nobody reports (a worker that hangs).
	CheckOnAcquire bool
	// JanitorInterval is how often Tick runs. Zero means 30 seconds;
	// negative starts no janitor.
	JanitorInterval time.Duration
	// OrphanGracePeriod spares an item the provider lists but the pool
	// does not know for this long after its creation, so Reconcile never
	// takes an item still being recorded for an orphan (items of this
	// instance's creates in flight are spared however long they take).
	// Zero means 1 minute; negative means no grace. With an Inventory keep
	// it longer than a Create takes.
	OrphanGracePeriod time.Duration
	// MaxConcurrentCreates limits the Create calls in flight. Zero means
	// MaxSize.
	MaxConcurrentCreates int
	// MaxConcurrentDestroys limits the orphans one Reconcile destroys at
	// once. Zero means 4.
	MaxConcurrentDestroys int
	// CreateTimeout bounds each Create and Check call. Zero means 1 minute.
	CreateTimeout time.Duration
	// DestroyTimeout bounds each Destroy call. Zero means 30 seconds.
	DestroyTimeout time.Duration
	// CleanupOnStart destroys, once the pool has started, every listed item
	// nobody knows that was created before the start: the leftovers of an
	// earlier process. Warm creates wait for it. It needs a [Lister].
	CleanupOnStart bool
	// Owned, if set, receives the IDs of would-be orphans and returns those
	// owned outside the pool (detached items the application recorded):
	// Reconcile spares them. An error spares them all for that pass. Nil
	// means the pool owns everything the [Lister] lists.
	Owned func(ctx context.Context, ids []string) (owned []string, err error)
	// Inventory shares the idle set and item records with the pool
	// instances of other processes (see pool/shared). Nil keeps them in
	// this pool's memory.
	Inventory shared.Inventory
	// Instance names this instance in the Inventory. Empty means a random
	// name.
	Instance string
	// Clock is the time source; nil means real time.
	Clock clock.Clock
	// OnEvent receives lifecycle events, in order, on a goroutine of the
	// pool's, outside its locks; it may call the pool.
	OnEvent func(Event)
	// EventQueue is how many events may wait for OnEvent before new ones
	// are dropped (Stats.EventsDropped). Zero means 1024.
	EventQueue int
	// Logger receives create and destroy failures; nil logs nothing.
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
		{"LifetimeJitter", int64(o.LifetimeJitter)}, {"MaxConcurrentCreates", int64(o.MaxConcurrentCreates)},
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
	// A negative duration is off, which the pool spells 0 from here on.
	off := func(d *time.Duration, def time.Duration) {
		switch {
		case *d == 0:
			*d = def
		case *d < 0:
			*d = 0
		}
	}
	off(&o.IdleTimeout, defaultIdleTimeout)
	maxLifetime := fmt.Sprintf("MaxLifetime (%v)", o.MaxLifetime)
	if o.MaxLifetime == 0 {
		maxLifetime = fmt.Sprintf("MaxLifetime (%v, the default)", time.Duration(defaultMaxLifetime))
	}
	off(&o.MaxLifetime, defaultMaxLifetime)
	off(&o.WarmTTL, 0) // zero: MaxLifetime, which needs no check of its own
	off(&o.OrphanGracePeriod, defaultOrphanGracePeriod)
	maxSize := fmt.Sprintf("MaxSize (%d)", o.MaxSize)
	if o.MaxSize == 0 {
		o.MaxSize = max(defaultMaxSize, o.MinIdle)
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
		return o, errs.Invalid(ErrInvalid, "pool: LifetimeJitter (%v) needs a MaxLifetime, and %s is none", o.LifetimeJitter, maxLifetime)
	case o.LifetimeJitter > 0 && o.LifetimeJitter >= o.MaxLifetime:
		return o, errs.Invalid(ErrInvalid, "pool: LifetimeJitter (%v) >= %s", o.LifetimeJitter, maxLifetime)
	case o.MaxConcurrentCreates > o.MaxSize:
		return o, errs.Invalid(ErrInvalid, "pool: MaxConcurrentCreates (%d) > %s", o.MaxConcurrentCreates, maxSize)
	}
	if o.MaxConcurrentCreates == 0 {
		o.MaxConcurrentCreates = o.MaxSize
	}
	if o.MaxConcurrentDestroys == 0 {
		o.MaxConcurrentDestroys = defaultMaxConcurrentDestroys
	}
	if o.HealthCheckInterval == 0 {
		o.HealthCheckInterval = defaultHealthCheckInterval
	}
	if o.JanitorInterval == 0 {
		o.JanitorInterval = defaultJanitorInterval
	}
	if o.CreateTimeout == 0 {
		o.CreateTimeout = defaultCreateTimeout
	}
	if o.DestroyTimeout == 0 {
		o.DestroyTimeout = defaultDestroyTimeout
	}
	if o.EventQueue == 0 {
		o.EventQueue = event.DefaultSize
	}
	if o.Clock == nil {
		o.Clock = clock.New()
	}
	return o, nil
}
