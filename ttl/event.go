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
	EventFlush       EventKind = iota + 1 // a Tracker flushed Count activities, or kept them on Err
	EventExpire                           // Rule set the desired state of entity ID to Then
	EventRuleError                        // applying Rule failed with Err; the other rules still ran
	EventRuleSkipped                      // a Runner skipped Rule (see Runner.Tick); Err says why, if any
	EventBufferLost                       // a Lossy Buffer lost its contents; Count: what a Tracker resends
)

// String returns a stable name, as "rule_error", or "EventKind(N)".
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

// Event is what a Tracker or Runner reports to OnEvent, in order, from one
// goroutine, outside every lock: the callback may call its reporter, and
// never delays it. Up to EventQueue events wait, one kind at most 7/8 of
// them; the rest are dropped and counted in the Stats' EventsDropped.
type Event struct {
	Kind  EventKind
	Time  time.Time // on the reporter's clock
	ID    string    // the entity (EventExpire)
	Rule  string    // the rule's name (EventExpire, EventRuleError, EventRuleSkipped)
	Then  string    // the desired state the rule set (EventExpire)
	Count int       // activities (EventFlush, EventBufferLost)
	Err   error     // the failure, if any
}

// discardLogger is the Logger used when Options.Logger is nil.
var discardLogger = slog.New(slog.DiscardHandler)
