package pool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
)

// Tick runs one janitor pass: Prune, Reconcile, Replenish. The janitor
// goroutine calls it every Options.JanitorInterval; call it by hand to run
// a pass now (or when the janitor is disabled).
func (p *Pool[T]) Tick(ctx context.Context) error {
	return errors.Join(p.Prune(ctx), p.Reconcile(ctx), p.Replenish(ctx))
}

func (p *Pool[T]) janitorLoop() {
	defer close(p.janitorDone)
	t := p.clock.Ticker(p.opts.JanitorInterval)
	defer t.Stop()
	var health <-chan time.Time
	if p.checker != nil && p.opts.HealthCheckInterval > 0 {
		ht := p.clock.Ticker(p.opts.HealthCheckInterval)
		defer ht.Stop()
		health = ht.C
	}
	for {
		select {
		case <-p.janitorStop:
			return
		case <-t.C:
			if err := p.Tick(p.ctx); err != nil && !errors.Is(err, ErrClosed) {
				p.warn("janitor", err)
			}
		case <-health:
			if err := p.CheckHealth(p.ctx); err != nil && !errors.Is(err, ErrClosed) {
				p.warn("health check", err)
			}
		}
	}
}

// Prune destroys idle items past their lifetime or WarmTTL, and idle items
// above MinIdle that were not needed during the last IdleTimeout: those idle
// for longer, longest idle first, and as many as stayed idle throughout the
// last IdleTimeout (idle items are handed out oldest first, so under a
// light load each one's idle time stays short even when fewer would do).
// With a shared Inventory it also refreshes the records of this instance's
// items in use (the heartbeat that keeps them known to other instances) and
// prunes the shared idle set.
func (p *Pool[T]) Prune(ctx context.Context) error {
	now := p.clock.Now()
	p.mu.Lock()
	if p.closedLocked {
		p.mu.Unlock()
		return ErrClosed
	}
	idle := p.drainIdleLocked()
	sort.Slice(idle, func(i, j int) bool { return lastUse(idle[i]) < lastUse(idle[j]) })
	excess := len(idle) - p.opts.MinIdle
	unneeded := 0
	if p.opts.IdleTimeout > 0 && now.Sub(p.lowSince) >= p.opts.IdleTimeout {
		if low := p.idleLow.Load(); low != math.MaxInt64 {
			unneeded = int(low) - p.opts.MinIdle
		}
		p.lowSince = now
	}
	kept := idle[:0]
	for _, h := range idle { // longest idle first
		r := p.pruneReason(h, now, excess > 0)
		if r == "" && excess > 0 && unneeded > 0 {
			r = ReasonIdle
		}
		if r != "" {
			excess--
			unneeded--
			p.destroyLocked(h, r)
			continue
		}
		kept = append(kept, h)
	}
	p.restoreIdleLocked(kept)
	if p.opts.IdleTimeout > 0 && p.lowSince.Equal(now) {
		p.idleLow.Store(int64(len(p.idle)))
	}
	p.fillLocked()
	p.mu.Unlock()
	if p.inv != nil {
		return p.pruneShared(ctx, now)
	}
	return nil
}

// lastUse is when h was last released, or created if never.
func lastUse[T any](h *Handle[T]) int64 {
	if h.lastUsed > 1 {
		return h.lastUsed
	}
	return h.created
}

// pruneReason says why the idle item h must go at now, or "". aboveMin
// says whether it may go for IdleTimeout.
func (p *Pool[T]) pruneReason(h *Handle[T], now time.Time, aboveMin bool) Reason {
	if r := p.expired(h, now); r != "" {
		return r
	}
	if p.opts.IdleTimeout > 0 && aboveMin && now.UnixNano()-lastUse(h) >= int64(p.opts.IdleTimeout) {
		return ReasonIdle
	}
	return ""
}

