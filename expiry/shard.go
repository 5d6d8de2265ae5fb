package expiry

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// noDeadline is the deadline of a key without one: no clock reading ever
// reaches it, so "expired" is the single test deadline <= now.
const noDeadline = math.MaxInt64

// entry is a key's value and deadline, stored in the shard's map by value
// so that a Get touches one map slot and nothing else. deadline is in
// nanoseconds since the Map's base time; gen names the key's slot in the
// shard's dl slice while it has a deadline.
type entry[V any] struct {
	val      V
	deadline int64
	gen      uint64
}

// slot is one element of a shard's deadline slice. It is valid while its
// key exists, has a deadline, and carries the same generation; otherwise it
// is stale and removed when found.
type slot[K comparable] struct {
	key K
	gen uint64
}

// shard is one lock's worth of the Map.
//
// dl holds one valid slot for every key that carries a deadline, densely,
// so that a random position is a uniform sample of them, plus stale slots
// left by keys that lost their deadline or were deleted. Stale slots cost
// nothing to create (no entry records a position, so nothing has to be
// fixed up), are dropped whenever the sampler meets one, and are cleaned
// eagerly once they outnumber the valid ones, which bounds dl to about
// twice the keys with a deadline. Removing a slot swaps the last one into
// its place.
type shard[K comparable, V any] struct {
	mu   sync.RWMutex
	m    map[K]entry[V]
	dl   []slot[K]
	gen  uint64 // last generation handed out
	live int    // keys with a deadline: the valid slots of dl
	// n mirrors live for readers that do not hold mu (the sampler's count
	// of keys with a deadline); written under mu.
	n atomic.Int64
	_ [64]byte // keep neighbouring shards' locks on separate cache lines
}

// giveDeadline sets e's deadline to d (not noDeadline), adding a slot if
// the key k had none. The caller holds mu and stores e back into m.
func (s *shard[K, V]) giveDeadline(k K, e *entry[V], d int64) {
	if e.deadline == noDeadline {
		s.gen++
		e.gen = s.gen
		s.dl = append(s.dl, slot[K]{key: k, gen: s.gen})
		s.live++
		s.n.Store(int64(s.live))
	}
	e.deadline = d
}

// lostDeadline records that a key lost its deadline (deleted, or kept
// without one): its slot is now stale. Caller holds mu.
func (s *shard[K, V]) lostDeadline() {
	s.live--
	s.n.Store(int64(s.live))
	if stale := len(s.dl) - s.live; stale > 32 && stale > s.live {
		// More than half the slots are stale: 4 random probes remove
		// at least 2 on average, more than this call created.
		for range 4 {
			if len(s.dl) == 0 {
				break
			}
			if i := rand.IntN(len(s.dl)); !s.valid(i) {
				s.removeSlot(i)
			}
		}
	}
}

// valid reports whether slot i is valid. Caller holds mu.
func (s *shard[K, V]) valid(i int) bool {
	_, ok := s.lookup(i)
	return ok
}

// lookup returns the entry of slot i's key if the slot is valid. Caller
// holds mu.
func (s *shard[K, V]) lookup(i int) (entry[V], bool) {
	sl := s.dl[i]
	e, ok := s.m[sl.key]
	return e, ok && e.deadline != noDeadline && e.gen == sl.gen
}

// removeSlot removes slot i, moving the last slot into its place. Caller
// holds mu.
func (s *shard[K, V]) removeSlot(i int) {
	n := len(s.dl) - 1
	s.dl[i] = s.dl[n]
	s.dl[n] = slot[K]{}
	s.dl = s.dl[:n]
	// Give memory back after a mass expiry.
	if cap(s.dl) > 1024 && n < cap(s.dl)/4 {
		s.dl = append([]slot[K](nil), s.dl...)
	}
}

// remove deletes k, whose entry is e. Caller holds mu.
func (s *shard[K, V]) remove(k K, e entry[V]) {
	delete(s.m, k)
	if e.deadline != noDeadline {
		s.lostDeadline()
	}
}

// expireSlot deletes the key of valid slot i, and the slot. Caller holds
// mu.
func (s *shard[K, V]) expireSlot(i int) {
	delete(s.m, s.dl[i].key)
	s.removeSlot(i)
	s.live--
	s.n.Store(int64(s.live))
}

// expireAll examines every key with a deadline, calls expired for each one
// expired at now, then deletes it; stale slots met on the way are
// removed. Caller holds mu.
func (s *shard[K, V]) expireAll(now int64, expired func(K, entry[V])) (sampled, deleted int) {
	// Walk backwards: a removal moves an already examined slot into the
	// hole.
	for i := len(s.dl) - 1; i >= 0; i-- {
		e, ok := s.lookup(i)
		if !ok {
			s.removeSlot(i)
			continue
		}
		sampled++
		if e.deadline <= now {
			expired(s.dl[i].key, e)
			s.expireSlot(i)
			deleted++
		}
	}
	return sampled, deleted
}

// sampleOne examines one random key with a deadline, dropping up to a few
// stale slots on the way, and deletes it if expired at now. It reports
// whether it examined a key and whether it deleted it. It takes mu itself:
// the slot and the key's entry are read under the read lock (the part that
// misses the cache), and the write lock is taken only to drop a stale slot
// or delete an expired key, after checking that the slot did not change,
// so readers of the shard are blocked for as short a time as possible.
func (s *shard[K, V]) sampleOne(now int64, expired func(K, entry[V])) (sampled, deleted bool) {
	for range 4 {
		s.mu.RLock()
		if len(s.dl) == 0 {
			s.mu.RUnlock()
			return false, false
		}
		i := rand.IntN(len(s.dl))
		sl := s.dl[i]
		e, ok := s.lookup(i)
		s.mu.RUnlock()
		if ok && e.deadline > now {
			return true, false
		}

		s.mu.Lock()
		if i >= len(s.dl) || s.dl[i] != sl {
			// Changed since: sample again.
			s.mu.Unlock()
			continue
		}
		e, ok = s.lookup(i)
		switch {
		case !ok:
			s.removeSlot(i)
			s.mu.Unlock()
			continue
		case e.deadline > now:
			s.mu.Unlock()
			return true, false
		}
		expired(sl.key, e)
		s.expireSlot(i)
		s.mu.Unlock()
		return true, true
	}
	return false, false
}
