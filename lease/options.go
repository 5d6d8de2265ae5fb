package lease

import (
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/event"
)

// Defaults for Options: a camera admission server's lease of 300 s with a
// 45 s heartbeat grace, cleaned up every 10 s.
const (
	// DefaultTTL is the absolute lifetime of a lease when Options.TTL is 0.
	DefaultTTL = 300 * time.Second
	// DefaultGrace is the heartbeat grace when Options.Grace is 0.
	DefaultGrace = 45 * time.Second
	// DefaultSweepInterval is the sweep loop's period when
	// Options.SweepInterval is 0.
	DefaultSweepInterval = 10 * time.Second
	// DefaultSweepBatch is the Store.Sweep limit when Options.SweepBatch
	// is 0.
	DefaultSweepBatch = 100
	// DefaultEventQueue is the event queue's capacity when
	// Options.EventQueue is 0.
	DefaultEventQueue = 1024
)

// Gate is the admission gate a Manager asks before every grant.
// hysteresis.Gate satisfies it.
type Gate interface {
	// Overloaded reports whether new grants must be refused.
	Overloaded() bool
}

// Options configure a Manager. The zero value means the defaults.
type Options struct {
	// Store keeps the leases. Nil means a new MemoryStore on Clock. Share
	// one server store (redislease, sqllease) between processes to share
	// the budget.
	Store Store
	// TTL is the default absolute lifetime of a lease (Request.TTL
	// overrides it). 0 means DefaultTTL; negative is an error.
	TTL time.Duration
	// Grace is the default heartbeat grace (Request.Grace overrides it).
	// 0 means DefaultGrace; negative is an error.
	Grace time.Duration
	// SweepInterval is how often the background loop calls Sweep. 0 means
	// DefaultSweepInterval; negative is an error. Expired leases are absent
	// at once whatever the interval; the sweep only reclaims their records
	// and fires EventExpired.
	SweepInterval time.Duration
	// ManualSweep disables the background loop: records of expired leases
	// are reclaimed (and EventExpired fired) only when Sweep is called.
	ManualSweep bool
	// SweepBatch is how many expired leases one Store.Sweep call may take;
	// Sweep repeats the call while batches are full. 0 means
	// DefaultSweepBatch; negative is an error.
	SweepBatch int
	// AllowMultiplePerHolder turns off the one-live-lease-per-holder rule,
	// which is on by default.
	AllowMultiplePerHolder bool
	// Gate, if set, is asked before every grant; while it reports
	// Overloaded, grants are rejected with ReasonOverloaded.
	Gate Gate
	// Clock is the Manager's time source: the sweep ticker, event times and
	// KeepAlive's local deadlines. Nil means real time. Lease decisions use
	// the store's clock (for the default MemoryStore, this one).
	Clock clock.Clock
	// OnEvent receives lifecycle events in order, on a goroutine of the
	// Manager's, never under a lock, so it may call the Manager. Events
	// come from Grant and Heartbeat, which never wait for it: when the
	// queue (EventQueue) is full an event is dropped and counted in
	// Stats.EventsDropped. Close delivers the events queued before it.
	OnEvent func(Event)
	// EventQueue is the capacity of the event queue. 0 means
	// DefaultEventQueue; negative is an error.
	EventQueue int
	// Logger receives sweep summaries (debug), store errors in the
	// background loop and the first dropped event (warn). Nil means
	// discard.
	Logger *slog.Logger
}

// resolve fills the defaults and checks the fields.
func (o Options) resolve(budget int) (Options, error) {
	if budget <= 0 {
		return o, errs.Invalid(ErrInvalid, "lease: budget (%d) must be > 0", budget)
	}
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"TTL", &o.TTL, DefaultTTL},
		{"Grace", &o.Grace, DefaultGrace},
		{"SweepInterval", &o.SweepInterval, DefaultSweepInterval},
	} {
		if *f.v < 0 {
			return o, errs.Invalid(ErrInvalid, "lease: %s (%v) must not be negative", f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if o.SweepBatch < 0 {
		return o, errs.Invalid(ErrInvalid, "lease: SweepBatch (%d) must not be negative", o.SweepBatch)
	}
	if o.SweepBatch == 0 {
		o.SweepBatch = DefaultSweepBatch
	}
	if err := event.CheckSize("lease", "EventQueue", o.EventQueue); err != nil {
		return o, errs.Invalid(ErrInvalid, "%v", err)
	}
	if o.EventQueue == 0 {
		o.EventQueue = DefaultEventQueue
	}
	if o.Clock == nil {
		o.Clock = clock.New()
	}
	if o.Store == nil {
		o.Store = NewMemoryStore(o.Clock)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}
