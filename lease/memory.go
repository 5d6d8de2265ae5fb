package lease

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// memoryStore is the in-memory Store (see NewMemoryStore).
type memoryStore struct {
	clk clock.Clock
	// base is the store's creation time, when clk is the real clock;
	// else zero.
	base time.Time

	mu       sync.Mutex
	records  map[string]*record // live and retired, until swept or released
	byHolder map[string]*record // head of each holder's list of live leases
	live     []*record          // min-heap by deadline
	retired  []*record          // expired, not yet swept; FIFO
	used     int                // summed cost of live leases
	token    uint64             // last issued fencing token
	spare    []*record          // cleared records for reuse, at most maxSpare
}

var _ Store = (*memoryStore)(nil)

// record is one lease in the store.
type record struct {
	l        Lease
	deadline time.Time
	heap     int // index in live, -1 once retired
	// prev and next link the live leases of one holder.
	prev, next *record
}

// NewMemoryStore returns an empty in-memory Store that takes time from c
// (nil means the real clock) and lives as long as the process. Pass one to
// several Managers of one process to share its budget. No operation but List scans the store, and on the
// real clock a step of the wall clock moves no deadline.
func NewMemoryStore(c clock.Clock) Store {
	// It keeps one mutex, a map of records, a per-holder index, a running
	// total of live units and a min-heap of live leases by deadline. Every
	// operation first retires the leases whose deadline has passed (O(log n)
	// each, once per lease), so expired leases are absent for reads and the
	// budget at once, and no operation scans the whole store except List.
	// Sweep then only drops retired records. On the real clock it reads the
	// time as its creation time plus the monotonic time elapsed since. A
	// Manager on the same clock takes the store's times as the moments its
	// calls were sent, and reads no clock of its own.
	if c == nil {
		c = clock.New()
	}
	s := &memoryStore{
		clk:      c,
		records:  make(map[string]*record),
		byHolder: make(map[string]*record),
	}
	if reflect.TypeOf(c) == realClock {
		s.base = time.Now()
	}
	return s
}

// realClock is the type of clock.New()'s clock: every value of it reads
// the real time.
var realClock = reflect.TypeOf(clock.New())

// clock returns the clock the store reads: a Manager on the same clock
// takes the store's times as the moments its calls were sent.
func (s *memoryStore) clock() clock.Clock { return s.clk }

// now reads the store's clock.
func (s *memoryStore) now() time.Time {
	if !s.base.IsZero() {
		return s.base.Add(time.Since(s.base))
	}
	return s.clk.Now()
}

// ctxErr returns the error of a call whose context has ended before it
// began: it changed nothing.
func ctxErr(ctx context.Context) error {
	if ctx.Err() != nil {
		return notApplied(errs.Canceled(ctx, "lease", "memory store"))
	}
	return nil
}

// Grant implements Store.
func (s *memoryStore) Grant(ctx context.Context, a GrantArgs) (Lease, error) {
	if err := a.Validate(); err != nil {
		return Lease{}, err
	}
	var l Lease
	err := s.grant(ctx, a, &l)
	return l, err
}

// grant is Grant on valid args, storing the lease in *out, so that the
// lease is copied once.
func (s *memoryStore) grant(ctx context.Context, a GrantArgs, out *Lease) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.retire()
	if r, dup := s.records[a.ID]; dup {
		if r.l.Holder != a.Holder {
			return errs.Invalid(ErrInvalid, "lease: ID %s is another holder's lease", a.ID)
		}
		*out = r.l
		return nil // a repeat of that grant (see Store.Grant)
	}
	available := max(a.Budget-s.used, 0)
	if a.Overloaded {
		return &RejectedError{Err: ErrOverloaded, Available: available}
	}
	h := s.byHolder[a.Holder] // the holder's newest live lease, if any
	if a.OnePerHolder && h != nil {
		return &RejectedError{Err: ErrHolderHasLease, Available: available, Existing: h.l.ID}
	}
	cost := 0
	for _, c := range a.Costs {
		if c <= available {
			cost = c
			break
		}
	}
	if cost == 0 {
		return &RejectedError{Err: ErrOverCapacity, Available: available}
	}
	s.token++
	r := s.alloc()
	exp := now.Add(a.TTL)
	r.l = Lease{
		ID: a.ID, Holder: a.Holder, Resource: a.Resource, Cost: cost, Token: s.token,
		CreatedAt: now, ExpiresAt: exp, HeartbeatAt: now, Grace: a.Grace,
	}
	// Deadline(), computed from the parts at hand.
	if hb := now.Add(a.Grace); hb.Before(exp) {
		r.deadline = hb
	} else {
		r.deadline = exp
	}
	s.records[a.ID] = r
	s.used += cost
	s.push(r)
	if h != nil {
		r.next, h.prev = h, r
	}
	s.byHolder[a.Holder] = r
	*out = r.l
	return nil
}

// Heartbeat implements Store.
func (s *memoryStore) Heartbeat(ctx context.Context, id, holder string) (Lease, error) {
	var l Lease
	err := s.heartbeat(ctx, id, holder, &l)
	return l, err
}

// heartbeat is Heartbeat storing the lease in *out.
func (s *memoryStore) heartbeat(ctx context.Context, id, holder string, out *Lease) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.retire()
	r, err := s.find(id, holder)
	if err != nil {
		return err
	}
	r.l.HeartbeatAt = now
	// Deadline(), computed from the parts at hand.
	if hb := now.Add(r.l.Grace); hb.Before(r.l.ExpiresAt) {
		r.deadline = hb
	} else {
		r.deadline = r.l.ExpiresAt
	}
	// The deadline only moves later, unless an injected clock went back.
	s.down(r.heap)
	s.up(r.heap)
	*out = r.l
	return nil
}

