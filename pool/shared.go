package pool

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// This file is the Pool's side of a shared Inventory: items popped from and
// put back into the shared idle set, heartbeats of this instance's records,
// and the global warm target.

// heldTTL is the ttl of this instance's in-use records: Prune refreshes them
// every janitor pass, so three missed passes mean the instance is gone.
func (p *Pool[T]) heldTTL() time.Duration {
	iv := p.opts.JanitorInterval
	if iv <= 0 {
		iv = DefaultJanitorInterval
	}
	return 3 * iv
}

// idleTTL is the ttl of idle records: none, the janitors prune them, unless
// the item's lifetime ends first.
func (p *Pool[T]) idleTTL() time.Duration { return p.opts.MaxLifetime }

func (p *Pool[T]) ioContext() (context.Context, context.CancelFunc) {
	return p.clock.WithTimeout(context.Background(), p.opts.DestroyTimeout)
}

func (p *Pool[T]) record(h *Handle[T], owner string) (Record, error) {
	data, err := p.codec.Encode(h.value)
	if err != nil {
		return Record{}, fmt.Errorf("pool: encode: %w", err)
	}
	r := Record{ID: h.id, Owner: owner, Data: data, Created: time.Unix(0, h.created)}
	if h.deadline != 0 {
		r.Deadline = time.Unix(0, h.deadline)
	}
	if h.lastUsed > 1 {
		r.LastUsed = time.Unix(0, h.lastUsed)
	}
	return r, nil
}

func (p *Pool[T]) fromRecord(r Record) (*Handle[T], error) {
	v, err := p.codec.Decode(r.Data)
	if err != nil {
		return nil, fmt.Errorf("pool: decode %s: %w", r.ID, err)
	}
	h := &Handle[T]{p: p, value: v, id: r.ID, created: r.Created.UnixNano(), idx: -1}
	if !r.Deadline.IsZero() {
		h.deadline = r.Deadline.UnixNano()
	}
	if !r.LastUsed.IsZero() {
		h.lastUsed = r.LastUsed.UnixNano()
	}
	return h, nil
}

// resolveAttempts bounds the calls made for one item when the Inventory
// fails: an error may mean that the call went through and only its reply
// was lost, so the Pool asks where the record stands before it acts.
const resolveAttempts = 3

// addOutcome is what became of the record of a new item.
type addOutcome int

const (
	addDone    addOutcome = iota // recorded as in use by this instance
	addTaken                     // another instance claimed it (as an orphan) and destroys it
	addUnknown                   // no answer: not idle anywhere, so this instance destroys it
)

// addRecord records rec, a new item this instance holds, as in use by this
// instance. When Add fails it finds out with Touch whether the call went
// through (the record is then this instance's) and else adds again. An
// item created more than OrphanGracePeriod before it was recorded may have
// been taken as an orphan by some Reconcile meanwhile, destroyed, and its
// claim removed before this Add landed: it is kept only if the provider
// still lists it.
//
// The whole exchange is bounded by one DestroyTimeout.
func (p *Pool[T]) addRecord(rec Record, started time.Time) (addOutcome, error) {
	ctx, cancel := p.ioContext()
	defer cancel()
	var errs []error
	for attempt := 1; ; attempt++ {
		err := p.inv.Add(ctx, rec, p.heldTTL())
		if err == nil {
			if len(errs) > 0 {
				p.warn("inventory add retried", errors.Join(errs...), "id", rec.ID)
			}
			return p.checkLate(rec, started)
		}
		errs = append(errs, fmt.Errorf("pool: inventory add: %w", err))
		lost, terr := p.inv.Touch(ctx, p.opts.Instance, []string{rec.ID}, p.heldTTL())
		switch {
		case terr == nil && len(lost) == 0: // it went through
			p.warn("inventory add went through", errors.Join(errs...), "id", rec.ID)
			return p.checkLate(rec, started)
		case terr == nil && errors.Is(err, ErrExists):
			return addTaken, errors.Join(errs...)
		case terr != nil:
			errs = append(errs, fmt.Errorf("pool: inventory touch: %w", terr))
		}
		if attempt == resolveAttempts || ctx.Err() != nil {
			return addUnknown, errors.Join(errs...)
		}
	}
}

