package ttl

import (
	"log/slog"
	"strconv"
	"time"
)

// defaultEventQueue is the capacity of the queue that carries events to
// OnEvent when TrackerOptions.EventQueue or RunnerOptions.EventQueue is 0.
const defaultEventQueue = 1024

// EventKind says what an Event reports.
type EventKind int

const (
	// EventFlush: a Tracker flushed Count activities, or with Err, kept
	// them for the next flush.
	EventFlush EventKind = iota + 1
	// EventExpire: Rule set the desired state of entity ID to Then.
	EventExpire
	// EventRuleError: applying Rule failed with Err; the other rules still ran.
	EventRuleError
	// EventRuleSkipped: a Runner skipped Rule, a SinceLastActivity rule
	// (see [Runner.Tick]); Err says why, if something failed.
	EventRuleSkipped
	// EventBufferLost: a Lossy Buffer lost its contents. A Runner holds its
	// idle rules; a Tracker resends the Count activities it retains.
	EventBufferLost
)

// String returns the kind's stable name for logs and metric labels
// ("flush", "rule_error"), or "EventKind(N)" for an unknown kind.
func (k EventKind) String() string {
	switch k {
	case EventFlush:
		return "flush"
	case EventExpire:
		return "expire"
	case EventRuleError:
		return "rule_error"
	case EventRuleSkipped:
		return "rule_skipped"
	case EventBufferLost:
		return "buffer_lost"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is what a Tracker or Runner reports to its OnEvent option: in
// order, from one goroutine, outside every lock, so the callback may call
// its reporter and never delays a flush or tick. At most EventQueue events
// wait, and one kind at most seven eighths of them (a burst of EventExpire
// leaves room for the rare kinds); the rest are dropped and counted in the
// Stats' EventsDropped. Close delivers the queued events and waits for
// OnEvent to return.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// Time is when it happened, on the reporter's clock.
	Time time.Time
	// ID is the entity (EventExpire).
	ID string
	// Rule is the rule's name (EventExpire, EventRuleError, EventRuleSkipped).
	Rule string
	// Then is the desired state the rule set (EventExpire).
	Then string
	// Count is the number of activities (EventFlush, EventBufferLost).
	Count int
	// Err is the failure, if any.
	Err error
}

// discardLogger is the Logger used when Options.Logger is nil.
var discardLogger = slog.New(slog.DiscardHandler)
