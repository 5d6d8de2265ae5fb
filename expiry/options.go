package expiry

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"
)

// Default values of Options; a zero field means its default.
const (
	DefaultInterval   = time.Second
	DefaultSampleSize = 20
	DefaultThreshold  = 0.25
	DefaultBudget     = 0.25
	DefaultEventQueue = 1024
)

// Options tunes active expiry. The zero value means the defaults, which are
// seed 004's algorithm: every second, sample 20 keys that carry a deadline,
// delete the expired ones and repeat while more than 25 % were expired, for at
// most a quarter of the interval.
type Options struct {
	// Interval is the period of active expiry cycles. Default 1 s.
	Interval time.Duration
	// SampleSize is the number of keys with a deadline sampled per round.
	// Default 20.
	SampleSize int
	// Threshold: a cycle samples another round at once while the expired
	// share of the keys sampled by its last rounds (up to 8, so that one
	// lucky 20-key round does not end a mass expiry) is above Threshold.
	// Default 0.25; it must be in [0, 1), and 0 means the default (use a
	// tiny value such as 1e-9 to repeat while any sampled key was expired).
	Threshold float64
	// Budget is the share of Interval one cycle may run (Redis uses 25 % of
	// its CPU time). A cycle that spends it stops and counts a budget hit;
	// the next tick resumes the work. Default 0.25; it must be in (0, 1].
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

	// EventQueue is the capacity of the queue that carries expiry events to
	// the OnExpire callback (Map only). When the queue is full the event is
	// dropped and counted in Stats.EventsDropped: expiry never waits for a
	// slow callback. Default 1024, at most 1<<20 (the queue is allocated
	// up front).
	EventQueue int
	// Shards is the number of shards of a Map, rounded up to a power of
	// two. Default 16 × GOMAXPROCS, at least 64.
	Shards int
}

// maxEventQueue bounds Options.EventQueue: the queue is allocated whole
// by NewMap, and a larger one would fail there instead of in validation.
const maxEventQueue = 1 << 20

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
		return o, fmt.Errorf("expiry: Interval (%v) is negative", o.Interval)
	case o.SampleSize < 0:
		return o, fmt.Errorf("expiry: SampleSize (%d) is negative", o.SampleSize)
	case o.Threshold < 0 || o.Threshold >= 1 || o.Threshold != o.Threshold:
		return o, fmt.Errorf("expiry: Threshold (%v) is not in [0, 1)", o.Threshold)
	case o.Budget < 0 || o.Budget > 1 || o.Budget != o.Budget:
		return o, fmt.Errorf("expiry: Budget (%v) is not in (0, 1]", o.Budget)
	case o.MaxRounds < 0:
		return o, fmt.Errorf("expiry: MaxRounds (%d) is negative", o.MaxRounds)
	case o.EventQueue < 0:
		return o, fmt.Errorf("expiry: EventQueue (%d) is negative", o.EventQueue)
	case o.EventQueue > maxEventQueue:
		return o, fmt.Errorf("expiry: EventQueue (%d) is above %d", o.EventQueue, maxEventQueue)
	case o.Shards < 0:
		return o, fmt.Errorf("expiry: Shards (%d) is negative", o.Shards)
	case o.Shards > 1<<16:
		return o, fmt.Errorf("expiry: Shards (%d) is above 65536", o.Shards)
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
	if o.EventQueue == 0 {
		o.EventQueue = DefaultEventQueue
	}
	return o, nil
}
