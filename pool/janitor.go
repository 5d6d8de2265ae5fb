package pool

import (
	"context"
	"errors"
	"fmt"
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
// above MinIdle idle for longer than IdleTimeout, longest idle first. With a
// shared Inventory it also refreshes the records of this instance's items in
// use (the heartbeat that keeps them known to other instances) and prunes
// the shared idle set.
func (p *Pool[T]) Prune(ctx context.Context) error {
	now := p.clock.Now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	excess := len(p.idle) - p.opts.MinIdle
	kept := p.idle[:0]
	for _, h := range p.idle { // idle[0] has been idle longest
		r := p.pruneReason(h, now, excess > 0)
		if r != "" {
			excess--
			p.destroyLocked(h, r)
			continue
		}
		kept = append(kept, h)
	}
	clear(p.idle[len(kept):])
	p.idle = kept
	p.fillLocked()
	p.mu.Unlock()
	if p.inv != nil {
		return p.pruneShared(ctx, now)
	}
	return nil
}

// pruneReason says why the idle item h must go at now, or "". aboveMin
// says whether it may go for IdleTimeout.
func (p *Pool[T]) pruneReason(h *Handle[T], now time.Time, aboveMin bool) Reason {
	if r := p.expiredLocked(h, now); r != "" {
		return r
	}
	if p.opts.IdleTimeout > 0 && aboveMin {
		last := h.lastUsed
		if last <= 1 {
			last = h.created
		}
		if now.UnixNano()-last >= int64(p.opts.IdleTimeout) {
			return ReasonIdle
		}
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
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	batch := append([]*Handle[T](nil), p.idle...)
	p.mu.Unlock()
	for _, h := range batch {
		p.mu.Lock()
		if h.state != stateIdle || p.closed {
			p.mu.Unlock()
			continue
		}
		p.removeIdleLocked(h)
		h.state = stateChecking
		p.checking++
		p.mu.Unlock()
		err := p.check(ctx, h.value)
		p.mu.Lock()
		p.checking--
		if err != nil {
			p.destroyLocked(h, ReasonUnhealthy)
			p.fillLocked()
			p.mu.Unlock()
			continue
		}
		toShared := p.settleLocked(h)
		p.mu.Unlock()
		if toShared {
			p.putShared(h)
		}
	}
	if p.inv != nil {
		return p.checkShared(ctx)
	}
	return nil
}

func (p *Pool[T]) check(ctx context.Context, v T) error {
	_, err := callTimeout(p, ctx, p.opts.CreateTimeout, "check", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, p.checker.Check(ctx, v)
	}, nil)
	return err
}

// Replenish starts the creates needed to bring the idle items, counting
// creates in flight, up to MinIdle (globally, with a shared Inventory). It
// also ends a create-failure backoff early.
func (p *Pool[T]) Replenish(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
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
	listStart := p.clock.Now()
	listed, err := p.lister.List(ctx)
	if err != nil {
		return fmt.Errorf("pool: list: %w", err)
	}
	known := map[string]bool{}
	var recs []Record
	if p.inv != nil {
		if recs, err = p.inv.Records(ctx); err != nil {
			return fmt.Errorf("pool: inventory records: %w", err)
		}
		for _, r := range recs {
			known[r.ID] = true
		}
	}
	now := p.clock.Now()
	listedIDs := make(map[string]bool, len(listed))
	var orphans []Listed[T]
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	for _, h := range p.items {
		known[h.id] = true
	}
	for id := range p.gone {
		known[id] = true
	}
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
		} else if now.Sub(created) < p.opts.OrphanGracePeriod {
			continue
		}
		delete(p.firstSeen, l.ID)
		orphans = append(orphans, l)
		p.orphans++
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
	for _, h := range append([]*Handle[T](nil), p.items...) {
		if h.id == "" || listedIDs[h.id] || h.created >= cut {
			continue
		}
		switch h.state {
		case stateIdle:
			p.removeIdleLocked(h)
			p.removeItemLocked(h)
			h.state = stateGone
			p.destroyed[reasonIndex(ReasonLost)]++
			dropped = append(dropped, h.id)
		case stateInUse, stateChecking:
			h.lost = true
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
		err := p.callDestroy(l.Value)
		p.mu.Lock()
		p.countDestroyLocked(ReasonOrphan, err)
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