// CheckHealth checks every idle item with the Provisioner's Check, one at a
// time (the others stay available), and destroys those that fail with
// ReasonUnhealthy; Replenish replaces them. It does nothing without a
// Checker.
func (p *Pool[T]) CheckHealth(ctx context.Context) error {
	if p.checker == nil {
		return nil
	}
	if p.closed.Load() {
		return ErrClosed
	}
	// Each item taken from the front goes back to the back: one pass
	// checks each idle item once. An item being checked counts as idle for
	// MinIdle from the moment it leaves the idle set until it is back (or
	// destroyed): taken out and counted under one lock, uncounted only
	// after settle has put it back, so a destroy finishing meanwhile never
	// sees the warm set short and starts a needless create.
	for range len(p.idle) {
		var h *Handle[T]
		p.mu.Lock()
		select {
		case h = <-p.idle:
		default:
		}
		if h == nil {
			p.mu.Unlock()
			break
		}
		if h.dispatched {
			p.undispatch(h)
		}
		if h.err != nil { // a waiter's token: pass it on
			if !p.offerLocked(h) {
				p.fillLocked()
			}
			p.mu.Unlock()
			continue
		}
		h.state.Store(stateChecking)
		p.checking++
		p.mu.Unlock()
		err := p.check(ctx, h.value)
		if err != nil {
			p.mu.Lock()
			p.checking--
			p.destroyLocked(h, ReasonUnhealthy)
			p.fillLocked()
			p.mu.Unlock()
			continue
		}
		h.state.Store(stateIdle)
		p.settle(h)
		p.mu.Lock()
		p.checking--
		p.fillLocked()
		p.mu.Unlock()
	}
	if p.inv != nil {
		return p.checkShared(ctx)
	}
	return nil
}

func (p *Pool[T]) check(ctx context.Context, v T) error {
	_, err := callTimeout(p, ctx, p.opts.CreateTimeout, "check", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, p.checker.Check(ctx, v)
	}, nil, nil)
	return err
}

// Replenish starts the creates needed to bring the idle items, counting
// creates in flight, up to MinIdle (globally, with a shared Inventory). It
// also ends a create-failure backoff early.
func (p *Pool[T]) Replenish(ctx context.Context) error {
	p.mu.Lock()
	if p.closedLocked {
		p.mu.Unlock()
		return ErrClosed
	}
	p.warmPaused = false
	p.fillLocked()
	p.mu.Unlock()
	if p.inv != nil {
		return p.replenishShared(ctx)
	}
	return nil
}

// Reconcile compares the provider's list (Lister) with the items the pool
// knows (its own and, with a shared Inventory, every instance's records).
// A listed item nobody knows is an orphan: it is destroyed once it is older
// than OrphanGracePeriod (by its Listed.Created, else since Reconcile first
// saw it). A known idle item the provider no longer lists is dropped (and
// replaced by Replenish); a known item in use is dropped when released.
// Reconcile returns the errors of List and of the orphans' Destroy calls.
// It does nothing without a Lister.
func (p *Pool[T]) Reconcile(ctx context.Context) error {
	if p.lister == nil {
		return nil
	}
	return p.reconcile(ctx, false)
}

// Cleanup destroys every item the provider lists that the pool does not
// know and that was created before the pool started (or whose creation time
// the provider does not report): seed 001's start-up cleanup. New runs it
// in the background with Options.CleanupOnStart, holding warm creates until
// it is done.
func (p *Pool[T]) Cleanup(ctx context.Context) error {
	if p.lister == nil {
		return errors.New("pool: Cleanup needs a Provisioner that implements Lister")
	}
	return p.reconcile(ctx, true)
}

