package pool

import (
	"context"
	"errors"
	"fmt"
	"github.com/ttlkit/ttlkit/pool/shared"
	"sort"
	"strconv"
	"sync/atomic"
	"time"
)

// sharedSet is the idle set of a Pool with an Inventory: the idle items of
// every instance sharing it, which this instance pops and puts back, and
// records of the items each instance holds, so that the warm target and
// MaxIdle are the fleet's and Reconcile knows every instance's items. p.idle
// only carries items to waiters of this instance.
type sharedSet[T any] struct {
	p   *Pool[T]
	inv shared.Inventory

	replenishing   atomic.Bool // one replenish at a time
	replenishKicks atomic.Int32
	tokenSeq       atomic.Int64 // reservation tokens
}

var _ idleSet[int] = (*sharedSet[int])(nil)

// settle hands h to a waiter of this instance, if one waits, and else puts
// it back into the shared idle set (Release waits for the Inventory).
func (s *sharedSet[T]) settle(h *Handle[T]) {
	p := s.p
	if !p.closed.Load() && !h.lost.Load() && !h.isDead() && p.nwait.Load() > 0 && p.offerDispatch(h) {
		return
	}
	p.mu.Lock()
	if r := p.dropReasonLocked(h); r != "" {
		p.destroyLocked(h, r)
		p.checkDrainedLocked()
		p.mu.Unlock()
		return
	}
	h.state.Store(stateReturning)
	p.mu.Unlock()
	s.put(h)
}

