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

// Options configures a Pool. A zero field means the default stated on it.
type Options struct {
	MinIdle int // the warm target: idle items, creates in flight included; zero means none
	MaxIdle int // caps idle items; one released beyond it is destroyed; zero means MaxSize
	// MaxSize caps this instance's items in use, idle, being created or destroyed;
	// Acquire waits at it. Zero means 10, or MinIdle if larger; a [Group] requires it.
	MaxSize int
	// IdleTimeout destroys idle items above MinIdle unused this long.
	// Zero means 30 minutes; negative, never.
	IdleTimeout time.Duration
	// MaxLifetime is each item's TTL from creation, enforced on acquire, on release
	// and by the janitor. Zero means 1 hour; negative, none.
	MaxLifetime time.Duration
	// LifetimeJitter shortens each MaxLifetime by a random [0, LifetimeJitter), so
	// items created together expire apart. Must be below MaxLifetime; zero means none.
	LifetimeJitter time.Duration
	// WarmTTL replaces an idle item never used this long after its creation.
	// Zero means MaxLifetime; negative, none.
	WarmTTL             time.Duration
	HealthCheckInterval time.Duration // CheckHealth period; zero means 30 seconds; negative, never
	// CheckOnAcquire has Acquire check an idle, not fresh, item with the [Checker] and
	// take another if it fails: a Check per acquire, for failures no [Watcher] reports.
	CheckOnAcquire  bool
	JanitorInterval time.Duration // how often Tick runs; zero means 30 seconds; negative, no janitor
	// OrphanGracePeriod spares an unknown listed item this long after its creation, as it may
	// still be being recorded (this instance's creates in flight are always spared). Zero means
	// 1 minute; negative, none. With an Inventory keep it longer than a Create takes.
	OrphanGracePeriod     time.Duration
	MaxConcurrentCreates  int           // limits the Create calls in flight; zero means MaxSize
	MaxConcurrentDestroys int           // limits the orphans one Reconcile destroys at once; zero means 4
	CreateTimeout         time.Duration // bounds each Create and Check call; zero means 1 minute
	DestroyTimeout        time.Duration // bounds each Destroy call; zero means 30 seconds
	// CleanupOnStart destroys, at start and before warm creates, every listed item
	// nobody knows created before the start: an earlier process's. Needs a [Lister].
	CleanupOnStart bool
	// Owned returns the would-be orphans (by ID) owned outside the pool, such as detached
	// items, for Reconcile to spare; an error spares all. Nil means the pool owns them all.
	Owned func(ctx context.Context, ids []string) (owned []string, err error)
	// Inventory shares the idle set and item records with other processes' pools (pool/shared);
	// MinIdle and MaxIdle then count every instance's idle items. Nil keeps them in memory.
	Inventory shared.Inventory
	Instance  string      // names this instance in the Inventory; empty means a random name
	Clock     clock.Clock // the time source; nil means real time
	// OnEvent receives events in order on a pool goroutine, outside its locks; it may call the pool.
	OnEvent    func(Event)
	EventQueue int          // events that may wait for OnEvent before new ones drop; zero means 1024
	Logger     *slog.Logger // receives create and destroy failures; nil logs nothing
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
