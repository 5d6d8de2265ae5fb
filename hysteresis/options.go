package hysteresis

import (
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/event"
)

// StalePolicy says what a stale or missing signal does to a Gate, beyond
// blocking recovery (which every policy does). See the package doc.
type StalePolicy int

const (
	// StaleWarn reports Warning instead of Normal while any signal is stale.
	// It is the default.
	StaleWarn StalePolicy = iota
	// StaleTrip trips the gate to Overloaded when a signal is stale.
	StaleTrip
	// StaleKeep adds nothing: the state stays what the last values give,
	// and only recovery is blocked.
	StaleKeep
)

// Options tunes a Gate. The zero value is valid: a hold of 1 minute,
// signals stale after 1 minute, StaleWarn, real time, no callback.
type Options struct {
	// Hold is how long every signal must stay below its Recover threshold
	// before an Overloaded gate recovers. Zero means 1 minute; a negative
	// Hold turns the hold off: the gate recovers at the first moment every
	// signal is below Recover.
	Hold time.Duration

	// StaleAfter is how long a signal may go without a sample before it is
	// stale. Zero means 1 minute; a negative StaleAfter turns staleness
	// off.
	StaleAfter time.Duration

	// Stale is what a stale or missing signal does. Zero means StaleWarn.
	Stale StalePolicy

	// OnEvent, when set, receives every state transition, in order, on
	// the gate's own goroutine, outside its lock (see the package doc). It
	// may call the gate's methods.
	OnEvent func(Event)

	// EventQueue is the capacity of the queue that carries events to
	// OnEvent and Logger; when it is full, events are dropped and counted
	// in Stats.EventsDropped. Zero means 1024; negative is an error.
	EventQueue int

	// Clock is the source of time. nil means real time.
	Clock clock.Clock

	// Logger, when set, logs every transition at Info level, from the same
	// goroutine as OnEvent, and the first dropped event at Warn. nil means
	// no logging.
	Logger *slog.Logger
}

func (o Options) withDefaults() (Options, error) {
	switch o.Stale {
	case StaleWarn, StaleTrip, StaleKeep:
	default:
		return o, errs.Invalid(ErrInvalid, "hysteresis: Stale (%d) is not a known policy", o.Stale)
	}
	if err := event.CheckSize("hysteresis", "EventQueue", o.EventQueue); err != nil {
		return o, errs.Invalid(ErrInvalid, "%v", err)
	}
	switch {
	case o.Hold == 0:
		o.Hold = time.Minute
	case o.Hold < 0:
		o.Hold = 0 // off
	}
	switch {
	case o.StaleAfter == 0:
		o.StaleAfter = time.Minute
	case o.StaleAfter < 0:
		o.StaleAfter = 0 // off
	}
	if o.Clock == nil {
		o.Clock = clock.New()
	}
	return o, nil
}
