package expiry

import "time"

// Reason tells how a key was found expired. Its values are stable strings,
// usable as metric labels.
type Reason string

const (
	// ReasonPassive: an access (Get, TTL, Set, ...) found the key expired
	// and deleted it.
	ReasonPassive Reason = "passive"
	// ReasonActive: the Expirer's sampling found the key expired and
	// deleted it.
	ReasonActive Reason = "active"
)

// Event describes one expired key, as delivered to MapOptions.OnEvent.
// Keys removed by Delete, Clear or a past ExpireAt are not expiry events.
type Event[K comparable, V any] struct {
	Time     time.Time // when the key was found expired, on the Map's clock
	Key      K         // the expired key
	Value    V         // its value when it was deleted
	Reason   Reason    // how it was found expired
	Deadline time.Time // the deadline that passed
}
