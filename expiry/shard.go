package expiry

import (
	"math"
	"sync"
	"sync/atomic"
)

// noDeadline is the deadline of a key without one: no clock reading ever
// reaches it, so "expired" is the single test deadline <= now.
const noDeadline = math.MaxInt64

// entry is a key's value and deadline, stored in the shard's map by value
// so that a Get touches one map slot and nothing else. deadline is in
// nanoseconds since the Map's base time; idx is the key's position in the
// shard's dl slice while it has a deadline.
type entry[V any] struct {
	val      V
	deadline int64
	idx      int
}

// shard is one lock's worth of the Map. dl holds exactly the keys that
// carry a deadline, densely, so that a random position is a uniform sample
// of them; deletion swaps the last key into the hole and fixes its idx.
type shard[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]entry[V]
	dl []K
	// n mirrors len(dl) for readers that do not hold mu (the sampler's
	// count of keys with a deadline); written under mu.
	n atomic.Int64
	_ [64]byte // keep neighbouring shards' locks on separate cache lines
}

// addDeadline appends k to dl and returns its position. Caller holds mu.
func (s *shard[K, V]) addDeadline(k K) int {
	s.dl = append(s.dl, k)
	s.n.Store(int64(len(s.dl)))
	return len(s.dl) - 1
}

// dropDeadline removes position i from dl. Caller holds mu and updates the
// entry that was at i.
func (s *shard[K, V]) dropDeadline(i int) {
	n := len(s.dl) - 1
	if i != n {
		last := s.dl[n]
		s.dl[i] = last
		e := s.m[last]
		e.idx = i
		s.m[last] = e
	}
	var zero K
	s.dl[n] = zero
	s.dl = s.dl[:n]
	s.n.Store(int64(n))
	// Give memory back after a mass expiry.
	if cap(s.dl) > 1024 && n < cap(s.dl)/4 {
		s.dl = append([]K(nil), s.dl...)
	}
}

// remove deletes k, whose entry is e. Caller holds mu.
func (s *shard[K, V]) remove(k K, e entry[V]) {
	if e.deadline != noDeadline {
		s.dropDeadline(e.idx)
	}
	delete(s.m, k)
}

// expireAll examines every key with a deadline, calls expired for each one
// expired at now, then deletes it. Caller holds mu.
func (s *shard[K, V]) expireAll(now int64, expired func(K, entry[V])) (sampled, deleted int) {
	// Walk backwards: a swap-remove moves an already examined key into
	// the hole.
	for i := len(s.dl) - 1; i >= 0; i-- {
		k := s.dl[i]
		e := s.m[k]
		sampled++
		if e.deadline <= now {
			expired(k, e)
			s.remove(k, e)
			deleted++
		}
	}
	return sampled, deleted
}
