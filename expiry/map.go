package expiry

import (
	"context"
	"errors"
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/internal/event"
)

const (
	// NoDeadline is the TTL of a key that exists without a deadline (Redis -1).
	NoDeadline time.Duration = -1
	// Missing is the TTL of a missing or expired key (Redis -2).
	Missing time.Duration = -2
)

// Map is a concurrent map whose keys may carry a deadline, with Redis's
// expiry semantics: no method ever returns or counts a key it finds
// expired (passive expiry deletes it on the spot), and an Expirer started
// by NewMap reclaims the expired keys nobody reads (active expiry).
//
// The map is sharded; each shard has a read-write lock, so Get takes a
// read lock and allocates nothing. The clock is read only for keys that
// carry a deadline, outside the lock.
//
// A Map must be created with NewMap. After Close it keeps working as a map
// with passive expiry only, and delivers no more events.
type Map[K comparable, V any] struct {
	shards []shard[K, V]
	mask   uint64
	seed   maphash.Seed
	clk    clock.Clock // nil: real time
	base   time.Time   // deadlines are nanoseconds since base
	exp    *Expirer
	ev     *event.Queue[Event[K, V]] // nil without OnEvent

	expiredPassive atomic.Uint64
	expiredActive  atomic.Uint64
}

// NewMap validates opts and returns an empty Map whose active expirer is
// running (unless opts.Manual). Close stops it. Bad options return an error
// that names the field and matches ErrInvalid.
func NewMap[K comparable, V any](opts MapOptions[K, V]) (*Map[K, V], error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	n := o.Shards
	if n == 0 {
		n = max(DefaultMinShards, 16*runtime.GOMAXPROCS(0))
	}
	n = 1 << bits.Len(uint(n-1)) // round up to a power of two
	m := &Map[K, V]{
		shards: make([]shard[K, V], n),
		mask:   uint64(n - 1),
		seed:   maphash.MakeSeed(),
		clk:    o.Clock,
	}
	for i := range m.shards {
		m.shards[i].m = make(map[K]entry[V])
	}
	if m.clk != nil {
		m.base = m.clk.Now()
	} else {
		m.base = time.Now()
	}
	m.exp, err = NewExpirer(m, o.Options)
	if err != nil {
		return nil, err
	}
	m.ev = event.New(o.OnEvent, o.EventQueue, o.Logger, "expiry")
	if err := m.exp.Start(); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Map[K, V]) shard(k K) *shard[K, V] {
	return &m.shards[maphash.Comparable(m.seed, k)&m.mask]
}

// now returns the current time in nanoseconds since m.base.
func (m *Map[K, V]) now() int64 {
	if m.clk == nil {
		return int64(time.Since(m.base))
	}
	return int64(m.clk.Now().Sub(m.base))
}

// at converts a time to nanoseconds since m.base, clamped below noDeadline.
func (m *Map[K, V]) at(t time.Time) int64 {
	d := int64(t.Sub(m.base))
	if d >= noDeadline {
		d = noDeadline - 1
	}
	return d
}

// deadlineFor returns now+ttl or ErrInvalidTTL.
func (m *Map[K, V]) deadlineFor(ttl time.Duration) (int64, error) {
	if ttl <= 0 {
		return 0, errs.Invalid(ErrInvalidTTL, "expiry: invalid ttl: %v is not positive", ttl)
	}
	now := m.now()
	if int64(ttl) >= noDeadline-now {
		return 0, errs.Invalid(ErrInvalidTTL, "expiry: invalid ttl: %v overflows the deadline", ttl)
	}
	return now + int64(ttl), nil
}

// expire deletes k, whose entry e was found expired, and reports it.
// Caller holds s.mu.
func (m *Map[K, V]) expire(s *shard[K, V], k K, e entry[V], r Reason) {
	s.remove(k, e)
	m.report(k, e, r)
}

// report counts the expiry of k, whose entry was e, and sends its event.
func (m *Map[K, V]) report(k K, e entry[V], r Reason) {
	if r == ReasonPassive {
		m.expiredPassive.Add(1)
	} else {
		m.expiredActive.Add(1)
	}
	if m.ev.Enabled() {
		m.ev.Send(Event[K, V]{
			Kind:     EventExpired,
			Time:     m.base.Add(time.Duration(m.now())),
			Key:      k,
			Value:    e.val,
			Reason:   r,
			Deadline: m.base.Add(time.Duration(e.deadline)),
		})
	}
}

// expiredLocked reports whether k's entry e is expired, reading the clock
// only if e has a deadline, and deletes it if so. Caller holds s.mu.
func (m *Map[K, V]) expiredLocked(s *shard[K, V], k K, e entry[V]) bool {
	if e.deadline == noDeadline || e.deadline > m.now() {
		return false
	}
	m.expire(s, k, e, ReasonPassive)
	return true
}

