package expiry

import (
	"hash/maphash"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// deadline is a point in time as seconds and nanoseconds after the Map's
// base time. Seconds in an int64 reach 292 billion years either way, so no
// deadline a time.Time can hold is clamped; deadlines within about 292
// years of the base compare with a nanosecond clock reading by one multiply
// and add.
type deadline struct {
	sec  int64 // noDeadlineSec: none
	nsec int32 // in [0, 1e9)
}

const (
	noDeadlineSec = math.MaxInt64
	// maxNanoSec is the largest sec whose deadline fits in int64
	// nanoseconds.
	maxNanoSec = math.MaxInt64/1_000_000_000 - 1
)

var none = deadline{sec: noDeadlineSec}

// fromNanos returns the deadline n nanoseconds after the base.
func fromNanos(n int64) deadline {
	sec, nsec := n/1e9, n%1e9
	if nsec < 0 {
		sec, nsec = sec-1, nsec+1e9
	}
	return deadline{sec: sec, nsec: int32(nsec)}
}

// add returns d + e; both are below maxNanoSec seconds, so it cannot
// overflow.
func (d deadline) add(e deadline) deadline {
	sec, nsec := d.sec+e.sec, d.nsec+e.nsec
	if nsec >= 1e9 {
		sec, nsec = sec+1, nsec-1e9
	}
	return deadline{sec: sec, nsec: nsec}
}

func (d deadline) isNone() bool { return d.sec == noDeadlineSec }

// nanos returns d in nanoseconds and whether it fits.
func (d deadline) nanos() (int64, bool) {
	if d.sec > maxNanoSec || d.sec < -maxNanoSec {
		return 0, false
	}
	return d.sec*1e9 + int64(d.nsec), true
}

// passed reports whether d is at or before now (nanoseconds after the base).
// A deadline that does not fit in nanoseconds is after any clock reading a
// running process can make; none never passes.
func (d deadline) passed(now int64) bool {
	return d.sec <= maxNanoSec && d.sec*1e9+int64(d.nsec) <= now
}

// node is one key's immutable record: a write replaces the node, so a
// reader that loaded it sees a consistent key, value and deadline without a
// lock. Only idx changes, under the shard's mutex, and readers never read
// it.
type node[K comparable, V any] struct {
	key K
	val V
	dl  deadline
	idx int32 // position in the shard's dl slice while dl is not none
}

// shard is one mutex's worth of the Map: a hash table that readers use
// without the mutex, and the dense slice of the nodes that carry a
// deadline, which active expiry samples at random positions.
type shard[K comparable, V any] struct {
	// tab is what readers load; it sits on a cache line of its own so
	// that writers changing the fields below do not evict it from the
	// readers' caches.
	tab atomic.Pointer[table[K, V]]
	_   [56]byte

	mu   sync.Mutex
	seed maphash.Seed // the Map's; a resize rehashes the keys
	// dl holds every node of the shard that carries a deadline, each at
	// its node's idx, so that a random position is a uniform sample of
	// them and a node leaves in O(1) (the last one moves into its place).
	dl []*node[K, V]
	// keys and withDL count the keys and the nodes in dl for readers that
	// do not hold mu (Len, Stats, the sampler); written under mu.
	keys   atomic.Int64
	withDL atomic.Int64
	_      [8]byte
}

func (s *shard[K, V]) init(seed maphash.Seed) {
	s.seed = seed
	s.tab.Store(newTable[K, V](1))
}

func (s *shard[K, V]) hash(k K) uint64 { return hashOf(s.seed, k) }

// dlAdd puts n, which carries a deadline, into dl. Caller holds mu.
func (s *shard[K, V]) dlAdd(n *node[K, V]) {
	n.idx = int32(len(s.dl))
	s.dl = append(s.dl, n)
	s.withDL.Store(int64(len(s.dl)))
}

// dlRemove takes n out of dl. Caller holds mu.
func (s *shard[K, V]) dlRemove(n *node[K, V]) {
	i, last := n.idx, len(s.dl)-1
	s.dl[i] = s.dl[last]
	s.dl[i].idx = i
	s.dl[last] = nil
	s.dl = s.dl[:last]
	// Give memory back after a mass expiry.
	if cap(s.dl) > 1024 && last < cap(s.dl)/4 {
		s.dl = append([]*node[K, V](nil), s.dl...)
	}
	s.withDL.Store(int64(len(s.dl)))
}

// replace stores n in slot i of b, in place of old (the same key), and
// keeps dl in step. Caller holds mu.
func (s *shard[K, V]) replace(b *bucket[K, V], i int, old, n *node[K, V]) {
	switch {
	case old.dl.isNone() && !n.dl.isNone():
		s.dlAdd(n)
	case !old.dl.isNone() && n.dl.isNone():
		s.dlRemove(old)
	case !old.dl.isNone():
		n.idx = old.idx
		s.dl[n.idx] = n
	}
	b.slots[i].Store(n)
}

// add inserts n, whose key is absent, under hash h. Caller holds mu.
func (s *shard[K, V]) add(h uint64, n *node[K, V]) {
	t := s.tab.Load()
	keys := s.keys.Load() + 1
	if keys > maxLoad*int64(len(t.buckets)) {
		t = s.resize(t, int(keys))
	}
	t.insert(h, n)
	s.keys.Store(keys)
	if !n.dl.isNone() {
		s.dlAdd(n)
	}
}

// remove deletes node n, found in slot i of b. Caller holds mu.
func (s *shard[K, V]) remove(b *bucket[K, V], i int, n *node[K, V]) {
	b.clear(i)
	keys := s.keys.Load() - 1
	s.keys.Store(keys)
	if !n.dl.isNone() {
		s.dlRemove(n)
	}
	// Shrink when a table is mostly empty, so that memory returns after
	// a mass deletion; the hysteresis (shrink below 1/2 per bucket to 2
	// per bucket, grow above 4) keeps a table from flapping.
	if t := s.tab.Load(); len(t.buckets) > 1 && keys < int64(len(t.buckets))/2 {
		s.resize(t, int(keys))
	}
}

// resize replaces t with a table sized for keys and returns it. Readers
// keep using t until they load the new one, which is complete when
// published. Caller holds mu.
func (s *shard[K, V]) resize(t *table[K, V], keys int) *table[K, V] {
	nt := newTable[K, V](keys / 2)
	t.each(func(n *node[K, V]) { nt.insert(s.hash(n.key), n) })
	s.tab.Store(nt)
	return nt
}

// sampleOne examines one random node with a deadline and, if its deadline
// has passed at now, deletes it and calls expired; otherwise it sets *left
// to the nanoseconds the node has left (0 if beyond an int64). It reports
// whether it examined a node and whether it deleted it. It holds mu for
// this one node only; readers never wait for it.
func (s *shard[K, V]) sampleOne(now int64, expired func(*node[K, V]), left *int64) (sampled, deleted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.dl) == 0 {
		return false, false
	}
	n := s.dl[rand.IntN(len(s.dl))]
	if !n.dl.passed(now) {
		if d, ok := n.dl.nanos(); ok {
			*left = d - now
		}
		return true, false
	}
	s.removeNode(n)
	expired(n)
	return true, true
}

// expireAll examines every node with a deadline and deletes those whose
// deadline has passed at now, calling expired for each. Caller holds mu.
func (s *shard[K, V]) expireAll(now int64, expired func(*node[K, V])) (sampled, deleted int) {
	// Walk backwards: a removal moves an already examined node into the
	// hole.
	for i := len(s.dl) - 1; i >= 0; i-- {
		if i >= len(s.dl) {
			continue
		}
		n := s.dl[i]
		sampled++
		if n.dl.passed(now) {
			s.removeNode(n)
			expired(n)
			deleted++
		}
	}
	return sampled, deleted
}

// removeNode deletes n, which is in the table. Caller holds mu.
func (s *shard[K, V]) removeNode(n *node[K, V]) {
	b, i := s.tab.Load().find(s.hash(n.key), n.key)
	s.remove(b, i, n)
}
