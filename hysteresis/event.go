package hysteresis

import (
	"context"
	"log/slog"
	"time"

	"github.com/ttlkit/ttlkit/internal/event"
)

// Event is one state transition of a Gate, as delivered to Options.OnEvent.
type Event struct {
	// Time is when the gate changed state, on the gate's clock. A
	// transition that time alone causes (a hold ending, a signal going
	// stale) happened when it fell due, even if the gate noticed later.
	Time time.Time
	// From and To are the states before and after.
	From, To State
	// Signal names the signal that caused the change: the one that reached
	// its Trip (To is Overloaded) or Warn threshold (To is Warning), or
	// went stale. It is "" when the gate calmed down (To is Normal) or
	// recovered (From is Overloaded), which every signal causes together.
	Signal string
	// Stale reports that Signal went stale (see [StalePolicy]) rather than
	// crossed a threshold.
	Stale bool
	// Value is that signal's last sample and Threshold the threshold it
	// crossed (Trip or Warn); both 0 when Signal is "" or the signal is stale.
	Value, Threshold float64
}

// reason names why the gate changed state, for logs: trip, warn, calm,
// recovered or stale.
func (e Event) reason() string {
	switch {
	case e.Stale:
		return "stale"
	case e.From == Overloaded:
		return "recovered"
	case e.To == Overloaded:
		return "trip"
	case e.To == Warning:
		return "warn"
	}
	return "calm"
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
				slog.String("reason", e.reason()), slog.String("signal", e.Signal),
				slog.Float64("value", e.Value), slog.Float64("threshold", e.Threshold))
			if user != nil {
				user(e)
			}
		}
	}
	return event.New(fn, opts.EventQueue, log, "hysteresis")
}
