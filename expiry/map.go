package expiry

import (
	"context"
	"errors"
	"hash/maphash"
	"math"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/event"
)

// Map is a concurrent map whose keys may carry a deadline, with Redis's
// expiry semantics: no method ever returns or counts a key it finds
// expired (passive expiry deletes it on the spot), and an [Expirer] started
// by NewMap reclaims the expired keys nobody reads (active expiry).
//
// Reads take no lock and write no shared memory, and read the clock only for a
// key with a deadline; Get allocates nothing. Writes lock one shard. Deadlines
// may lie any distance in the future; none is clamped. A Map must be created
// with NewMap. After Close it keeps working with passive expiry only, and
// delivers no more events.
type Map[K comparable, V any] struct {
	shards []shard[K, V]
	shift  uint // a hash's top bits pick its shard
	seed   maphash.Seed
	clk    clock.Clock // nil: real time
	base   time.Time   // deadlines are offsets from base
	exp    *Expirer
	ev     *event.Queue[Event[K, V]] // nil without OnEvent

	expiredPassive atomic.Uint64
	expiredActive  atomic.Uint64
	avgTTL         atomic.Int64 // ns; see Stats.AvgTTL
}

// NewMap returns an empty Map whose active expirer is running; bad options
// match [ErrInvalid].
func NewMap[K comparable, V any](opts MapOptions[K, V]) (*Map[K, V], error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	n := o.Shards
	if n == 0 {
		n = max(minShards, 16*runtime.GOMAXPROCS(0))
	}
	n = 1 << bits.Len(uint(n-1)) // round up to a power of two
	m := &Map[K, V]{
		shards: make([]shard[K, V], n),
		shift:  uint(64 - bits.Len(uint(n-1))),
		seed:   maphash.MakeSeed(),
		clk:    o.Clock,
	}
	for i := range m.shards {
		m.shards[i].init(m.seed)
	}
	if m.clk != nil {
		m.base = m.clk.Now()
	} else {
		m.base = time.Now()
	}
	m.exp, err = newExpirer(keyspace[K, V]{m}, o.Options)
	if err != nil {
		return nil, err
	}
	m.ev = event.New(o.OnEvent, o.EventQueue, o.Logger, "expiry")
	m.exp.start()
	return m, nil
}

// keyspace is the Map as its Expirer's Keyspace.
type keyspace[K comparable, V any] struct{ m *Map[K, V] }

func (ks keyspace[K, V]) ExpireSample(now time.Time, n int) (sampled, expired int) {
	return ks.m.expireSample(now, n)
}

// hash returns k's hash and its shard.
func (m *Map[K, V]) hash(k K) (uint64, *shard[K, V]) {
	h := hashOf(m.seed, k)
	if m.shift == 64 {
		return h, &m.shards[0]
	}
	return h, &m.shards[h>>m.shift]
}

// hashOf hashes k; string keys, the common case, take maphash.String's
// direct path rather than the generic one.
func hashOf[K comparable](seed maphash.Seed, k K) uint64 {
	if s, ok := any(k).(string); ok {
		return maphash.String(seed, s)
	}
	return maphash.Comparable(seed, k)
}

// now returns the current time in nanoseconds since m.base.
func (m *Map[K, V]) now() int64 {
	if m.clk == nil {
		return int64(time.Since(m.base))
	}
	return int64(m.clk.Now().Sub(m.base))
}

// at converts a time to a deadline. Within about 292 years of the base it
// uses t.Sub (the monotonic clock when both times carry it); beyond, the
// wall clock, exactly.
func (m *Map[K, V]) at(t time.Time) deadline {
	if d := t.Sub(m.base); d > math.MinInt64 && d < math.MaxInt64 {
		return fromNanos(int64(d))
	}
	sec := t.Unix() - m.base.Unix()
	nsec := int64(t.Nanosecond()) - int64(m.base.Nanosecond())
	if nsec < 0 {
		sec, nsec = sec-1, nsec+1e9
	}
	return deadline{sec: sec, nsec: int32(nsec)}
}

// timeOf converts a deadline back to the time it was made from.
func (m *Map[K, V]) timeOf(d deadline) time.Time {
	if n, ok := d.nanos(); ok {
		return m.base.Add(time.Duration(n))
	}
	return time.Unix(m.base.Unix()+d.sec, int64(m.base.Nanosecond())+int64(d.nsec))
}

