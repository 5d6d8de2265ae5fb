package lease

import (
	crand "crypto/rand"
	"math/rand/v2"
	"sync"
	"time"
)

// A Lease is a grant of Cost budget units to Holder for Resource. It is
// live, on the store's clock, until [Lease.Deadline]; then it is expired
// for good. Heartbeats move HeartbeatAt, never ExpiresAt. A Manager's IDs
// are random and unguessable, so one can serve as a capability. Token is
// the fencing token: greater than that of every lease the store granted
// before, so a resource can refuse a token lower than the highest it has
// seen. Compare Leases by their fields, not with == or reflect.DeepEqual.
type Lease struct {
	ID          string
	Holder      string
	Resource    string // kept, not interpreted
	Cost        int    // the first cost of the request that fitted
	Token       uint64
	CreatedAt   time.Time     // store clock, as are all times
	ExpiresAt   time.Time     // CreatedAt + TTL, never extended
	HeartbeatAt time.Time     // the grant or the last heartbeat
	Grace       time.Duration // how long the lease stays live after HeartbeatAt

	// sent is when the Manager sent the call that returned the lease
	// (Manager clock), which KeepAlive starts its local deadline from; zero
	// for a Lease from anywhere else. With a memory store on the Manager's
	// time source it is CreatedAt, which that clock read after the call
	// began and where the deadlines start.
	sent time.Time
}

// Deadline returns the first instant at which the lease is expired: the
// earlier of ExpiresAt and HeartbeatAt + Grace.
func (l Lease) Deadline() time.Time {
	if hb := l.HeartbeatAt.Add(l.Grace); hb.Before(l.ExpiresAt) {
		return hb
	}
	return l.ExpiresAt
}

// lapsed reports whether the lease ends (or ended) by missing heartbeats
// rather than by reaching ExpiresAt: its heartbeat deadline comes first.
func lapsed(l Lease) bool { return l.HeartbeatAt.Add(l.Grace).Before(l.ExpiresAt) }

// remaining returns how long l stays live after now, or 0 if it is expired
// at now.
func remaining(l Lease, now time.Time) time.Duration { return max(l.Deadline().Sub(now), 0) }

// newID returns a new random lease id: 128 bits as 32 hex digits, from a
// ChaCha8 generator (a cryptographically secure stream) seeded from
// crypto/rand, so ids are unguessable. A pool of generators makes it a few
// times cheaper than reading crypto/rand for every id.
func newID() string {
	g := idSources.Get().(*rand.ChaCha8)
	hi, lo := g.Uint64(), g.Uint64()
	idSources.Put(g)
	// Hex-encode into a stack array: the string is the one allocation.
	const digits = "0123456789abcdef"
	var b [32]byte
	for i := 15; i >= 0; i-- {
		b[i], b[16+i] = digits[hi&15], digits[lo&15]
		hi, lo = hi>>4, lo>>4
	}
	return string(b[:])
}

var idSources = sync.Pool{New: func() any {
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // crypto/rand.Read never returns an error.
	return rand.NewChaCha8(seed)
}}