// expirePassive is the slow path of a read that found k expired: under the
// write lock it deletes k if k is still expired, and otherwise returns k's
// entry, which a Set, Expire or Persist changed after the read. The clock
// is read again here: the caller's reading may predate that change, and
// deciding on it would report a key missing that never was.
func (m *Map[K, V]) expirePassive(s *shard[K, V], k K) (entry[V], bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[k]
	if !ok || m.expiredLocked(s, k, e) {
		return entry[V]{}, false
	}
	return e, true
}

// Get returns the value of k. An expired key is deleted and reported
// missing (passive expiry).
func (m *Map[K, V]) Get(k K) (V, bool) {
	s := m.shard(k)
	s.mu.RLock()
	e, ok := s.m[k]
	s.mu.RUnlock()
	if ok && e.deadline != noDeadline && e.deadline <= m.now() {
		e, ok = m.expirePassive(s, k)
	}
	return e.val, ok
}

// Set stores v under k and clears any deadline (Redis SET).
func (m *Map[K, V]) Set(k K, v V) {
	s := m.shard(k)
	s.mu.Lock()
	e, ok := s.m[k]
	s.m[k] = entry[V]{val: v, deadline: noDeadline}
	if ok && e.deadline != noDeadline {
		if e.deadline <= m.now() {
			m.report(k, e, ReasonPassive)
		}
		s.lostDeadline()
	}
	s.mu.Unlock()
}

// SetWithTTL stores v under k with a deadline ttl from now. A ttl that is
// not positive, or overflows, returns ErrInvalidTTL and changes nothing.
func (m *Map[K, V]) SetWithTTL(k K, v V, ttl time.Duration) error {
	d, err := m.deadlineFor(ttl)
	if err != nil {
		return err
	}
	m.setDeadline(k, v, d, d-int64(ttl))
	return nil
}

// SetWithDeadline stores v under k with the deadline at. If at is not after
// now, the key ends up absent, as with Redis SET ... EXAT in the past.
func (m *Map[K, V]) SetWithDeadline(k K, v V, at time.Time) {
	d, now := m.at(at), m.now()
	if d <= now {
		m.Delete(k)
		return
	}
	m.setDeadline(k, v, d, now)
}

func (m *Map[K, V]) setDeadline(k K, v V, d, now int64) {
	s := m.shard(k)
	s.mu.Lock()
	e, ok := s.m[k]
	if ok && e.deadline <= now {
		m.expire(s, k, e, ReasonPassive)
		ok = false
	}
	if !ok {
		e = entry[V]{deadline: noDeadline}
	}
	e.val = v
	s.giveDeadline(k, &e, d)
	s.m[k] = e
	s.mu.Unlock()
}

// Deadline returns k's deadline: the zero Time and true if k exists without
// one, false if k is missing or expired.
func (m *Map[K, V]) Deadline(k K) (time.Time, bool) {
	d, ok := m.deadline(k)
	if !ok {
		return time.Time{}, false
	}
	if d == noDeadline {
		return time.Time{}, true
	}
	return m.base.Add(time.Duration(d)), true
}

// deadline returns k's raw deadline, expiring k passively if due.
func (m *Map[K, V]) deadline(k K) (int64, bool) {
	s := m.shard(k)
	s.mu.RLock()
	e, ok := s.m[k]
	s.mu.RUnlock()
	if !ok {
		return 0, false
	}
	if e.deadline != noDeadline && e.deadline <= m.now() {
		if e, ok = m.expirePassive(s, k); !ok {
			return 0, false
		}
	}
	return e.deadline, true
}

// TTL returns the time k has left, NoDeadline if k exists without a
// deadline, or Missing if k is missing or expired (Redis TTL's -1 and -2).
func (m *Map[K, V]) TTL(k K) time.Duration {
	d, ok := m.deadline(k)
	switch {
	case !ok:
		return Missing
	case d == noDeadline:
		return NoDeadline
	}
	// Never report 0 or less for a live key: that would read as expired
	// or as one of the sentinels.
	return max(time.Duration(d-m.now()), 1)
}

// Delete removes k and reports whether it was present (an expired key
// counts as absent, as with Redis DEL).
func (m *Map[K, V]) Delete(k K) bool {
	s := m.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[k]
	if !ok || m.expiredLocked(s, k, e) {
		return false
	}
	s.remove(k, e)
	return true
}

// Expire gives an existing key a deadline ttl from now and reports whether
// the key exists. A ttl that is not positive, or overflows, returns
// ErrInvalidTTL and changes nothing.
func (m *Map[K, V]) Expire(k K, ttl time.Duration) (bool, error) {
	d, err := m.deadlineFor(ttl)
	if err != nil {
		return false, err
	}
	return m.expireAt(k, d, d-int64(ttl)), nil
}