// deadlineFor returns now+ttl, or an error matching ErrInvalid for a ttl
// that is not positive. Any positive ttl gives a deadline: a Duration
// reaches 292 years, a deadline far more.
func (m *Map[K, V]) deadlineFor(ttl time.Duration) (deadline, int64, error) {
	if ttl <= 0 {
		return deadline{}, 0, errs.Invalid(ErrInvalid, "expiry: invalid ttl: %v is not positive", ttl)
	}
	now := m.now()
	return fromNanos(now).add(fromNanos(int64(ttl))), now, nil
}

// report counts the expiry of n's key, found by active expiry or by an
// access, and sends its event.
func (m *Map[K, V]) report(n *node[K, V], active bool) {
	if active {
		m.expiredActive.Add(1)
	} else {
		m.expiredPassive.Add(1)
	}
	if m.ev.Enabled() {
		m.ev.Send(Event[K, V]{
			Time:     m.base.Add(time.Duration(m.now())),
			Key:      n.key,
			Value:    n.val,
			Deadline: m.timeOf(n.dl),
			Active:   active,
		})
	}
}

// lookup returns k's live node, or nil: a node whose deadline has passed is
// deleted on the spot (passive expiry). The fast path takes no lock.
func (m *Map[K, V]) lookup(k K) *node[K, V] {
	h, s := m.hash(k)
	n := s.tab.Load().lookup(h, k)
	if n != nil && !n.dl.isNone() && n.dl.passed(m.now()) {
		n = m.expirePassive(s, h, k)
	}
	return n
}

// expirePassive is the slow path of a read that found k expired: under the
// shard's mutex it deletes k if k is still expired, and otherwise returns
// k's node, which a Set or Expire replaced after the read. The
// clock is read again here: the caller's reading may predate that change,
// and deciding on it would report a key missing that never was.
func (m *Map[K, V]) expirePassive(s *shard[K, V], h uint64, k K) *node[K, V] {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, i := s.tab.Load().find(h, k)
	if b == nil {
		return nil
	}
	n := b.slots[i].Load()
	if n.dl.passed(m.now()) {
		s.remove(b, i, n)
		m.report(n, false)
		return nil
	}
	return n
}

// slot is a key's place in its shard, as acquire found it.
type slot[K comparable, V any] struct {
	s   *shard[K, V]
	h   uint64
	b   *bucket[K, V] // nil if the key is absent
	i   int
	n   *node[K, V] // the live node, nil if absent
	now int64       // the clock, if read (-1 if not)
}

// acquire locks k's shard and returns k's slot and live node. now is a
// clock reading the caller made already, or -1: the clock is then read only
// if the key carries a deadline. A node whose deadline has passed is
// deleted and reported first, and k is then absent. The caller unlocks
// sl.s.mu.
func (m *Map[K, V]) acquire(k K, now int64) slot[K, V] {
	h, s := m.hash(k)
	s.mu.Lock()
	sl := slot[K, V]{s: s, h: h, now: now}
	sl.b, sl.i = s.tab.Load().find(h, k)
	if sl.b == nil {
		return sl
	}
	sl.n = sl.b.slots[sl.i].Load()
	if !sl.n.dl.isNone() {
		if sl.now < 0 {
			sl.now = m.now()
		}
		if sl.n.dl.passed(sl.now) {
			s.remove(sl.b, sl.i, sl.n)
			m.report(sl.n, false)
			sl.b, sl.n = nil, nil
		}
	}
	return sl
}

// store gives k the value v and deadline d in sl. Caller holds sl.s.mu.
// A key that exists keeps the copy of k stored first, so a caller may pass
// a k that it reuses once the call returns when it knows the key exists.
func (sl *slot[K, V]) store(k K, v V, d deadline) {
	if sl.b != nil {
		sl.s.replace(sl.b, sl.i, sl.n, &node[K, V]{key: sl.n.key, val: v, dl: d})
		return
	}
	sl.s.add(sl.h, &node[K, V]{key: k, val: v, dl: d})
}

// Get returns the value of k. An expired key is deleted and reported
// missing (passive expiry).
func (m *Map[K, V]) Get(k K) (V, bool) {
	if n := m.lookup(k); n != nil {
		return n.val, true
	}
	var zero V
	return zero, false
}

// Set stores v under k with the deadline at, replacing any deadline k had:
// the zero Time stores k without a deadline (Redis SET), and a deadline not
// after now leaves k absent, as Redis SET ... PXAT in the past does.
func (m *Map[K, V]) Set(k K, v V, at time.Time) {
	if at.IsZero() {
		sl := m.acquire(k, -1)
		sl.store(k, v, none)
		sl.s.mu.Unlock()
		return
	}
	d, now := m.at(at), m.now()
	if d.passed(now) {
		m.Delete(k)
		return
	}
	sl := m.acquire(k, now)
	sl.store(k, v, d)
	sl.s.mu.Unlock()
}

