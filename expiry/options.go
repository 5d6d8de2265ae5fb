package expiry

import (
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/event"
)

// defaultInterval is Redis's: hz 10.
const defaultInterval = 100 * time.Millisecond

// Options tunes active expiry; the zero value means Redis's defaults.
type Options struct {
	// Interval is the period of active expiry cycles. Zero means 100 ms (Redis's hz 10); negative
	// runs no background cycles: active expiry happens only when Cycle is called.
	Interval time.Duration
	// SampleSize is the number of keys with a deadline sampled per round. Zero means 20.
	SampleSize int
	// Threshold is the expired share of a cycle's last samples above which it samples again (see
	// Expirer.Cycle); in [0, 1). Zero means 0.10, as Redis; 1e-9 repeats while any was expired.
	Threshold float64
	// Budget is how long one cycle may run before it stops and counts a budget hit. Zero means a
	// quarter of Interval, as Redis, or 25 ms when Interval is negative. It must not be negative,
	// nor above a positive Interval.
	Budget time.Duration
	// MaxRounds, when positive, also caps the rounds of one cycle, a cost independent of the
	// machine (tests, very small intervals); hitting it counts as a budget hit. Zero means no cap.
	MaxRounds int
	// NoCatchUp keeps the background goroutine to one cycle per Interval even when cycles end on
	// their budget. By default such a cycle is followed by another after a pause as long as itself
	// (at least 1 ms), until one ends below the threshold: a mass expiry then takes up to half a
	// processor instead of a quarter, one small batch at a time (Redis's fast cycles).
	NoCatchUp bool
	// Clock is the time source; nil means real time. Deadlines are kept as offsets from the
	// clock's reading at construction, so real time is immune to wall-clock jumps.
	Clock clock.Clock
	// Logger gets debug records of budget-limited cycles and warnings of dropped events; nil, none.
	Logger *slog.Logger
}

// MapOptions configures a Map: Options, plus what only a Map has; the zero
// value means the defaults.
type MapOptions[K comparable, V any] struct {
	// Options tunes the Map's active expiry.
	Options

	// Shards is the number of shards, rounded up to a power of two. Zero means 16 × GOMAXPROCS, ≥ 64.
	Shards int

	// OnEvent, if set, receives every key found expired, in order, outside every lock; when the
	// queue is full, events are dropped (Stats.EventsDropped). It may call the Map's methods, but not
	// Close with a ctx that never ends: Close waits for OnEvent to return.
	OnEvent func(Event[K, V])

	// EventQueue is the capacity of OnEvent's queue, allocated up front. Zero means 1024; it must
	// not be negative and is at most 1<<20.
	EventQueue int
}

// minShards is the least number of shards MapOptions.Shards defaults to.
const minShards = 64

// withDefaults validates o and fills in the defaults. Errors name the field.
func (o MapOptions[K, V]) withDefaults() (MapOptions[K, V], error) {
	// OnEvent is here, set once at construction, rather than in Options or a
	// setter, because its type depends on the Map's key and value types and
	// because a callback fixed before the first key is stored can never miss
	// an expiry or race with one.
	switch {
	case o.EventQueue < 0:
		return o, errs.Invalid(ErrInvalid, "expiry: EventQueue (%d) is negative", o.EventQueue)
	case o.EventQueue > event.MaxSize:
		return o, errs.Invalid(ErrInvalid, "expiry: EventQueue (%d) is above %d", o.EventQueue, event.MaxSize)
	case o.Shards < 0:
		return o, errs.Invalid(ErrInvalid, "expiry: Shards (%d) is negative", o.Shards)
	case o.Shards > 1<<16:
		return o, errs.Invalid(ErrInvalid, "expiry: Shards (%d) is above 65536", o.Shards)
	}
	var err error
	if o.Options, err = o.Options.withDefaults(); err != nil {
		return o, err
	}
	if o.EventQueue == 0 {
		o.EventQueue = event.DefaultSize
	}
	return o, nil
}

// withDefaults validates o and fills in the defaults. Errors name the field.
func (o Options) withDefaults() (Options, error) {
	switch {
	case o.SampleSize < 0:
		return o, errs.Invalid(ErrInvalid, "expiry: SampleSize (%d) is negative", o.SampleSize)
	case o.Threshold < 0 || o.Threshold >= 1 || o.Threshold != o.Threshold:
		return o, errs.Invalid(ErrInvalid, "expiry: Threshold (%v) is not in [0, 1)", o.Threshold)
	case o.Budget < 0:
		return o, errs.Invalid(ErrInvalid, "expiry: Budget (%v) is negative", o.Budget)
	case o.MaxRounds < 0:
		return o, errs.Invalid(ErrInvalid, "expiry: MaxRounds (%d) is negative", o.MaxRounds)
	}
	if o.Interval == 0 {
		o.Interval = defaultInterval
	}
	if o.Interval > 0 && o.Budget > o.Interval {
		return o, errs.Invalid(ErrInvalid, "expiry: Budget (%v) is above Interval (%v)", o.Budget, o.Interval)
	}
	if o.SampleSize == 0 {
		o.SampleSize = 20
	}
	if o.Threshold == 0 {
		o.Threshold = 0.10
	}
	if o.Budget == 0 {
		if o.Interval > 0 {
			o.Budget = o.Interval / 4
		} else {
			o.Budget = defaultInterval / 4
		}
	}
	return o, nil
}