// checkLate keeps rec, just recorded as this instance's, unless it was
// recorded too late to be safe from Reconcile and the provider no longer
// lists it.
func (p *Pool[T]) checkLate(rec Record, started time.Time) (addOutcome, error) {
	if p.lister == nil || p.clock.Since(started) < p.opts.OrphanGracePeriod {
		return addDone, nil
	}
	ctx, cancel := p.ioContext()
	defer cancel()
	listed, err := p.lister.List(ctx)
	if err != nil {
		// Unknown: destroying it is safe, its record is this instance's.
		return addUnknown, fmt.Errorf("pool: list after a late inventory add: %w", err)
	}
	for _, l := range listed {
		if l.ID == rec.ID {
			return addDone, nil
		}
	}
	if _, err := p.inv.Remove(ctx, rec.ID); err != nil {
		p.warn("inventory remove", err, "id", rec.ID)
	}
	return addTaken, fmt.Errorf("pool: item %s destroyed as an orphan before it was recorded: %w", rec.ID, ErrExists)
}

// putOutcome is what became of an item offered to the shared idle set.
type putOutcome int

const (
	putDone    putOutcome = iota // in the shared idle set
	putFull                      // refused at MaxIdle: still this instance's
	putHeld                      // Put failed; the record is still this instance's in use
	putNotHeld                   // ErrNotHeld: the record had expired or was taken
	putGone                      // the record is no longer this instance's (the Put went through) or nobody knows: never destroy it here
)

// putRecord offers rec, held in use by this instance, to the shared idle
// set. When Put fails the call may have gone through, and the item may
// already be in another instance's hands: putRecord asks with Touch and
// puts again only while the record is still this instance's in use. When
// it cannot find out, the item is left to its record's ttl and Reconcile.
//
// The whole exchange is bounded by one DestroyTimeout (Release waits for it).
func (p *Pool[T]) putRecord(rec Record) (putOutcome, error) {
	ctx, cancel := p.ioContext()
	defer cancel()
	var errs []error
	for attempt := 1; ; attempt++ {
		ok, err := p.inv.Put(ctx, rec, p.opts.MaxIdle, p.idleTTL())
		if err == nil {
			if len(errs) > 0 {
				p.warn("inventory put retried", errors.Join(errs...), "id", rec.ID)
			}
			if !ok {
				return putFull, nil
			}
			return putDone, nil
		}
		errs = append(errs, fmt.Errorf("pool: inventory put: %w", err))
		if errors.Is(err, ErrNotHeld) {
			if attempt == 1 {
				return putNotHeld, errors.Join(errs...)
			}
			// An earlier attempt went through after all.
			p.warn("inventory put went through", errors.Join(errs...), "id", rec.ID)
			return putGone, nil
		}
		lost, terr := p.inv.Touch(ctx, p.opts.Instance, []string{rec.ID}, p.heldTTL())
		if terr == nil && len(lost) > 0 {
			// It went through (or the record was taken care of elsewhere).
			p.warn("inventory put went through", errors.Join(errs...), "id", rec.ID)
			return putGone, nil
		}
		if terr != nil {
			errs = append(errs, fmt.Errorf("pool: inventory touch: %w", terr))
		}
		if attempt == resolveAttempts || ctx.Err() != nil {
			if terr != nil {
				return putGone, errors.Join(errs...)
			}
			return putHeld, errors.Join(errs...)
		}
	}
}

// destroyClaimed destroys h, which this instance holds in the Inventory but
// not in p.items, in the background.
func (p *Pool[T]) destroyClaimed(h *Handle[T], reason Reason) {
	p.mu.Lock()
	p.destroyingLocked(h)
	p.mu.Unlock()
	go p.destroy(h, reason)
}

// popShared takes an idle item from the Inventory, skipping (and
// destroying) expired ones. It returns nil, nil when the idle set is empty.
func (p *Pool[T]) popShared(ctx context.Context) (*Handle[T], error) {
	for {
		rec, ok, err := p.inv.Pop(ctx, p.opts.Instance, p.heldTTL())
		if err != nil {
			return nil, fmt.Errorf("pool: inventory pop: %w", err)
		}
		if !ok {
			return nil, nil
		}
		h, err := p.fromRecord(rec)
		if err != nil {
			p.warn("inventory", err, "id", rec.ID)
			_, _ = p.inv.Remove(ctx, rec.ID)
			continue
		}
		if r := p.expired(h, p.clock.Now()); r != "" {
			p.destroyClaimed(h, r)
			continue
		}
		return h, nil
	}
}