// ExpireAt gives an existing key the deadline at and reports whether the
// key exists. A deadline not after now deletes the key (and returns true),
// as Redis EXPIREAT in the past does.
func (m *Map[K, V]) ExpireAt(k K, at time.Time) bool {
	return m.expireAt(k, m.at(at), m.now())
}

func (m *Map[K, V]) expireAt(k K, d, now int64) bool {
	s := m.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[k]
	if !ok {
		return false
	}
	if e.deadline <= now {
		m.expire(s, k, e, ReasonPassive)
		return false
	}
	if d <= now {
		s.remove(k, e)
		return true
	}
	s.giveDeadline(k, &e, d)
	s.m[k] = e
	return true
}

// Persist removes k's deadline and reports whether there was one.
func (m *Map[K, V]) Persist(k K) bool {
	s := m.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[k]
	if !ok || e.deadline == noDeadline || m.expiredLocked(s, k, e) {
		return false
	}
	e.deadline = noDeadline
	s.m[k] = e
	s.lostDeadline()
	return true
}

// Len returns the number of keys, not counting keys known to be expired
// (those are deleted when found). Keys whose deadline passed but that no
// access or sample has found yet are counted; Stats.StaleEstimate
// estimates their share.
func (m *Map[K, V]) Len() int {
	n := 0
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}

// Range calls f for each live key and its value until f returns false.
// Expired keys are skipped and deleted (passive expiry, as Redis SCAN
// does), so that Len no longer counts them. f runs without any lock held,
// so it may call the Map's methods; keys changed during Range may or may
// not be seen.
func (m *Map[K, V]) Range(f func(K, V) bool) {
	type kv struct {
		k K
		v V
	}
	var buf []kv
	var dead []K
	for i := range m.shards {
		s := &m.shards[i]
		buf, dead = buf[:0], dead[:0]
		s.mu.RLock()
		now := m.now()
		for k, e := range s.m {
			if e.deadline > now {
				buf = append(buf, kv{k, e.val})
			} else {
				dead = append(dead, k)
			}
		}
		s.mu.RUnlock()
		for _, k := range dead {
			m.expirePassive(s, k)
		}
		for _, p := range buf {
			if !f(p.k, p.v) {
				return
			}
		}
	}
}

// Clear removes every key (Redis FLUSHDB). No expiry events are sent.
func (m *Map[K, V]) Clear() {
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		s.m = make(map[K]entry[V])
		s.dl = nil
		s.live = 0
		s.n.Store(0)
		s.mu.Unlock()
	}
}

// ExpireSample implements Keyspace: it examines up to n random keys that
// carry a deadline and deletes the expired ones, each counted as active
// expiry. Each sampled key comes from the next non-empty shard in a random
// permutation of the shards, at a random position in that shard's deadline
// slice, so a round is a sample of the whole map, not of one shard, and it
// locks one shard for one key at a time. When no more than n keys carry a
// deadline it examines them all.
func (m *Map[K, V]) ExpireSample(now time.Time, n int) (sampled, expired int) {
	t := m.at(now)
	onExpired := func(k K, e entry[V]) { m.report(k, e, ReasonActive) }
	total := int64(0)
	for i := range m.shards {
		total += m.shards[i].n.Load()
	}
	if total <= int64(n) {
		for i := range m.shards {
			s := &m.shards[i]
			if s.n.Load() == 0 {
				continue
			}
			s.mu.Lock()
			sm, x := s.expireAll(t, onExpired)
			s.mu.Unlock()
			sampled += sm
			expired += x
		}
		return sampled, expired
	}
	// An odd stride visits every shard once per len(m.shards) steps. The
	// round ends early only after two passes' worth of shards in a row
	// were empty or met only stale slots (each such miss drops up to 4),
	// so that fewer than n keys examined means, as Keyspace requires, that
	// the keys with a deadline are gone (deleted meanwhile).
	idx, stride := rand.Uint64(), rand.Uint64()|1
	for misses := uint64(0); sampled < n && misses < 2*(m.mask+1)+8; idx += stride {
		s := &m.shards[idx&m.mask]
		if s.n.Load() == 0 {
			misses++
			continue
		}
		sm, x := s.sampleOne(t, onExpired)
		if !sm {
			misses++
			continue
		}
		misses = 0
		sampled++
		if x {
			expired++
		}
	}
	return sampled, expired
}

// Cycle runs one active-expiry cycle now; see Expirer.Cycle.
func (m *Map[K, V]) Cycle(ctx context.Context) (CycleResult, error) { return m.exp.Cycle(ctx) }

// Close stops the active expirer and the OnEvent worker, after it has
// delivered the events already queued, and waits for both until ctx ends;
// then it returns an error that wraps context.Cause(ctx) and says what is
// still running. Close is idempotent: a later call waits the same way and
// returns nil once everything has stopped.
func (m *Map[K, V]) Close(ctx context.Context) error {
	return errors.Join(m.exp.Close(ctx), m.ev.Close(ctx))
}