func (p *Pool[T]) reconcile(ctx context.Context, startup bool) error {
	// What the pool knows is read before the provider's list. An item is
	// destroyed before it is forgotten (its record removed, its ID out of
	// p.gone), so an item destroyed meanwhile is either known here or no
	// longer listed: never a listed unknown, destroyed a second time.
	known := map[string]bool{}
	var recs []Record
	var err error
	if p.inv != nil {
		if recs, err = p.inv.Records(ctx); err != nil {
			return fmt.Errorf("pool: inventory records: %w", err)
		}
		for _, r := range recs {
			known[r.ID] = true
		}
	}
	p.mu.Lock()
	p.knownLocked(known)
	p.mu.Unlock()
	listStart := p.clock.Now()
	listed, err := p.lister.List(ctx)
	if err != nil {
		return fmt.Errorf("pool: list: %w", err)
	}
	now := p.clock.Now()
	listedIDs := make(map[string]bool, len(listed))
	var orphans []Listed[T]
	p.mu.Lock()
	if p.closedLocked {
		p.mu.Unlock()
		return ErrClosed
	}
	p.knownLocked(known) // and items created meanwhile
	if p.firstSeen == nil {
		p.firstSeen = map[string]time.Time{}
	}
	for _, l := range listed {
		listedIDs[l.ID] = true
		if known[l.ID] {
			delete(p.firstSeen, l.ID)
			continue
		}
		created := l.Created
		if created.IsZero() {
			seen, ok := p.firstSeen[l.ID]
			if !ok {
				seen = now
				p.firstSeen[l.ID] = now
			}
			created = seen
			if startup {
				created = time.Time{} // unknown age: a leftover
			}
		}
		if startup {
			if !created.IsZero() && !created.Before(p.start) {
				continue
			}
			if created.IsZero() && len(p.inflight) > 0 {
				continue // unknown age: it may be a create's in flight
			}
		} else if now.Sub(created) < p.opts.OrphanGracePeriod || p.createsSinceLocked(created) {
			// Too young, or possibly the item of a Create still running
			// (a worker listed before it is ready): never an orphan.
			continue
		}
		delete(p.firstSeen, l.ID)
		orphans = append(orphans, l)
	}
	for id := range p.firstSeen {
		if !listedIDs[id] {
			delete(p.firstSeen, id)
		}
	}
	// Known items the provider no longer lists; items created after the
	// list was taken may simply be missing from it.
	cut := listStart.UnixNano()
	var dropped []string
	unlisted := func(h *Handle[T]) bool { return h.id != "" && !listedIDs[h.id] && h.created < cut }
	idle := p.drainIdleLocked()
	kept := idle[:0]
	for _, h := range idle {
		if unlisted(h) {
			p.removeItemLocked(h)
			h.state.Store(stateGone)
			p.destroyed[reasonIndex(ReasonLost)]++
			dropped = append(dropped, h.id)
			continue
		}
		kept = append(kept, h)
	}
	p.restoreIdleLocked(kept)
	for _, h := range p.items {
		if unlisted(h) {
			h.lost.Store(true) // in use or being checked: dropped when back
		}
	}
	p.fillLocked()
	p.mu.Unlock()
	var errs []error
	for _, id := range dropped {
		p.emit(EventDropped, ReasonLost, id, nil)
		if p.inv != nil {
			if _, err := p.inv.Remove(ctx, id); err != nil {
				errs = append(errs, fmt.Errorf("pool: inventory remove: %w", err))
			}
		}
	}
	if p.inv != nil {
		errs = append(errs, p.dropSharedUnlisted(ctx, recs, listedIDs, listStart))
	}
	for _, l := range orphans {
		if !p.claimOrphan(ctx, l, now, &errs) {
			continue
		}
		err := p.callDestroy(l.Value)
		p.mu.Lock()
		p.orphans++
		p.countDestroyLocked(ReasonOrphan, err)
		p.mu.Unlock()
		if p.inv != nil {
			if _, rerr := p.inv.Remove(ctx, l.ID); rerr != nil {
				errs = append(errs, fmt.Errorf("pool: inventory remove: %w", rerr))
			}
		}
		p.mu.Lock()
		p.forgetGoneLocked(l.ID)
		p.mu.Unlock()
		p.afterDestroy(l.ID, ReasonOrphan, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("pool: destroy orphan %s: %w", l.ID, err))
		}
	}
	if len(dropped) > 0 || p.inv != nil {
		_ = p.Replenish(ctx)
	}
	return errors.Join(errs...)
}

// claimOrphan makes sure nobody owns the orphan l before it is destroyed.
// An item another instance has just created may be listed before its
// creator has recorded it; with a shared Inventory the orphan is recorded as
// this instance's first, atomically (Add fails if the creator got there
// first, and the creator's Add fails if the orphan was claimed, so the
// creator never uses an item being destroyed). Locally, the pool's own items
// are checked once more.
//
// A claimed orphan is in p.gone until it is destroyed, so that a Reconcile
// running at the same time leaves it alone.
func (p *Pool[T]) claimOrphan(ctx context.Context, l Listed[T], now time.Time, errs *[]error) (claimed bool) {
	p.mu.Lock()
	if p.gone[l.ID] > 0 {
		p.mu.Unlock()
		return false
	}
	for _, h := range p.items {
		if h.id == l.ID {
			p.mu.Unlock()
			return false
		}
	}
	p.goneLocked(l.ID)
	p.mu.Unlock()
	if p.inv == nil {
		return true
	}
	defer func() {
		if !claimed {
			p.mu.Lock()
			p.forgetGoneLocked(l.ID)
			p.mu.Unlock()
		}
	}()
	data, err := p.codec.Encode(l.Value)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("pool: encode orphan %s: %w", l.ID, err))
		return false
	}
	created := l.Created
	if created.IsZero() {
		created = now
	}
	err = p.inv.Add(ctx, Record{ID: l.ID, Owner: p.opts.Instance, Data: data, Created: created}, p.heldTTL())
	if errors.Is(err, ErrExists) {
		return false // known after all
	}
	if err != nil {
		*errs = append(*errs, fmt.Errorf("pool: inventory add orphan %s: %w", l.ID, err))
		return false
	}
	return true
}

// knownLocked adds the IDs of this instance's items, and of those being
// destroyed, to known.
func (p *Pool[T]) knownLocked(known map[string]bool) {
	for _, h := range p.items {
		if h.id != "" {
			known[h.id] = true
		}
	}
	for id := range p.gone {
		known[id] = true
	}
}