// putShared returns h (state returning, in p.items) to the shared idle set,
// or destroys it when the set is full or the record was lost. An item whose
// record may have reached the idle set is never destroyed here.
func (p *Pool[T]) putShared(h *Handle[T]) {
	rec, err := p.record(h, p.opts.Instance)
	out := putHeld
	if err == nil {
		out, err = p.putRecord(rec)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch out {
	case putDone, putGone:
		p.removeItemLocked(h)
		h.state.Store(stateGone) // the fleet's now; a later pop makes a new Handle
		p.fillLocked()
	case putFull:
		p.destroyLocked(h, ReasonIdle)
	default:
		p.destroyLocked(h, ReasonLost)
	}
	p.checkDrainedLocked()
	if err != nil {
		p.warn("inventory put", err, "id", h.id)
	}
}

// kickReplenish runs replenishShared in the background, once at a time,
// again if kicked meanwhile.
func (p *Pool[T]) kickReplenish() {
	if p.inv == nil || p.opts.MinIdle == 0 {
		return
	}
	p.replenishKicks.Add(1)
	if !p.replenishing.CompareAndSwap(false, true) {
		return
	}
	p.mu.Lock()
	if p.closedLocked {
		p.mu.Unlock()
		p.replenishing.Store(false)
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		for {
			p.replenishKicks.Store(0)
			if err := p.replenishShared(p.ctx); err != nil && !errors.Is(err, context.Canceled) {
				p.warn("replenish", err)
			}
			p.replenishing.Store(false)
			if p.replenishKicks.Load() == 0 || !p.replenishing.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// replenishShared reserves and starts the creates that bring the shared idle
// set, counting every instance's creates in flight, up to MinIdle.
func (p *Pool[T]) replenishShared(ctx context.Context) error {
	if p.opts.MinIdle == 0 {
		return nil
	}
	p.mu.Lock()
	paused := p.closedLocked || p.warmPaused || p.cleanupDue
	p.mu.Unlock()
	if paused {
		return nil
	}
	c, err := p.inv.Counts(ctx)
	if err != nil {
		return fmt.Errorf("pool: inventory counts: %w", err)
	}
	for range p.opts.MinIdle - c.Idle - c.Reserved {
		p.mu.Lock()
		full := p.closedLocked || p.totalLocked() >= p.opts.MaxSize || p.creating+p.late >= p.opts.MaxConcurrentCreates
		p.mu.Unlock()
		if full {
			return nil
		}
		token := p.opts.Instance + ":" + strconv.FormatInt(p.tokenSeq.Add(1), 10)
		ok, err := p.inv.Reserve(ctx, token, p.opts.MinIdle, 2*p.opts.CreateTimeout)
		if err != nil {
			return fmt.Errorf("pool: inventory reserve: %w", err)
		}
		if !ok {
			return nil
		}
		p.mu.Lock()
		if p.closedLocked {
			p.mu.Unlock()
			_ = p.inv.Unreserve(ctx, token)
			return nil
		}
		p.creating++
		p.wg.Add(1)
		p.mu.Unlock()
		go p.createWarm(token)
	}
	return nil
}

// createWarm creates one item for the shared idle set under reservation
// token.
func (p *Pool[T]) createWarm(token string) {
	defer p.wg.Done()
	started := p.clock.Now()
	v, call, err := p.callCreate()
	var h *Handle[T]
	added, put := addUnknown, putHeld
	if err == nil {
		// Recorded as ours first, then offered to the idle set with Put, so
		// that MaxIdle holds even when releases fill the set meanwhile.
		h = p.newHandle(v, p.clock.Now())
		var rec Record
		if rec, err = p.record(h, p.opts.Instance); err == nil {
			if added, err = p.addRecord(rec, started); added == addDone {
				put, err = p.putRecord(rec)
			}
		}
	}
	ctx, cancel := p.ioContext()
	if uerr := p.inv.Unreserve(ctx, token); uerr != nil {
		p.warn("inventory unreserve", uerr)
	}
	cancel()
	p.mu.Lock()
	p.creating--
	if call != 0 {
		p.endCreateLocked(call)
	}
	if h == nil {
		p.createFailures++
		if !p.closedLocked {
			p.pauseWarmLocked()
		}
		p.fillLocked()
		p.mu.Unlock()
		p.emit(EventCreateFailed, "", "", err)
		p.warn("create", err)
		return
	}
	p.creates++
	p.backoff = 0
	switch {
	case added == addTaken: // another instance destroys it
	case added == addUnknown: // created, but not recorded: nobody else can use it
		p.addItemLocked(h)
		p.destroyLocked(h, ReasonEvicted)
	case put == putFull:
		p.addItemLocked(h)
		p.destroyLocked(h, ReasonIdle)
	case put == putHeld || put == putNotHeld:
		p.addItemLocked(h)
		p.destroyLocked(h, ReasonLost)
	}
	p.fillLocked()
	p.mu.Unlock()
	p.emit(EventCreated, "", h.id, nil)
	if err != nil {
		p.warn("inventory", err, "id", h.id)
	}
	// A pop between our Put and Unreserve saw the item twice (idle and
	// reserved) and may have skipped a refill: look again.
	p.kickReplenish()
}

// pruneShared refreshes this instance's in-use records and prunes the
// shared idle set like Prune prunes the local one.
func (p *Pool[T]) pruneShared(ctx context.Context, now time.Time) error {
	// Items parked locally for a waiter that was served otherwise go back
	// to the fleet.
	p.mu.Lock()
	local := p.drainIdleLocked()
	for _, h := range local {
		h.state.Store(stateReturning)
	}
	p.mu.Unlock()
	for _, h := range local {
		p.putShared(h)
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
		lost, err := p.inv.Touch(ctx, p.opts.Instance, ids, p.heldTTL())
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
	recs, err := p.inv.Records(ctx)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("pool: inventory records: %w", err))...)
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
	last := func(h *Handle[T]) int64 {
		if h.lastUsed > 1 {
			return h.lastUsed
		}
		return h.created
	}
	sort.Slice(idle, func(i, j int) bool { return last(idle[i]) < last(idle[j]) })
	excess := len(idle) - p.opts.MinIdle
	for _, h := range idle {
		r := p.pruneReason(h, now, excess > 0)
		if r == "" {
			continue
		}
		ok, err := p.inv.Claim(ctx, h.id, p.opts.Instance, p.heldTTL())
		if err != nil {
			errs = append(errs, fmt.Errorf("pool: inventory claim: %w", err))
			continue
		}
		if ok { // else another instance took it meanwhile
			excess--
			p.destroyClaimed(h, r)
		}
	}
	return errors.Join(errs...)
}

// checkShared health-checks the shared idle set: each item is claimed,
// checked, and put back or destroyed.
func (p *Pool[T]) checkShared(ctx context.Context) error {
	recs, err := p.inv.Records(ctx)
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
		ok, err := p.inv.Claim(ctx, r.ID, p.opts.Instance, p.heldTTL())
		if err != nil || !ok {
			if err != nil {
				errs = append(errs, fmt.Errorf("pool: inventory claim: %w", err))
			}
			continue
		}
		if p.check(ctx, h.value) != nil {
			p.destroyClaimed(h, ReasonUnhealthy)
			continue
		}
		back := r
		back.Owner = p.opts.Instance
		out, err := p.putRecord(back)
		if err != nil {
			errs = append(errs, err)
		}
		switch out {
		case putFull, putHeld, putNotHeld: // refilled meanwhile beyond MaxIdle, or lost
			p.destroyClaimed(h, ReasonIdle)
		}
	}
	return errors.Join(errs...)
}

// dropSharedUnlisted forgets the shared idle records of items the provider
// no longer lists (created before the list was taken).
func (p *Pool[T]) dropSharedUnlisted(ctx context.Context, recs []Record, listed map[string]bool, listStart time.Time) error {
	var errs []error
	for _, r := range recs {
		if r.Owner != "" || listed[r.ID] || !r.Created.Before(listStart) {
			continue
		}
		ok, err := p.inv.Claim(ctx, r.ID, p.opts.Instance, p.heldTTL())
		if err != nil {
			errs = append(errs, fmt.Errorf("pool: inventory claim: %w", err))
			continue
		}
		if !ok {
			continue
		}
		if _, err := p.inv.Remove(ctx, r.ID); err != nil {
			errs = append(errs, fmt.Errorf("pool: inventory remove: %w", err))
			continue
		}
		p.mu.Lock()
		p.destroyed[reasonIndex(ReasonLost)]++
		p.mu.Unlock()
		p.emit(EventDropped, ReasonLost, r.ID, nil)
	}
	return errors.Join(errs...)
}
