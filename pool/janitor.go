package pool

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// Result counts what a Tick, CheckHealth or Reconcile call did.
type Result struct {
	Destroyed int // idle items destroyed: expired, dead, or not needed
	Checked   int // idle items health-checked (CheckHealth only)
	Unhealthy int // of which failed their check and were destroyed (CheckHealth only)
	Orphans   int // listed items nobody knew, destroyed
	Lost      int // known idle items the provider no longer lists, forgotten
	Started   int // creates started towards MinIdle
}

func (r *Result) add(o Result) {
	r.Destroyed += o.Destroyed
	r.Checked += o.Checked
	r.Unhealthy += o.Unhealthy
	r.Orphans += o.Orphans
	r.Lost += o.Lost
	r.Started += o.Started
}

// Tick runs a janitor pass now: it destroys expired idle items and those above
// MinIdle past IdleTimeout, runs [Pool.Reconcile] and starts creates up to MinIdle,
// ending any create backoff.
func (p *Pool[T]) Tick(ctx context.Context) (Result, error) {
	var r Result
	pr, e1 := p.prune(ctx)
	rr, e2 := p.Reconcile(ctx)
	fr, e3 := p.replenish(ctx)
	r.add(pr)
	r.add(rr)
	r.add(fr)
	return r, errors.Join(e1, e2, e3)
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
			if _, err := p.Tick(p.ctx); err != nil && !errors.Is(err, ErrClosed) {
				p.warn("janitor", err)
			}
		case <-health:
			if _, err := p.CheckHealth(p.ctx); err != nil && !errors.Is(err, ErrClosed) {
				p.warn("health check", err)
			}
		}
	}
}

