package lease

import (
	"strconv"
	"time"
)

// EventKind says what happened to a lease. The zero value is no kind.
type EventKind int

// The event kinds.
const (
	// EventGranted: a lease was granted.
	EventGranted EventKind = iota + 1
	// EventRejected: a grant was refused. Event.Rejection says why (its
	// Err) and Event.Request what was asked; no lease exists, and Event.Lease holds only the request's Holder,
	// Resource, Cost and Grace.
	EventRejected
	// EventHeartbeat: a heartbeat succeeded.
	EventHeartbeat
	// EventReleased: the lease was released.
	EventReleased
	// EventExpired: a sweep reclaimed an expired lease. Each expired lease
	// gives exactly one EventExpired among all Managers sharing the store.
	EventExpired
)

// String returns a stable lower_snake name ("granted", "rejected",
// "heartbeat", "released", "expired"), usable as a log field or metric
// label, and "EventKind(N)" for an unknown kind.
func (k EventKind) String() string {
	switch k {
	case EventGranted:
		return "granted"
	case EventRejected:
		return "rejected"
	case EventHeartbeat:
		return "heartbeat"
	case EventReleased:
		return "released"
	case EventExpired:
		return "expired"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one lifecycle event, as delivered to Options.OnEvent.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// Lease is the lease as the store returned it (for EventExpired, as it
	// was when it expired).
	Lease Lease
	// Request is, for EventRejected, the refused request: its Holder,
	// Resource, Cost and Fallback as given, and the TTL and Grace the lease
	// would have had (the Manager's defaults where it left them zero).
	// Else zero.
	Request Request
	// Rejection is, for EventRejected, the refusal as Grant returned it:
	// the condition (Err), the budget Available at the decision, the Existing lease of a holder
	// that has one, the RetryAfter of a recovering store. Else nil.
	Rejection *RejectedError
	// Time is when the Manager observed the event, on its Options.Clock.
	Time time.Time
}
