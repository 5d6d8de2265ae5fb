package ttl

import (
	"log/slog"
	"time"
)

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
	// rule, because activity read from the Buffer could not be merged into
	// the Store (Err); see Runner.Tick.
	EventRuleSkipped
)

// String returns the kind's name, as "flush".
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
	}
	return "unknown"
}

// Event is what Tracker and Runner report to Options.OnEvent. OnEvent runs on
// the flush or tick goroutine (or the caller of Flush and Tick), never under a
// lock and never from Tracker.Record, so a slow callback delays the next flush
// or tick but never the hot path.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// At is the time of the event on the reporter's clock.
	At time.Time
	// ID is the entity (EventExpire).
	ID string
	// Rule is the rule's name (EventExpire, EventRuleError, EventRuleSkipped).
	Rule string
	// Then is the desired state the rule set (EventExpire).
	Then string
	// Count is the number of activities or ids concerned.
	Count int
	// Err is the failure, if any.
	Err error
}

// discardLogger is the Logger used when Options.Logger is nil.
var discardLogger = slog.New(slog.DiscardHandler)
