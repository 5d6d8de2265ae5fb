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
	// EventFlush: a Tracker handed Count activities to its Sink. With Err
	// set the flush failed and Count activities were kept for the next one.
	EventFlush EventKind = iota + 1
	// EventExpire: Rule set the desired state of entity ID to Then.
	EventExpire
	// EventRuleError: applying Rule failed with Err; the other rules still ran.
	EventRuleError
	// EventRuleSkipped: a Runner did not apply Rule, a SinceLastActivity
	// rule, because the Store's last activity could be stale: the drain did
	// not reach the end of the Buffer (Err says why, if something failed),
	// the Buffer was lost, or a hold is in force; see Runner.Tick.
	EventRuleSkipped
	// EventBufferLost: a Lossy Buffer's generation changed, so activity it
	// held was lost. A Runner then holds its idle rules (see
	// RunnerOptions.Hold; TickResult.HeldUntil says until when); a Tracker
	// sends again the Count activities it still retains.
	EventBufferLost
)

// String returns the kind's stable lower_snake name ("flush", "rule_error"),
// usable as a log field or metric label, or "EventKind(N)" for an unknown
// kind.
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

// Event is what Tracker and Runner report to their OnEvent option.
//
// Events are delivered asynchronously: Flush and Tick queue them, and one
// goroutine per Tracker or Runner calls OnEvent with them in order, outside
// every lock. The queue holds EventQueue events; when OnEvent falls that
// far behind, further events are dropped and counted in the Stats'
// EventsDropped, so a slow callback never delays a flush or a tick, and a
// callback may call the Tracker or Runner that reports to it. Events of
// one kind may fill at most seven eighths of the queue (all of it below 8
// events): a burst of EventExpire when many entities expire on one tick is
// cut there, and leaves room for the rare events that say why the rules
// wait or fail (EventBufferLost, EventRuleSkipped, EventRuleError). Close
// delivers the events queued before it and waits for OnEvent to return.
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
	// Count is the number of activities concerned.
	Count int
	// Err is the failure, if any.
	Err error
}

// discardLogger is the Logger used when Options.Logger is nil.
var discardLogger = slog.New(slog.DiscardHandler)
