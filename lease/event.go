package lease

import (
	"strconv"
	"time"
)

// EventKind says what happened to a lease.
type EventKind int

// The event kinds.
const (
	// Granted: a lease was granted.
	Granted EventKind = iota + 1
	// Rejected: a grant was refused; Event.Reason says why and Event.Lease
	// holds only the request's Holder and Resource.
	Rejected
	// Heartbeat: a heartbeat succeeded.
	Heartbeat
	// Released: the lease was released.
	Released
	// Expired: a sweep reclaimed an expired lease. Each expired lease gives
	// exactly one Expired event among all Managers sharing the store.
	Expired
)

// String returns the kind in lower case ("granted", ...).
func (k EventKind) String() string {
	switch k {
	case Granted:
		return "granted"
	case Rejected:
		return "rejected"
	case Heartbeat:
		return "heartbeat"
	case Released:
		return "released"
	case Expired:
		return "expired"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one lifecycle event, as delivered to Options.OnEvent.
type Event struct {
	Kind EventKind
	// Lease is the lease as the store returned it (for Expired, as it was
	// when it expired).
	Lease Lease
	// Reason is the rejection reason for Rejected events, else empty.
	Reason Reason
	// Time is when the Manager observed the event (Manager clock).
	Time time.Time
}