// Release implements Store.
func (s *memoryStore) Release(ctx context.Context, id, holder string) (Lease, error) {
	var l Lease
	err := s.release(ctx, id, holder, &l)
	return l, err
}

// release is Release storing the lease in *out.
func (s *memoryStore) release(ctx context.Context, id, holder string, out *Lease) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retire()
	r, err := s.find(id, holder)
	if err != nil {
		return err
	}
	s.remove(r.heap)
	s.unlink(r)
	delete(s.records, id)
	*out = r.l
	s.free(r)
	return nil
}

// Get implements Store.
func (s *memoryStore) Get(ctx context.Context, id string) (Lease, error) {
	if err := ctxErr(ctx); err != nil {
		return Lease{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retire()
	r, err := s.find(id, "")
	if err != nil {
		return Lease{}, err
	}
	return r.l, nil
}

// List implements Store.
func (s *memoryStore) List(ctx context.Context) ([]Lease, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.retire()
	out := make([]Lease, len(s.live))
	for i, r := range s.live {
		out[i] = r.l
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Lease) int {
		switch {
		case a.Token < b.Token:
			return -1
		case a.Token > b.Token:
			return 1
		}
		return 0
	})
	return out, nil
}

// Usage implements Store.
func (s *memoryStore) Usage(ctx context.Context) (units, leases int, err error) {
	if err := ctxErr(ctx); err != nil {
		return 0, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retire()
	return s.used, len(s.live), nil
}

// Sweep implements Store.
func (s *memoryStore) Sweep(ctx context.Context, limit int) ([]Lease, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, errs.Invalid(ErrInvalid, "lease: sweep limit (%d) must be > 0", limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.retire()
	n := min(limit, len(s.retired))
	if n == 0 {
		return nil, nil
	}
	out := make([]Lease, n)
	for i, r := range s.retired[:n] {
		out[i] = r.l
		delete(s.records, r.l.ID)
		s.free(r)
	}
	clear(s.retired[:n])
	s.retired = s.retired[n:]
	if len(s.retired) == 0 {
		s.retired = nil // let the backing array go
	}
	return out, nil
}

// alloc returns a zeroed record, recycled if one is free. Callers hold s.mu.
func (s *memoryStore) alloc() *record {
	if n := len(s.spare); n > 0 {
		r := s.spare[n-1]
		s.spare[n-1] = nil
		s.spare = s.spare[:n-1]
		return r
	}
	return new(record)
}

// maxSpare bounds the records kept for reuse.
const maxSpare = 64

// free clears r, no longer referenced by the store, and keeps it for reuse
// while fewer than maxSpare are kept: released and swept records are
// recycled under s.mu, so a grant then allocates no record. Callers hold
// s.mu.
func (s *memoryStore) free(r *record) {
	*r = record{}
	if len(s.spare) < maxSpare {
		s.spare = append(s.spare, r)
	}
}

// find returns the live record id, or ErrNotFound, ErrWrongHolder (holder
// is set and the record is another's) or ErrExpired, checked in that order.
func (s *memoryStore) find(id, holder string) (*record, error) {
	r := s.records[id]
	switch {
	case r == nil:
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	case holder != "" && r.l.Holder != holder:
		return nil, fmt.Errorf("%w: %s", ErrWrongHolder, id)
	case r.heap < 0:
		return nil, fmt.Errorf("%w: %s", ErrExpired, id)
	}
	return r, nil
}

// retire moves every lease whose deadline is at or before now from the live
// set to the retired list, and returns now. Callers hold s.mu.
func (s *memoryStore) retire() time.Time {
	now := s.now()
	for len(s.live) > 0 && !now.Before(s.live[0].deadline) {
		r := s.live[0]
		s.remove(0)
		s.unlink(r)
		s.retired = append(s.retired, r)
	}
	return now
}

// unlink takes r out of its holder's list.
func (s *memoryStore) unlink(r *record) {
	if r.prev != nil {
		r.prev.next = r.next
	} else if r.next != nil {
		s.byHolder[r.l.Holder] = r.next
	} else {
		delete(s.byHolder, r.l.Holder)
	}
	if r.next != nil {
		r.next.prev = r.prev
	}
	r.prev, r.next = nil, nil
}

// The live heap: a binary min-heap on deadline, each record knowing its
// index, so removal and a heartbeat's re-position are O(log n).

func (s *memoryStore) push(r *record) {
	r.heap = len(s.live)
	s.live = append(s.live, r)
	s.up(r.heap)
}

// remove takes the record at index i out of the heap and of the budget.
func (s *memoryStore) remove(i int) {
	r := s.live[i]
	last := len(s.live) - 1
	if i != last {
		s.swap(i, last)
	}
	s.live[last] = nil
	s.live = s.live[:last]
	if i != last {
		s.down(i)
		s.up(i)
	}
	r.heap = -1
	s.used -= r.l.Cost
}

func (s *memoryStore) less(i, j int) bool { return s.live[i].deadline.Before(s.live[j].deadline) }

func (s *memoryStore) swap(i, j int) {
	s.live[i], s.live[j] = s.live[j], s.live[i]
	s.live[i].heap, s.live[j].heap = i, j
}

func (s *memoryStore) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *memoryStore) down(i int) {
	n := len(s.live)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && s.less(c+1, c) {
			c++
		}
		if !s.less(c, i) {
			return
		}
		s.swap(i, c)
		i = c
	}
}