// tryAcquire pops an item from the shared idle set when nothing is waiting
// here and there is capacity.
func (s *sharedSet[T]) tryAcquire(ctx context.Context) (*Handle[T], error) {
	p := s.p
	p.mu.Lock()
	if p.closedLocked {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if p.nwait.Load() != 0 || p.totalLocked() >= p.opts.MaxSize {
		p.mu.Unlock()
		return nil, ErrUnavailable
	}
	p.creating++ // a slot for the pop
	p.mu.Unlock()
	h, err := s.pop(ctx)
	if h != nil && p.checkOnAcquire && p.check(ctx, h.value) != nil {
		p.destroyClaimed(h, ReasonUnhealthy)
		h = nil
	}
	p.mu.Lock()
	p.creating--
	if h != nil {
		p.addItemLocked(h)
		if p.closedLocked {
			p.destroyLocked(h, reasonShutdown)
			h = nil
		} else if h.isDead() {
			p.destroyLocked(h, ReasonDied)
			h = nil
		} else {
			h.state.Store(stateInUse)
		}
	}
	p.mu.Unlock()
	if h != nil {
		s.kick()
		return h, nil
	}
	if err != nil {
		return nil, err
	}
	return nil, ErrUnavailable
}

// warmLocked is 0: the fleet's warm target is refilled by replenish, which
// counts every instance's idle items and creates in flight.
func (s *sharedSet[T]) warmLocked() int { return 0 }

// pop takes an idle item from the Inventory, skipping (and
// destroying) expired and dead ones, and watches it. It returns nil, nil when the idle set is empty.
func (s *sharedSet[T]) pop(ctx context.Context) (*Handle[T], error) {
	p := s.p
	for {
		rec, ok, err := s.inv.Pop(ctx, p.opts.Instance, p.heldTTL())
		if err != nil {
			return nil, fmt.Errorf("pool: inventory pop: %w", err)
		}
		if !ok {
			return nil, nil
		}
		h, err := p.fromRecord(rec)
		if err != nil {
			p.warn("inventory", err, "id", rec.ID)
			_, _ = s.inv.Remove(ctx, rec.ID)
			continue
		}
		if r := p.expired(h, p.clock.Now()); r != "" {
			p.destroyClaimed(h, r)
			continue
		}
		if !p.watch(h) { // it died while idle in the Inventory
			p.destroyClaimed(h, ReasonDied)
			continue
		}
		return h, nil
	}
}

// put returns h (state returning, in p.items) to the shared idle set,
// or destroys it when the set is full or the record was lost. An item whose
// record may have reached the idle set is never destroyed here.
func (s *sharedSet[T]) put(h *Handle[T]) {
	p := s.p
	rec, err := p.record(h, p.opts.Instance)
	out := putHeld
	if err == nil {
		out, err = s.putRecord(rec)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch out {
	case putDone, putGone:
		p.removeItemLocked(h)
		h.state.Store(stateGone) // the fleet's now; a later pop makes a new Handle
		p.fillLocked()
	case putFull:
		p.destroyLocked(h, reasonIdle)
	default:
		p.destroyLocked(h, ReasonLost)
	}
	p.checkDrainedLocked()
	if err != nil {
		p.warn("inventory put", err, "id", h.id)
	}
}

// register records h, just created, as in use by this instance.
func (s *sharedSet[T]) register(h *Handle[T], call uint64, started time.Time) (bool, error) {
	p := s.p
	rec, err := p.record(h, p.opts.Instance)
	out := addUnknown
	if err == nil {
		out, err = s.addRecord(rec, started)
	}
	switch out {
	case addDone:
		return true, nil
	case addTaken:
		// Another instance claimed it as an orphan meanwhile: the record
		// is theirs, and so is the destroy.
		p.mu.Lock()
		p.endCreateLocked(call)
		p.mu.Unlock()
		return false, err
	default:
		// Not recorded as far as anyone knows, and never idle: only this
		// instance can have it.
		p.mu.Lock()
		p.endCreateLocked(call)
		p.destroyingLocked(h)
		p.mu.Unlock()
		go p.destroy(h, reasonEvicted)
		return false, err
	}
}

// claimValue records v, unknown to every instance, as this instance's
// before it is destroyed. It reports false when another instance recorded
// it first. An Add that failed otherwise cannot have left the record idle,
// so v is destroyed anyway.
func (s *sharedSet[T]) claimValue(id string, v T) bool {
	p := s.p
	data, err := p.codec.Encode(v)
	if err != nil {
		p.warn("inventory add", fmt.Errorf("pool: encode: %w", err), "id", id)
		return true
	}
	ctx, cancel := p.ioContext()
	defer cancel()
	err = s.inv.Add(ctx, shared.Record{ID: id, Owner: p.opts.Instance, Data: data, Created: p.clock.Now()}, p.heldTTL())
	if errors.Is(err, shared.ErrExists) {
		return false
	}
	if err != nil {
		p.warn("inventory add", err, "id", id)
	}
	return true
}

// forget removes the record of id, whose item was destroyed, within
// DestroyTimeout.
func (s *sharedSet[T]) forget(id string) {
	ctx, cancel := s.p.ioContext()
	defer cancel()
	if _, err := s.inv.Remove(ctx, id); err != nil {
		s.p.warn("inventory remove", err, "id", id)
	}
}

func (s *sharedSet[T]) remove(ctx context.Context, id string) error {
	_, err := s.inv.Remove(ctx, id)
	return err
}

func (s *sharedSet[T]) records(ctx context.Context) ([]shared.Record, error) {
	return s.inv.Records(ctx)
}

// claimOrphan records the orphan l as this instance's, atomically: Add
// fails if its creator got there first, and the creator's Add fails if the
// orphan was claimed, so the creator never uses an item being destroyed.
func (s *sharedSet[T]) claimOrphan(ctx context.Context, l Listed[T], now time.Time, errs *[]error) bool {
	p := s.p
	data, err := p.codec.Encode(l.Value)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("pool: encode orphan %s: %w", l.ID, err))
		return false
	}
	created := l.Created
	if created.IsZero() {
		created = now
	}
	err = s.inv.Add(ctx, shared.Record{ID: l.ID, Owner: p.opts.Instance, Data: data, Created: created}, p.heldTTL())
	if errors.Is(err, shared.ErrExists) {
		return false // known after all
	}
	if err != nil {
		*errs = append(*errs, fmt.Errorf("pool: inventory add orphan %s: %w", l.ID, err))
		return false
	}
	return true
}