// prune destroys idle items past their lifetime or WarmTTL, and idle items
// above MinIdle that were not needed during the last IdleTimeout: those idle
// for longer, longest idle first, and as many as stayed idle throughout the
// last IdleTimeout (idle items are handed out oldest first, so under a
// light load each one's idle time stays short even when fewer would do).
// With a shared Inventory it also refreshes the records of this instance's
// items in use (the heartbeat that keeps them known to other instances) and
// prunes the shared idle set.
func (p *Pool[T]) prune(ctx context.Context) (Result, error) {
	var res Result
	now := p.clock.Now()
	p.mu.Lock()
	if p.closedLocked {
		p.mu.Unlock()
		return res, ErrClosed
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
			r = reasonIdle
		}
		if r != "" {
			excess--
			unneeded--
			res.Destroyed++
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
	n, err := p.set.prune(ctx, now)
	res.Destroyed += n
	return res, err
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
	if h.isDead() {
		return ReasonDied
	}
	if r := p.expired(h, now); r != "" {
		return r
	}
	if p.opts.IdleTimeout > 0 && aboveMin && now.UnixNano()-lastUse(h) >= int64(p.opts.IdleTimeout) {
		return reasonIdle
	}
	return ""
}

// CheckHealth checks idle items one by one with the [Checker], if any, and replaces
// those that fail ([ReasonUnhealthy]).
func (p *Pool[T]) CheckHealth(ctx context.Context) (Result, error) {
	var res Result
	if p.checker == nil {
		return res, nil
	}
	if p.closed.Load() {
		return res, ErrClosed
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
		res.Checked++
		if err != nil {
			res.Unhealthy++
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
	err := p.set.check(ctx, &res)
	return res, err
}

func (p *Pool[T]) check(ctx context.Context, v T) error {
	_, err := callTimeout(p, ctx, p.opts.CreateTimeout, "check", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, p.checker.Check(ctx, v)
	}, nil, nil)
	return err
}

// replenish starts the creates needed to bring the idle items, counting
// creates in flight, up to MinIdle (globally, with a shared Inventory). It
// also ends a create-failure backoff early.
func (p *Pool[T]) replenish(ctx context.Context) (Result, error) {
	var res Result
	p.mu.Lock()
	if p.closedLocked {
		p.mu.Unlock()
		return res, ErrClosed
	}
	p.warmPaused = false
	res.Started = p.fillLocked()
	p.mu.Unlock()
	n, err := p.set.replenish(ctx)
	res.Started += n
	return res, err
}

// Reconcile destroys the items the [Lister] lists but no instance knows once past
// [Options.OrphanGracePeriod] ([ReasonOrphan]), and forgets known items it no longer
// lists ([ReasonLost]): idle ones at once, to be replaced, others on release. It
// returns the errors of List and Destroy; without a Lister it does nothing.
func (p *Pool[T]) Reconcile(ctx context.Context) (Result, error) {
	if p.lister == nil {
		return Result{}, nil
	}
	return p.reconcile(ctx, false)
}

// cleanup is the start-up cleanup of Options.CleanupOnStart: it destroys
// every item the provider lists that the pool does not know and that was
// created before the pool started (or whose creation time
// the provider does not report): the leftovers of an earlier process. New
// runs it in the background with Options.CleanupOnStart, holding warm
// creates until it is done. An item of unknown age is spared while a
// create of this pool is in flight: it may be that create's. With a shared
// Inventory, an item younger than OrphanGracePeriod, or of unknown age, is
// spared too: another instance may be creating it (Reconcile takes it
// later if it is an orphan).
func (p *Pool[T]) cleanup(ctx context.Context) (Result, error) {
	if p.lister == nil {
		return Result{}, errs.Invalid(ErrInvalid, "pool: CleanupOnStart needs a Provisioner that implements Lister")
	}
	return p.reconcile(ctx, true)
}

func (p *Pool[T]) reconcile(ctx context.Context, startup bool) (res Result, _ error) {
	// What the pool knows is read before the provider's list. An item is
	// destroyed before it is forgotten (its record removed, its ID out of
	// p.gone), so an item destroyed meanwhile is either known here or no
	// longer listed: never a listed unknown, destroyed a second time.
	known := map[string]bool{}
	recs, err := p.set.records(ctx)
	if err != nil {
		return res, fmt.Errorf("pool: inventory records: %w", err)
	}
	for _, r := range recs {
		known[r.ID] = true
	}
	p.mu.Lock()
	p.knownLocked(known)
	p.mu.Unlock()
	listStart := p.clock.Now()
	listed, err := p.lister.List(ctx)
	if err != nil {
		return res, fmt.Errorf("pool: list: %w", err)
	}
	now := p.clock.Now()
	listedIDs := make(map[string]bool, len(listed))
	var orphans []Listed[T]
	p.mu.Lock()
	if p.closedLocked {
		p.mu.Unlock()
		return res, ErrClosed
	}
	p.knownLocked(known) // and items created meanwhile
	if p.firstSeen == nil {
		p.firstSeen = map[string]time.Time{}
	}
	shared := p.opts.Inventory != nil
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
			if !created.IsZero() && (!created.Before(p.start) || p.createsSinceLocked(created.Add(providerClockSlack))) {
				continue // made since the start, or maybe by a create still running
			}
			if created.IsZero() && (len(p.inflight) > 0 || shared) {
				continue // unknown age: it may be a create's in flight
			}
			if shared && now.Sub(created) < p.opts.OrphanGracePeriod {
				// Another instance may be creating it: it is recorded
				// only once its Create returns.
				continue
			}
		} else if now.Sub(created) < p.opts.OrphanGracePeriod || p.createsSinceLocked(created.Add(providerClockSlack)) {
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
			res.Lost++
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
		p.emit(EventDestroyed, ReasonLost, id, nil)
		if err := p.set.remove(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("pool: inventory remove: %w", err))
		}
	}
	refill, err := p.set.reconcile(ctx, recs, listedIDs, listStart, &res)
	errs = append(errs, err)
	orphans, err = p.spareOwned(ctx, orphans)
	errs = append(errs, err)
	// Orphans are destroyed concurrently, at most MaxConcurrentDestroys at
	// once, so a slow Destroy does not hold up the whole pass.
	var (
		wg  sync.WaitGroup
		emu sync.Mutex
		sem = make(chan struct{}, p.opts.MaxConcurrentDestroys)
	)
	for _, l := range orphans {
		var claimErrs []error
		claimed := p.claimOrphan(ctx, l, now, &claimErrs)
		errs = append(errs, claimErrs...)
		if !claimed {
			continue
		}
		res.Orphans++
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := p.destroyOrphan(ctx, l); err != nil {
				emu.Lock()
				errs = append(errs, err)
				emu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(dropped) > 0 || refill {
		_, _ = p.replenish(ctx)
	}
	return res, errors.Join(errs...)
}

// providerClockSlack is how much earlier than the truth a provider may date
// an item (Listed.Created): a process dated from clock ticks and a boot
// time read to 10 ms, a container engine's clock. An item dated up to this
// much before one of this pool's creates began may be that create's, so
// neither the start-up cleanup nor Reconcile takes it for an orphan while that
// create runs; a real leftover spared so is found by a later Reconcile.
const providerClockSlack = time.Second

// spareOwned removes from orphans the items Options.Owned reports as owned
// outside the pool. If Owned fails, no orphan is destroyed in this pass.
func (p *Pool[T]) spareOwned(ctx context.Context, orphans []Listed[T]) ([]Listed[T], error) {
	if p.opts.Owned == nil || len(orphans) == 0 {
		return orphans, nil
	}
	ids := make([]string, len(orphans))
	for i, l := range orphans {
		ids[i] = l.ID
	}
	owned, err := p.opts.Owned(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("pool: Owned: %w (no orphan destroyed)", err)
	}
	if len(owned) == 0 {
		return orphans, nil
	}
	mine := make(map[string]bool, len(owned))
	for _, id := range owned {
		mine[id] = true
	}
	kept := orphans[:0]
	for _, l := range orphans {
		if !mine[l.ID] {
			kept = append(kept, l)
		}
	}
	p.mu.Lock()
	p.spared += uint64(len(orphans) - len(kept))
	p.mu.Unlock()
	return kept, nil
}

// destroyOrphan destroys l, claimed by claimOrphan, and forgets it.
func (p *Pool[T]) destroyOrphan(ctx context.Context, l Listed[T]) error {
	var errs []error
	err := p.callDestroy(l.Value)
	p.mu.Lock()
	p.orphans++
	p.countDestroyLocked(ReasonOrphan, err)
	p.mu.Unlock()
	if rerr := p.set.remove(ctx, l.ID); rerr != nil {
		errs = append(errs, fmt.Errorf("pool: inventory remove: %w", rerr))
	}
	p.mu.Lock()
	p.forgetGoneLocked(l.ID)
	p.mu.Unlock()
	p.afterDestroy(l.ID, ReasonOrphan, err)
	if err != nil {
		errs = append(errs, fmt.Errorf("pool: destroy orphan %s: %w", l.ID, err))
	}
	return errors.Join(errs...)
}

// claimOrphan makes sure nobody owns the orphan l before it is destroyed.
// The pool's own items are checked once more, then the idle set claims it:
// with a shared Inventory, an item another instance has just created may
// be listed before its creator has recorded it (sharedSet.claimOrphan).
//
// A claimed orphan is in p.gone until it is destroyed, so that a Reconcile
// running at the same time leaves it alone.
func (p *Pool[T]) claimOrphan(ctx context.Context, l Listed[T], now time.Time, errs *[]error) bool {
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
	if !p.set.claimOrphan(ctx, l, now, errs) {
		p.mu.Lock()
		p.forgetGoneLocked(l.ID)
		p.mu.Unlock()
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

// drainIdleLocked takes every item out of p.idle (dropping error tokens,
// whose waiters will be served by a new create) for the janitor.
func (p *Pool[T]) drainIdleLocked() []*Handle[T] {
	var out []*Handle[T]
	for {
		select {
		case h := <-p.idle:
			if h.dispatched {
				p.undispatch(h)
			}
			if h.err == nil {
				h.state.Store(stateIdle) // a release may have left it settling
				out = append(out, h)
			}
		default:
			return out
		}
	}
}

// restoreIdleLocked puts items the janitor kept back into p.idle.
func (p *Pool[T]) restoreIdleLocked(hs []*Handle[T]) {
	for _, h := range hs {
		if !p.offerLocked(h) {
			p.destroyLocked(h, reasonIdle)
		}
	}
}
