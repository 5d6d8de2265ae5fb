package lease

import (
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/event"
)

// The defaults of Options.
const (
	defaultTTL           = 5 * time.Minute
	defaultGrace         = 45 * time.Second
	defaultSweepInterval = 10 * time.Second
	defaultSweepBatch    = 100
	defaultEventQueue    = 1024
)

// Options configure a Manager. The zero value means the defaults.
type Options struct {
	// Store keeps the leases. Nil means NewMemoryStore(Clock). Share
	// one server store (redislease, sqllease) between processes to share
	// the budget.
	Store Store
	// TTL is the default absolute lifetime of a lease (Request.TTL
	// overrides it). Zero means 5 minutes; negative is an error.
	TTL time.Duration
	// Grace is the default heartbeat grace (Request.Grace overrides it).
	// Zero means 45 seconds; negative is an error.
	Grace time.Duration
	// SweepInterval is how often the background loop calls Sweep. Zero
	// means 10 seconds; negative turns the loop off, and records of expired
	// leases are then reclaimed (and EventExpired fired) only when Sweep is
	// called. Expired leases are absent at once whatever the interval; the
	// sweep only reclaims their records and fires EventExpired.
	SweepInterval time.Duration
	// SweepBatch is how many expired leases one Store.Sweep call may take;
	// Sweep repeats the call while batches are full. Zero means 100;
	// negative is an error.
	SweepBatch int
	// AllowMultiplePerHolder turns off the one-live-lease-per-holder rule,
	// which is on by default.
	AllowMultiplePerHolder bool
	// Gate, if set, is the admission gate asked before every grant
	// (hysteresis.Gate is one); while it reports Overloaded, grants are
	// rejected with ErrOverloaded.
	Gate interface{ Overloaded() bool }
	// Clock is the Manager's time source: the sweep ticker, event times and
	// KeepAlive's local deadlines. Nil means real time. Lease decisions use
	// the store's clock (for the default memory store, this one).
	Clock clock.Clock
	// OnEvent receives lifecycle events in order, on a goroutine of the
	// Manager's, never under a lock, so it may call the Manager. Events
	// come from Grant and Heartbeat, which never wait for it: when the
	// queue (EventQueue) is full an event is dropped and counted in
	// Stats.EventsDropped. Close delivers the events queued before it.
	OnEvent func(Event)
	// EventQueue is the capacity of the event queue. Zero means 1024;
	// negative is an error.
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
		{"TTL", &o.TTL, defaultTTL},
		{"Grace", &o.Grace, defaultGrace},
	} {
		if *f.v < 0 {
			return o, errs.Invalid(ErrInvalid, "lease: %s (%v) must not be negative", f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if o.SweepInterval == 0 {
		o.SweepInterval = defaultSweepInterval
	}
	if o.SweepBatch < 0 {
		return o, errs.Invalid(ErrInvalid, "lease: SweepBatch (%d) must not be negative", o.SweepBatch)
	}
	if o.SweepBatch == 0 {
		o.SweepBatch = defaultSweepBatch
	}
	if err := event.CheckSize("lease", "EventQueue", o.EventQueue); err != nil {
		return o, errs.Invalid(ErrInvalid, "%v", err)
	}
	if o.EventQueue == 0 {
		o.EventQueue = defaultEventQueue
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
