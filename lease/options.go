package lease

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"
)

// Defaults for Options, from seed 003.
const (
	DefaultTTL           = 300 * time.Second
	DefaultGrace         = 45 * time.Second
	DefaultSweepInterval = 10 * time.Second
	DefaultSweepBatch    = 100
	DefaultEventQueue    = 1024
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
	// overrides it). Default 300s.
	TTL time.Duration
	// Grace is the default heartbeat grace (Request.Grace overrides it).
	// Default 45s.
	Grace time.Duration
	// SweepInterval is how often the background loop calls Sweep. Default
	// 10s. Expired leases are absent at once whatever the interval; the
	// sweep only reclaims their records and fires expired events.
	SweepInterval time.Duration
	// ManualSweep disables the background loop: records of expired leases
	// are reclaimed (and expired events fired) only when Sweep is called.
	ManualSweep bool
	// SweepBatch is how many expired leases one Store.Sweep call may take.
	// Default 100; Sweep repeats the call while batches are full.
	SweepBatch int
	// AllowMultiplePerHolder turns off the one-live-lease-per-holder rule,
	// which is on by default.
	AllowMultiplePerHolder bool
	// Gate, if set, is asked before every grant; while it reports
	// Overloaded, grants are rejected with ReasonOverloaded.
	Gate Gate
	// Clock is the Manager's time source: the sweep ticker and KeepAlive's
	// local deadlines. Nil means real time. Lease decisions use the store's
	// clock (for the default MemoryStore, this one).
	Clock clock.Clock
	// OnEvent receives lifecycle events in order, on a goroutine of the
	// Manager's, never under a lock. When the queue (EventQueue) is full an
	// event is dropped and counted in Stats.EventsDropped: a slow callback
	// never stalls Grant or Heartbeat.
	OnEvent func(Event)
	// EventQueue is the capacity of the event queue. Default 1024.
	EventQueue int
	// Logger, if set, receives sweep summaries (debug), store errors in the
	// background loop and dropped events (warn).
	Logger *slog.Logger
}

// resolve fills the defaults and checks the fields.
func (o Options) resolve(budget int) (Options, error) {
	if budget <= 0 {
		return o, fmt.Errorf("lease: budget (%d) must be > 0", budget)
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
			return o, fmt.Errorf("lease: %s (%v) must not be negative", f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if o.SweepBatch < 0 {
		return o, fmt.Errorf("lease: SweepBatch (%d) must not be negative", o.SweepBatch)
	}
	if o.SweepBatch == 0 {
		o.SweepBatch = DefaultSweepBatch
	}
	if o.EventQueue < 0 {
		return o, fmt.Errorf("lease: EventQueue (%d) must not be negative", o.EventQueue)
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
	return o, nil
}