// reconcile drops the shared idle records of items the provider no longer
// lists, and asks for a replenish whatever it dropped: the fleet's warm set
// is counted anew from the Inventory.
func (s *sharedSet[T]) reconcile(ctx context.Context, recs []shared.Record, listed map[string]bool, listStart time.Time, res *Result) (bool, error) {
	return true, s.dropUnlisted(ctx, recs, listed, listStart, res)
}

// The janitor's side: the idle set every instance shares is pruned, checked
// and replenished by every instance's janitor.

// prune refreshes this instance's in-use records and prunes the
// shared idle set like prune prunes the local one.
func (s *sharedSet[T]) prune(ctx context.Context, now time.Time) (int, error) {
	p := s.p
	destroyed := 0
	// Items parked locally for a waiter that was served otherwise go back
	// to the fleet.
	p.mu.Lock()
	local := p.drainIdleLocked()
	for _, h := range local {
		h.state.Store(stateReturning)
	}
	p.mu.Unlock()
	for _, h := range local {
		s.put(h)
	}
	p.mu.Lock()
	var ids []string
	for _, h := range p.items {
		if st := h.state.Load(); st != stateGone && st != stateForced {
			ids = append(ids, h.id)
		}
	}
	p.mu.Unlock()
	var errs []error
	if len(ids) > 0 {
		lost, err := s.inv.Touch(ctx, p.opts.Instance, ids, p.heldTTL())
		if err != nil {
			errs = append(errs, fmt.Errorf("pool: inventory touch: %w", err))
		}
		if len(lost) > 0 {
			set := map[string]bool{}
			for _, id := range lost {
				set[id] = true
			}
			p.mu.Lock()
			for _, h := range p.items {
				if set[h.id] {
					h.lost.Store(true)
				}
			}
			p.mu.Unlock()
		}
	}
	recs, err := s.inv.Records(ctx)
	if err != nil {
		return destroyed, errors.Join(append(errs, fmt.Errorf("pool: inventory records: %w", err))...)
	}
	var idle []*Handle[T]
	for _, r := range recs {
		if r.Owner != "" {
			continue
		}
		h, err := p.fromRecord(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		idle = append(idle, h)
	}
	sort.Slice(idle, func(i, j int) bool { return lastUse(idle[i]) < lastUse(idle[j]) })
	excess := len(idle) - p.opts.MinIdle
	for _, h := range idle {
		r := p.pruneReason(h, now, excess > 0)
		if r == "" {
			continue
		}
		ok, err := s.inv.Claim(ctx, h.id, p.opts.Instance, p.heldTTL())
		if err != nil {
			errs = append(errs, fmt.Errorf("pool: inventory claim: %w", err))
			continue
		}
		if ok { // else another instance took it meanwhile
			excess--
			destroyed++
			p.destroyClaimed(h, r)
		}
	}
	return destroyed, errors.Join(errs...)
}

// check health-checks the shared idle set: each item is claimed,
// checked, and put back or destroyed.
func (s *sharedSet[T]) check(ctx context.Context, res *Result) error {
	p := s.p
	recs, err := s.inv.Records(ctx)
	if err != nil {
		return fmt.Errorf("pool: inventory records: %w", err)
	}
	var errs []error
	for _, r := range recs {
		if r.Owner != "" {
			continue
		}
		h, err := p.fromRecord(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ok, err := s.inv.Claim(ctx, r.ID, p.opts.Instance, p.heldTTL())
		if err != nil || !ok {
			if err != nil {
				errs = append(errs, fmt.Errorf("pool: inventory claim: %w", err))
			}
			continue
		}
		res.Checked++
		if p.check(ctx, h.value) != nil {
			res.Unhealthy++
			p.destroyClaimed(h, ReasonUnhealthy)
			continue
		}
		back := r
		back.Owner = p.opts.Instance
		out, err := s.putRecord(back)
		if err != nil {
			errs = append(errs, err)
		}
		switch out {
		case putFull, putHeld, putNotHeld: // refilled meanwhile beyond MaxIdle, or lost
			p.destroyClaimed(h, reasonIdle)
		}
	}
	return errors.Join(errs...)
}

// dropUnlisted forgets the shared idle records of items the provider
// no longer lists (created before the list was taken).
func (s *sharedSet[T]) dropUnlisted(ctx context.Context, recs []shared.Record, listed map[string]bool, listStart time.Time, res *Result) error {
	p := s.p
	var errs []error
	for _, r := range recs {
		if r.Owner != "" || listed[r.ID] || !r.Created.Before(listStart) {
			continue
		}
		ok, err := s.inv.Claim(ctx, r.ID, p.opts.Instance, p.heldTTL())
		if err != nil {
			errs = append(errs, fmt.Errorf("pool: inventory claim: %w", err))
			continue
		}
		if !ok {
			continue
		}
		if _, err := s.inv.Remove(ctx, r.ID); err != nil {
			errs = append(errs, fmt.Errorf("pool: inventory remove: %w", err))
			continue
		}
		p.mu.Lock()
		p.destroyed[reasonIndex(ReasonLost)]++
		p.mu.Unlock()
		res.Lost++
		p.emit(EventDestroyed, ReasonLost, r.ID, nil)
	}
	return errors.Join(errs...)
}

// replenish reserves and starts the creates that bring the shared idle
// set, counting every instance's creates in flight, up to MinIdle.
func (s *sharedSet[T]) replenish(ctx context.Context) (started int, err error) {
	p := s.p
	if p.opts.MinIdle == 0 {
		return 0, nil
	}
	p.mu.Lock()
	paused := p.closedLocked || p.warmPaused || p.cleanupDue
	p.mu.Unlock()
	if paused {
		return 0, nil
	}
	c, err := s.inv.Counts(ctx)
	if err != nil {
		return 0, fmt.Errorf("pool: inventory counts: %w", err)
	}
	for range p.opts.MinIdle - c.Idle - c.Reserved {
		p.mu.Lock()
		full := p.closedLocked || p.totalLocked() >= p.opts.MaxSize || p.creating+p.late >= p.opts.MaxConcurrentCreates
		p.mu.Unlock()
		if full {
			return started, nil
		}
		token := p.opts.Instance + ":" + strconv.FormatInt(s.tokenSeq.Add(1), 10)
		ok, err := s.inv.Reserve(ctx, token, p.opts.MinIdle, 2*p.opts.CreateTimeout)
		if err != nil {
			return started, fmt.Errorf("pool: inventory reserve: %w", err)
		}
		if !ok {
			return started, nil
		}
		p.mu.Lock()
		if p.closedLocked {
			p.mu.Unlock()
			_ = s.inv.Unreserve(ctx, token)
			return started, nil
		}
		p.creating++
		p.wg.Add(1)
		p.mu.Unlock()
		started++
		go s.createWarm(token)
	}
	return started, nil
}

// kick runs replenish in the background, once at a time, again if kicked
// meanwhile.
func (s *sharedSet[T]) kick() {
	p := s.p
	if p.opts.MinIdle == 0 {
		return
	}
	s.replenishKicks.Add(1)
	if !s.replenishing.CompareAndSwap(false, true) {
		return
	}
	p.mu.Lock()
	if p.closedLocked {
		p.mu.Unlock()
		s.replenishing.Store(false)
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		for {
			s.replenishKicks.Store(0)
			if _, err := s.replenish(p.ctx); err != nil && !errors.Is(err, context.Canceled) {
				p.warn("replenish", err)
			}
			s.replenishing.Store(false)
			if s.replenishKicks.Load() == 0 || !s.replenishing.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}