// SetWithTTL stores v under k with a deadline ttl (> 0, else [ErrInvalid]) from
// now on the Map's clock (Redis SET ... PX).
func (m *Map[K, V]) SetWithTTL(k K, v V, ttl time.Duration) error {
	d, now, err := m.deadlineFor(ttl)
	if err != nil {
		return err
	}
	sl := m.acquire(k, now)
	sl.store(k, v, d)
	sl.s.mu.Unlock()
	return nil
}

// Deadline returns k's deadline: the zero Time and true if k exists without
// one, false if k is missing or expired. Redis TTL's answers follow: -2 for
// false, -1 for the zero Time, else the time left.
func (m *Map[K, V]) Deadline(k K) (time.Time, bool) {
	n := m.lookup(k)
	switch {
	case n == nil:
		return time.Time{}, false
	case n.dl.isNone():
		return time.Time{}, true
	}
	return m.timeOf(n.dl), true
}

// Delete removes k and returns the value it had and whether it was present
// (Redis DEL and GETDEL).
func (m *Map[K, V]) Delete(k K) (V, bool) {
	sl := m.acquire(k, -1)
	defer sl.s.mu.Unlock()
	if sl.b == nil {
		var zero V
		return zero, false
	}
	sl.s.remove(sl.b, sl.i, sl.n)
	return sl.n.val, true
}

// Expire gives an existing key the deadline at and returns the deadline it
// had (the zero Time if none) and whether the key exists. The zero Time
// removes the deadline (Redis PERSIST); a deadline not after now deletes the
// key (Redis EXPIREAT).
func (m *Map[K, V]) Expire(k K, at time.Time) (time.Time, bool) {
	d, now := none, int64(-1)
	if !at.IsZero() {
		d, now = m.at(at), m.now()
	}
	sl := m.acquire(k, now)
	defer sl.s.mu.Unlock()
	if sl.b == nil {
		return time.Time{}, false
	}
	var old time.Time
	if !sl.n.dl.isNone() {
		old = m.timeOf(sl.n.dl)
	}
	switch {
	case d.isNone():
		if !sl.n.dl.isNone() {
			sl.store(k, sl.n.val, none)
		}
	case d.passed(sl.now):
		sl.s.remove(sl.b, sl.i, sl.n)
	default:
		sl.store(k, sl.n.val, d)
	}
	return old, true
}

// Len returns the number of keys, counting expired keys no access or sample
// has found yet (Stats.StaleEstimate estimates their share). It takes no lock.
func (m *Map[K, V]) Len() int {
	n := int64(0)
	for i := range m.shards {
		n += m.shards[i].keys.Load()
	}
	return int(n)
}

// Range calls f for each live key and its value until f returns false,
// deleting expired keys (as Redis SCAN does). f runs without any lock held, so
// it may call the Map's methods; keys changed during Range may or may not be
// seen.
func (m *Map[K, V]) Range(f func(K, V) bool) {
	var buf, dead []*node[K, V]
	for i := range m.shards {
		s := &m.shards[i]
		buf, dead = buf[:0], dead[:0]
		now := m.now()
		s.tab.Load().each(func(n *node[K, V]) {
			if n.dl.passed(now) {
				dead = append(dead, n)
			} else {
				buf = append(buf, n)
			}
		})
		for _, n := range dead {
			m.lookup(n.key)
		}
		for _, n := range buf {
			if !f(n.key, n.val) {
				return
			}
		}
	}
}

// Scan calls f for the live keys of a part of the map and returns the
// cursor to pass to the next call, 0 when the whole map has been visited
// (start with 0). A key present during the whole iteration is visited at
// least once, even while the map grows or shrinks; a key may be visited
// more than once. count is how many keys to visit per call, roughly. This
// is Redis's SCAN.
func (m *Map[K, V]) Scan(cursor uint64, count int, f func(K, V)) uint64 {
	// The cursor walks each shard's buckets in reversed-bit order, which
	// stays valid across a table's doubling and halving.
	const bucketBits = 40
	si, v := cursor>>bucketBits, cursor&(1<<bucketBits-1)
	var dead []*node[K, V]
	for visited := 0; si < uint64(len(m.shards)); {
		s := &m.shards[si]
		t := s.tab.Load()
		now := m.now()
		t.eachIn(v, func(n *node[K, V]) {
			if n.dl.passed(now) {
				dead = append(dead, n)
				return
			}
			visited++
			f(n.key, n.val)
		})
		// Redis's reverse binary increment of the bucket index.
		v |= ^t.mask
		v = bits.Reverse64(v)
		v++
		v = bits.Reverse64(v)
		if v == 0 {
			si, v = si+1, 0
		}
		if visited >= max(count, 1) {
			break
		}
	}
	for _, n := range dead {
		m.lookup(n.key)
	}
	if si >= uint64(len(m.shards)) {
		return 0
	}
	return si<<bucketBits | v
}

