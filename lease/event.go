package lease

import (
	"strconv"
	"time"
)

// EventKind says what happened to a lease. The zero value is no kind.
type EventKind int

const (
	EventGranted   EventKind = iota + 1 // a lease was granted
	EventRejected                       // a grant was refused; Lease holds only the request's Holder, Resource, Cost, Grace
	EventHeartbeat                      // a heartbeat succeeded
	EventReleased                       // a lease was released
	EventExpired                        // a sweep reclaimed an expired lease; once among all Managers sharing the store
)

// String returns a stable name ("granted", "rejected", "heartbeat",
// "released", "expired") for logs and metric labels, or "EventKind(N)".
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

// Event is one lifecycle event, as delivered to [Options.OnEvent].
// Request and Rejection are set for EventRejected only: the request with
// the TTL and Grace it would have had, and the error Grant returned.
type Event struct {
	Kind      EventKind
	Lease     Lease // as the store returned it (for EventExpired, as it expired)
	Request   Request
	Rejection *RejectedError
	Time      time.Time // when the Manager saw it, on Options.Clock
}
