package hysteresis

import (
	"context"
	"log/slog"
	"time"

	"github.com/ttlkit/ttlkit/internal/event"
)

// Reason says why a Gate changed state. Its values are stable strings,
// usable as metric labels.
type Reason string

// Reasons carried by Event.
const (
	// ReasonTrip: a signal reached its Trip threshold.
	ReasonTrip Reason = "trip"
	// ReasonWarn: a signal reached its Warn threshold.
	ReasonWarn Reason = "warn"
	// ReasonCalm: every signal fell back below Warn (Warning to Normal).
	ReasonCalm Reason = "calm"
	// ReasonRecovered: every signal stayed below Recover for the whole hold.
	ReasonRecovered Reason = "recovered"
	// ReasonStale: a signal went stale (see StalePolicy).
	ReasonStale Reason = "stale"
)

// DefaultEventQueue is the capacity of the queue that carries events to
// Options.OnEvent when Options.EventQueue is 0.
const DefaultEventQueue = 1024

// Event is one state transition of a Gate, as delivered to Options.OnEvent.
type Event struct {
	// Time is when the gate changed state, on the gate's clock. A
	// transition that time alone causes (a hold ending, a signal going
	// stale) happened when it fell due, even if the gate noticed later.
	Time time.Time
	// From and To are the states before and after.
	From, To State
	// Reason says why.
	Reason Reason
	// Signal names the signal that caused the change; "" for ReasonCalm and
	// ReasonRecovered, which every signal causes together.
	Signal string
	// Value is that signal's last sample and Threshold the threshold it
	// crossed (Trip or Warn); both 0 when Signal is "" or the signal is stale.
	Value, Threshold float64
}

// newQueue returns the queue that delivers opts' events: to the Logger, at
// Info level, then to OnEvent. It is nil when there is neither.
func newQueue(opts Options) *event.Queue[Event] {
	fn, log := opts.OnEvent, opts.Logger
	if log != nil {
		user := fn
		fn = func(e Event) {
			log.LogAttrs(context.Background(), slog.LevelInfo, "hysteresis: state changed",
				slog.String("from", e.From.String()), slog.String("to", e.To.String()),
				slog.String("reason", string(e.Reason)), slog.String("signal", e.Signal),
				slog.Float64("value", e.Value), slog.Float64("threshold", e.Threshold))
			if user != nil {
				user(e)
			}
		}
	}
	return event.New(fn, opts.EventQueue, log, "hysteresis")
}
