package lease

import (
	crand "crypto/rand"
	"math/rand/v2"
	"sync"
	"time"
)

// A Lease is a grant of Cost budget units to Holder for Resource.
//
// A lease has two deadlines: ExpiresAt, the absolute end fixed at grant time
// and never extended, and the heartbeat deadline, HeartbeatAt + Grace, which
// every successful heartbeat moves forward. It is live while the current time
// (the store's clock) is before both; from the first instant at or after
// either one it is expired, and nothing brings it back.
//
// A Lease returned by Manager.Grant also remembers, unexported, when the
// Manager sent the grant, which KeepAlive starts its local deadline from.
// Compare Leases by their fields (ID, Token...), not with == or
// reflect.DeepEqual.
type Lease struct {
	// ID identifies the lease. A Manager's are random and unguessable, so
	// it can be handed to a browser as a capability.
	ID string
	// Holder is who holds the lease (a user or session id). With one lease
	// per holder, a holder has at most one live lease at a time.
	Holder string
	// Resource is what the lease is for (a stream, a job). The store
	// keeps it but makes no decision on it.
	Resource string
	// Cost is the number of budget units the lease takes: the first cost of
	// the request that fitted.
	Cost int
	// Token is the fencing token: strictly greater than the token of every
	// lease granted before it by the same store, across all instances that
	// share the store. A resource can reject requests carrying a token lower
	// than the highest it has seen.
	Token uint64
	// CreatedAt is when the store granted the lease (store clock).
	CreatedAt time.Time
	// ExpiresAt is CreatedAt + TTL, the absolute deadline.
	ExpiresAt time.Time
	// HeartbeatAt is the time of the grant or of the last successful
	// heartbeat (store clock).
	HeartbeatAt time.Time
	// Grace is how long the lease stays live after HeartbeatAt.
	Grace time.Duration

	// sent is when the Manager sent the call that returned the lease
	// (Manager clock); zero for a Lease from anywhere else. With a
	// memory store on the Manager's time source it is CreatedAt, which
	// that clock read after the call began and where the deadlines start.
	sent time.Time
}

// Deadline returns the earlier of ExpiresAt and the heartbeat deadline,
// HeartbeatAt + Grace: the first instant at which the lease is expired.
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
