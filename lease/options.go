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

// Options configure a Manager; zero means the default. A negative value is
// an error matching [ErrInvalid], but a negative SweepInterval turns the
// sweep loop off (only calls of [Manager.Sweep] then reclaim expired
// leases). OnEvent gets events in order on the Manager's goroutine, outside
// locks, so it may call the Manager; nothing waits for it, and an event that
// finds the queue full is dropped and counted in Stats.EventsDropped. Close
// delivers the events queued before it. Clock drives the sweep ticker,
// event times and KeepAlive's local deadlines, not lease decisions.
type Options struct {
	Store                  Store         // nil means NewMemoryStore(Clock); share one to share its budget
	TTL                    time.Duration // a lease's lifetime when its Request has none; 0 means 5 minutes
	Grace                  time.Duration // heartbeat grace when the Request has none; 0 means 45 seconds
	SweepInterval          time.Duration // how often the loop calls Sweep; 0 means 10 seconds
	SweepBatch             int           // most expired leases per Store.Sweep call; 0 means 100
	AllowMultiplePerHolder bool          // turns off the one-live-lease-per-holder rule
	// Gate, if set, is asked before every grant (hysteresis.Gate is one);
	// while it reports Overloaded, grants fail with ErrOverloaded.
	Gate       interface{ Overloaded() bool }
	Clock      clock.Clock  // nil means real time
	OnEvent    func(Event)  // lifecycle events, in order
	EventQueue int          // the event queue's capacity; 0 means 1024
	Logger     *slog.Logger // sweeps (debug), loop errors, a first dropped event (warn); nil discards
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
