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
	// EventSync: a Runner moved Count activities from its Buffer into the
	// Store. With Err set the sync stopped there; the rest stays buffered.
	EventSync
	// EventExpire: Rule set the DesiredState of entity ID to Then.
	EventExpire
	// EventRuleError: applying Rule failed with Err; the other rules still ran.
	EventRuleError
	// EventWake: a Runner called Wake with Count ids; Err is what it returned.
	EventWake
	// EventRuleSkipped: a Runner did not apply Rule, a SinceLastActivity
	// rule, because the Store's LastActivityAt could be stale (Reason, and
	// Err when a failure caused it); see Runner.Tick.
	EventRuleSkipped
	// EventBufferLost: a Lossy Buffer's generation changed, so activity it
	// held was lost. A Runner then holds its idle rules (see
	// RunnerOptions.Hold; TickResult.HeldUntil says until when); a Tracker
	// sends again the Count activities it still retains.
	EventBufferLost
)

// Reason says why a Runner skipped its SinceLastActivity rules on a tick
// (Event.Reason, TickResult.SkipReason). Values are stable lower_snake
// strings, usable as log fields and metric labels.
type Reason string

const (
	// ReasonMergeFailed: activity read from the Buffer could not be merged
	// into the Store.
	ReasonMergeFailed Reason = "merge_failed"
	// ReasonBufferError: reading or removing from the Buffer failed, so the
	// drain did not reach the end of the buffer.
	ReasonBufferError Reason = "buffer_error"
	// ReasonDrainIncomplete: the drain did not reach the end of the buffer
	// within one Interval (or its context ended).
	ReasonDrainIncomplete Reason = "drain_incomplete"
	// ReasonBufferLost: the Buffer lost its contents (a Lossy buffer's
	// generation changed) since the last tick, or during this one's drain.
	ReasonBufferLost Reason = "buffer_lost"
	// ReasonHeld: the drain completed, but an earlier tick found the
	// Buffer lost or unreadable, the hold that started then is not over
	// (see RunnerOptions.Hold), and the Trackers may not all have flushed
	// (or sent again) what they hold.
	ReasonHeld Reason = "held"
)

// String returns the kind's stable lower_snake name ("flush", "rule_error"),
// usable as a log field or metric label, or "EventKind(N)" for an unknown
// kind.
func (k EventKind) String() string {
	switch k {
	case EventFlush:
		return "flush"
	case EventSync:
		return "sync"
	case EventExpire:
		return "expire"
	case EventRuleError:
		return "rule_error"
	case EventWake:
		return "wake"
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
	// Count is the number of activities or ids concerned.
	Count int
	// Reason is why the rule was skipped (EventRuleSkipped).
	Reason Reason
	// Err is the failure, if any.
	Err error
}

// discardLogger is the Logger used when Options.Logger is nil.
var discardLogger = slog.New(slog.DiscardHandler)
