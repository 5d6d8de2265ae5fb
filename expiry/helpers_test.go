package expiry_test

import (
	"math"
	"time"

	"github.com/ttlkit/ttlkit/expiry"
)

// Redis TTL's answers for a missing key and a key without a deadline.
const (
	noDeadline time.Duration = -1
	missing    time.Duration = -2
)

// ttlOf answers Redis TTL from the Map's public API: missing, noDeadline, or
// the time left on the real (or synctest) clock, never below 1 ns for a
// live key and math.MaxInt64 beyond what a Duration holds.
func ttlOf[V any](m *expiry.Map[string, V], k string) time.Duration {
	return ttlOfAt(m, k, time.Now())
}

// ttlOfAt is ttlOf with the current time given (a clock.Mock's).
func ttlOfAt[V any](m *expiry.Map[string, V], k string, now time.Time) time.Duration {
	d, ok := m.Deadline(k)
	switch {
	case !ok:
		return missing
	case d.IsZero():
		return noDeadline
	}
	left := d.Sub(now) // saturates at math.MaxInt64
	if left == math.MaxInt64 {
		return left
	}
	return max(left, 1)
}

// persist is Redis PERSIST: whether a deadline was removed.
func persist[V any](m *expiry.Map[string, V], k string) bool {
	old, ok := m.Expire(k, time.Time{})
	return ok && !old.IsZero()
}

// expireAt is Redis EXPIREAT: whether the key exists.
func expireAt[V any](m *expiry.Map[string, V], k string, at time.Time) bool {
	_, ok := m.Expire(k, at)
	return ok
}

// expireIn is Redis EXPIRE with a TTL on the real (or synctest) clock:
// whether the key exists.
func expireIn[V any](m *expiry.Map[string, V], k string, ttl time.Duration) bool {
	return expireAt(m, k, time.Now().Add(ttl))
}

// del is Redis DEL: whether the key was present.
func del[V any](m *expiry.Map[string, V], k string) bool {
	_, ok := m.Delete(k)
	return ok
}
