package expiry

import (
	"math"
	"sync"
	"sync/atomic"
)

// noDeadline is the deadline of a key without one: no clock reading ever
// reaches it, so "expired" is the single test deadline <= now.
const noDeadline = math.MaxInt64

// entry is one key. deadline is in nanoseconds since the Map's base time;
// idx is the entry's position in its shard's dl slice while it has a
// deadline.
type entry[K comparable, V any] struct {
	key      K
	val      V
	deadline int64
	idx      int
}

// shard is one lock's worth of the Map. dl holds exactly the entries that
// carry a deadline, densely, so that a random position is a uniform sample
// of them; deletion swaps the last element into the hole.
type shard[K comparable, V any] struct {
	mu sync.RWMutex
	m  map[K]*entry[K, V]
	dl []*entry[K, V]
	// n mirrors len(dl) for readers that do not hold mu (the sampler's
	// count of keys with a deadline); written under mu.
	n atomic.Int64
	_ [64]byte // keep neighbouring shards' locks on separate cache lines
}

// setDeadline gives e the deadline d (not noDeadline). Caller holds mu.
func (s *shard[K, V]) setDeadline(e *entry[K, V], d int64) {
	if e.deadline == noDeadline {
		e.idx = len(s.dl)
		s.dl = append(s.dl, e)
		s.n.Store(int64(len(s.dl)))
	}
	e.deadline = d
}

// clearDeadline removes e's deadline, if any. Caller holds mu.
func (s *shard[K, V]) clearDeadline(e *entry[K, V]) {
	if e.deadline == noDeadline {
		return
	}
	i, n := e.idx, len(s.dl)-1
	last := s.dl[n]
	s.dl[i] = last
	last.idx = i
	s.dl[n] = nil
	s.dl = s.dl[:n]
	s.n.Store(int64(n))
	e.deadline = noDeadline
	e.idx = -1
	// Give memory back after a mass expiry.
	if cap(s.dl) > 1024 && n < cap(s.dl)/4 {
		s.dl = append([]*entry[K, V](nil), s.dl...)
	}
}

// remove deletes e from the shard. Caller holds mu.
func (s *shard[K, V]) remove(e *entry[K, V]) {
	s.clearDeadline(e)
	delete(s.m, e.key)
}

// expireAll examines every entry with a deadline, calls expired for each
// one expired at now, then deletes it. Caller holds mu.
func (s *shard[K, V]) expireAll(now int64, expired func(*entry[K, V])) (sampled, deleted int) {
	// Walk backwards: a swap-remove moves an already examined entry into
	// the hole.
	for i := len(s.dl) - 1; i >= 0; i-- {
		e := s.dl[i]
		sampled++
		if e.deadline <= now {
			expired(e)
			s.remove(e)
			deleted++
		}
	}
	return sampled, deleted
}
