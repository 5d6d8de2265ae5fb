package expiry

import (
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/event"
)

// Default values of Options and MapOptions; a zero field means its default.
const (
	DefaultInterval   = time.Second
	DefaultSampleSize = 20
	DefaultThreshold  = 0.25
	DefaultBudget     = 0.25
	DefaultEventQueue = 1024
	// DefaultMinShards is the least number of shards MapOptions.Shards
	// defaults to (16 × GOMAXPROCS, at least DefaultMinShards).
	DefaultMinShards = 64
)

// Options tunes active expiry. The zero value means the defaults, which are
// the classic Redis algorithm of a mini Redis: every second, sample 20 keys
// that carry a deadline, delete the expired ones and repeat while more than
// 25 % were expired, for at most a quarter of the interval.
type Options struct {
	// Interval is the period of active expiry cycles. 0 means
	// DefaultInterval (1 s).
	Interval time.Duration
	// SampleSize is the number of keys with a deadline sampled per round.
	// 0 means DefaultSampleSize (20).
	SampleSize int
	// Threshold: a cycle samples another round at once while the expired
	// share of the keys sampled by its last rounds (up to 8, so that one
	// lucky 20-key round does not end a mass expiry) is above Threshold.
	// It must be in [0, 1); 0 means DefaultThreshold (0.25) (use a tiny
	// value such as 1e-9 to repeat while any sampled key was expired).
	Threshold float64
	// Budget is the share of Interval one cycle may run (Redis uses 25 % of
	// its CPU time). A cycle that spends it stops and counts a budget hit;
	// the next tick resumes the work. It must be in (0, 1]; 0 means
	// DefaultBudget (0.25).
	Budget float64
	// MaxRounds, when positive, also caps the rounds of one cycle; hitting
	// it counts as a budget hit. It makes the cost of a cycle independent of
	// the machine (tests, very small intervals). Default 0: time budget only.
	MaxRounds int
	// Manual disables the background goroutine: nothing expires actively
	// unless Cycle is called. Passive expiry still applies.
	Manual bool
	// NoCatchUp keeps the background goroutine to one cycle per Interval
	// even when cycles end on their budget. By default such a cycle is
	// followed by another after a pause as long as itself (at least 1 ms),
	// until one ends below the threshold: during a mass expiry active
	// expiry then uses up to half a processor instead of Budget of one,
	// still one small batch at a time, as Redis adds fast cycles while its
	// stale estimate is high.
	NoCatchUp bool
	// Clock is the time source; nil means real time. Deadlines are kept as
	// offsets from the clock's reading at construction, so real time is
	// immune to wall-clock jumps.
	Clock clock.Clock
	// Logger receives debug records of budget-limited cycles and warnings
	// of dropped expiry events; nil means no logging.
	Logger *slog.Logger
}

// MapOptions configures a Map: the active expiry tuning, embedded, plus what
// only a Map has. The zero value means the defaults.
//
// OnEvent lives here, set once at construction, rather than in Options or a
// setter, because its type depends on the Map's key and value types and
// because a callback fixed before the first key is stored can never miss an
// expiry or race with one.
type MapOptions[K comparable, V any] struct {
	// Options tunes the Map's active expiry.
	Options

	// Shards is the number of shards, rounded up to a power of two. 0
	// means 16 × GOMAXPROCS, at least DefaultMinShards (64).
	Shards int

	// OnEvent, if set, receives every key found expired, with the Reason.
	// Events reach it in order on one goroutine, outside every lock,
	// through a queue of EventQueue events: when OnEvent falls behind and
	// the queue is full, events are dropped and counted in
	// Stats.EventsDropped rather than slowing expiry or readers down. It
	// may call the Map's methods, except Close with a ctx that never ends:
	// Close waits for OnEvent to return.
	OnEvent func(Event[K, V])

	// EventQueue is the capacity of the queue that carries events to
	// OnEvent. 0 means DefaultEventQueue (1024); it must not be negative
	// and is at most 1<<20 (the queue is allocated up front).
	EventQueue int
}

// withDefaults validates o and fills in the defaults. Errors name the field.
func (o MapOptions[K, V]) withDefaults() (MapOptions[K, V], error) {
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
		o.EventQueue = DefaultEventQueue
	}
	return o, nil
}

// Redis7Options returns the tuning of Redis 7's active expiry at its default
// effort: a cycle every 100 ms (hz 10), 20 keys per sample, repeat while more
// than 10 % of the sample was expired, at most 25 % of the interval per
// cycle. Compared with the defaults it keeps fewer stale keys (at most about
// 10 % of the keys with a deadline) for more frequent, shorter cycles.
func Redis7Options() Options {
	return Options{
		Interval:   100 * time.Millisecond,
		SampleSize: 20,
		Threshold:  0.10,
		Budget:     0.25,
	}
}

// withDefaults validates o and fills in the defaults. Errors name the field.
func (o Options) withDefaults() (Options, error) {
	switch {
	case o.Interval < 0:
		return o, errs.Invalid(ErrInvalid, "expiry: Interval (%v) is negative", o.Interval)
	case o.SampleSize < 0:
		return o, errs.Invalid(ErrInvalid, "expiry: SampleSize (%d) is negative", o.SampleSize)
	case o.Threshold < 0 || o.Threshold >= 1 || o.Threshold != o.Threshold:
		return o, errs.Invalid(ErrInvalid, "expiry: Threshold (%v) is not in [0, 1)", o.Threshold)
	case o.Budget < 0 || o.Budget > 1 || o.Budget != o.Budget:
		return o, errs.Invalid(ErrInvalid, "expiry: Budget (%v) is not in (0, 1]", o.Budget)
	case o.MaxRounds < 0:
		return o, errs.Invalid(ErrInvalid, "expiry: MaxRounds (%d) is negative", o.MaxRounds)
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.SampleSize == 0 {
		o.SampleSize = DefaultSampleSize
	}
	if o.Threshold == 0 {
		o.Threshold = DefaultThreshold
	}
	if o.Budget == 0 {
		o.Budget = DefaultBudget
	}
	return o, nil
}