// Clear removes every key (Redis FLUSHDB). No expiry events are sent.
func (m *Map[K, V]) Clear() {
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		s.tab.Store(newTable[K, V](1))
		s.dl = nil
		s.keys.Store(0)
		s.withDL.Store(0)
		s.mu.Unlock()
	}
}

// expireSample is the Map's Keyspace.ExpireSample: it examines up to n
// random keys that carry a deadline and deletes the expired ones, each counted as active
// expiry. Each sampled key comes from the next non-empty shard in a random
// permutation of the shards, at a random position in that shard's slice of
// keys with a deadline, so a round is a sample of the whole map, not of one
// shard, and it locks one shard for one key at a time; readers never wait
// for it. When no more than n keys carry a deadline it examines them all.
// The remaining time of the live keys it examines feeds Stats.AvgTTL.
func (m *Map[K, V]) expireSample(now time.Time, n int) (sampled, expired int) {
	// Sampling costs O(1) per sampled key, with no full scan and no heap: each
	// shard keeps the keys that carry a deadline in a dense slice, where each
	// key knows its position and so leaves in O(1). As a round samples the
	// whole map, no block of long-lived keys (nor a shard already cleaned) can
	// hide expired ones.
	t := m.at(now)
	tn, ok := t.nanos()
	if !ok {
		tn = math.MaxInt64
	}
	var ttlSum, live int64
	onExpired := func(nd *node[K, V]) { m.report(nd, true) }
	total := int64(0)
	for i := range m.shards {
		total += m.shards[i].withDL.Load()
	}
	if total <= int64(n) {
		for i := range m.shards {
			s := &m.shards[i]
			if s.withDL.Load() == 0 {
				continue
			}
			s.mu.Lock()
			for _, nd := range s.dl {
				if d, ok := nd.dl.nanos(); ok && d > tn {
					ttlSum += min(d-tn, math.MaxInt64/int64(n+1))
					live++
				}
			}
			sm, x := s.expireAll(tn, onExpired)
			s.mu.Unlock()
			sampled += sm
			expired += x
		}
		m.noteTTL(ttlSum, live)
		return sampled, expired
	}
	// An odd stride visits every shard once per len(m.shards) steps. The
	// round ends early only after two passes' worth of shards in a row
	// were empty, so that fewer than n keys examined means, as Keyspace
	// requires, that the keys with a deadline are gone (deleted
	// meanwhile).
	mask := uint64(len(m.shards) - 1)
	idx, stride := rand.Uint64(), rand.Uint64()|1
	for misses := uint64(0); sampled < n && misses < 2*(mask+1)+8; idx += stride {
		s := &m.shards[idx&mask]
		if s.withDL.Load() == 0 {
			misses++
			continue
		}
		var left int64
		sm, x := s.sampleOne(tn, onExpired, &left)
		if !sm {
			misses++
			continue
		}
		misses = 0
		sampled++
		if x {
			expired++
		} else if left > 0 {
			ttlSum += min(left, math.MaxInt64/int64(n+1))
			live++
		}
	}
	m.noteTTL(ttlSum, live)
	return sampled, expired
}

// noteTTL folds the average remaining time of live sampled keys into
// avgTTL, as Redis's active expiry estimates avg_ttl: each new sample
// weighs 2 %.
func (m *Map[K, V]) noteTTL(sum, live int64) {
	if live == 0 {
		return
	}
	avg := sum / live
	old := m.avgTTL.Load()
	if old == 0 {
		m.avgTTL.Store(avg)
		return
	}
	m.avgTTL.Store(old/50*49 + avg/50)
}

// Cycle runs one active-expiry cycle now; see [Expirer.Cycle]. With a
// negative Options.Interval it is the only active expiry.
func (m *Map[K, V]) Cycle(ctx context.Context) (CycleResult, error) { return m.exp.Cycle(ctx) }

// Close stops the active expirer and, once the queued events are delivered, the
// OnEvent worker, and waits until ctx ends (then its error wraps
// context.Cause(ctx) and says what still runs); later calls return nil once all
// has stopped.
func (m *Map[K, V]) Close(ctx context.Context) error {
	return errors.Join(m.exp.Close(ctx), m.ev.Close(ctx))
}
