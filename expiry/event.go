package expiry

import "time"

// Event describes one expired key, as delivered to [MapOptions.OnEvent];
// Delete, Clear and past deadlines send none.
type Event[K comparable, V any] struct {
	Time     time.Time // when the key was found expired, on the Map's clock
	Key      K         // the expired key
	Value    V         // its value when it was deleted
	Deadline time.Time // the deadline that passed
	// Active reports that active expiry (a sample of an [Expirer] cycle)
	// found the key expired; otherwise an access did (passive expiry).
	Active bool
}
