package pool

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// This file is the hot path: Acquire, TryAcquire and Do, and the hand-off
// of items between releases, creates and waiters through the idle set.

// Wait timing: every wait is timed up to exactWaits, then every
// sampleWaits-th.
const (
	exactWaits  = 1024
	sampleWaits = 8
)

// Acquire returns an item, waiting first come, first served at MaxSize. If ctx ends
// first, the error wraps context.Cause(ctx) and its create serves another. A failed
// create fails one waiter with an error matching [ErrCreate].
func (p *Pool[T]) Acquire(ctx context.Context) (*Handle[T], error) {
	if ctx.Err() != nil {
		return nil, fmt.Errorf("pool: acquire: %w", context.Cause(ctx))
	}
	for {
		select {
		case h := <-p.idle:
			if h.dispatched {
				p.undispatch(h) // meant for a waiter; it still waits
			}
			if h, err, ok := p.take(ctx, h); ok {
				return h, err
			}
			continue
		default:
		}
		if h, err, ok := p.wait(ctx); ok {
			return h, err
		}
	}
}

// Do calls fn with an acquired item and releases it. If fn fails or panics, the item
// is destroyed ([ReasonUnhealthy]) and, unless ctx ended, fn (safe to repeat) runs
// once more on another. Errors of Acquire and fn are joined.
func (p *Pool[T]) Do(ctx context.Context, fn func(T) error) error {
	var errs []error
	for attempt := 0; attempt < 2 && (attempt == 0 || ctx.Err() == nil); attempt++ {
		h, err := p.Acquire(ctx)
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		if err = p.run(h, fn); err == nil {
			h.Release()
			return nil
		}
		h.Destroy(ReasonUnhealthy)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// run calls fn with h's item, destroying the item if fn panics.
func (p *Pool[T]) run(h *Handle[T], fn func(T) error) error {
	ok := false
	defer func() {
		if !ok {
			h.Destroy(ReasonUnhealthy)
		}
	}()
	err := fn(h.value)
	ok = true
	return err
}

// undispatch returns the demand of a dispatched item or error that will not
// reach a waiter: that waiter still waits. The item is an idle one now, and
// may stay idle for long: it is no longer fresh.
func (p *Pool[T]) undispatch(h *Handle[T]) {
	h.dispatched = false
	h.fresh = false
	p.nwait.Add(1)
}

// take turns h, received from p.idle, into the result of an acquire. ok is
// false when h was expired (and is being destroyed): try again.
func (p *Pool[T]) take(ctx context.Context, h *Handle[T]) (_ *Handle[T], _ error, ok bool) {
	if h.err != nil {
		return nil, h.err, true
	}
	fresh := h.fresh
	h.fresh = false
	if p.checkOnAcquire && !fresh && !p.closed.Load() {
		h.state.Store(stateChecking)
		if err := p.check(ctx, h.value); err != nil {
			if ctx.Err() != nil { // the caller gave up, not the item
				h.state.Store(stateIdle)
				p.settle(h)
				return nil, fmt.Errorf("pool: acquire: %w", context.Cause(ctx)), true
			}
			p.discard(h, ReasonUnhealthy)
			return nil, nil, false
		}
	}
	if p.closed.Load() {
		p.discard(h, reasonShutdown)
		return nil, ErrClosed, true
	}
	if h.isDead() {
		p.discard(h, ReasonDied)
		return nil, nil, false
	}
	if p.checkExpiry {
		if r := p.expired(h, p.clock.Now()); r != "" {
			p.discard(h, r)
			return nil, nil, false
		}
	}
	h.state.Store(stateInUse)
	n := len(p.idle)
	if p.opts.IdleTimeout > 0 && int64(n) < p.idleLow.Load() {
		p.idleLow.Store(int64(n))
	}
	if int64(n) < p.minIdle.Load() {
		p.mu.Lock()
		p.fillLocked()
		p.mu.Unlock()
	}
	return h, nil, true
}

// discard destroys h, an item not in use that is out of p.idle.
func (p *Pool[T]) discard(h *Handle[T], r Reason) {
	p.mu.Lock()
	p.destroyLocked(h, r)
	p.fillLocked()
	p.checkDrainedLocked()
	p.mu.Unlock()
}

// wait parks the caller until an item or an error token arrives on p.idle.
// ok is false when the item it got had expired: try again.
func (p *Pool[T]) wait(ctx context.Context) (_ *Handle[T], _ error, ok bool) {
	p.mu.Lock()
	if p.closedLocked {
		p.mu.Unlock()
		return nil, ErrClosed, true
	}
	p.waiting.Add(1)
	defer p.waiting.Add(-1)
	nw := p.nwait.Add(1)
	p.fillLocked()
	// Like sql.DBStats, count only waits for capacity, not for a create.
	full := int64(p.creating) < nw
	p.mu.Unlock()
	// Reading the clock costs as much as a whole hand-off on some machines,
	// so past the first exactWaits waits only every sampleWaits-th wait is
	// timed, and weighted.
	var start, weight int64
	if full {
		if n := p.waitCount.Add(1); n <= exactWaits {
			weight = 1
		} else if n%sampleWaits == 0 {
			weight = sampleWaits
		}
		if weight != 0 {
			start = p.monotonic()
		}
	}
	var h *Handle[T]
	if done := ctx.Done(); done == nil {
		h = <-p.idle // cannot be cancelled: a plain receive is cheapest
	} else {
		select {
		case h = <-p.idle:
		case <-done:
			p.nwait.Add(-1)
			p.canceledWaits.Add(1)
			if weight != 0 { // a wait that ended with ctx waited too
				p.waitNanos.Add((p.monotonic() - start) * weight)
			}
			return nil, fmt.Errorf("pool: acquire: %w", context.Cause(ctx)), true
		}
	}
	if h.dispatched {
		h.dispatched = false // counted when it was sent
	} else {
		p.nwait.Add(-1)
	}
	if weight != 0 {
		p.waitNanos.Add((p.monotonic() - start) * weight)
	}
	return p.take(ctx, h)
}

// monotonic returns a monotonic time in nanoseconds for wait statistics.
// With the real clock it is time.Since(p.start), which reads only the
// monotonic clock (p.start carries a monotonic reading), as cheap as the
// runtime's nanotime without linking to it; under testing/synctest it is
// the bubble's fake time. With Options.Clock set it reads that clock.
func (p *Pool[T]) monotonic() int64 {
	if p.realClock {
		return int64(time.Since(p.start))
	}
	return p.clock.Now().UnixNano()
}

// offerDispatch is offer, dispatching h when a waiter waits: the item is
// meant for it, and no create should start for it meanwhile.
func (p *Pool[T]) offerDispatch(h *Handle[T]) bool {
	for n := p.nwait.Load(); n > 0; n = p.nwait.Load() {
		if p.nwait.CompareAndSwap(n, n-1) {
			h.dispatched = true
			break
		}
	}
	if p.offer(h) {
		return true
	}
	if h.dispatched {
		p.undispatch(h)
	}
	return false
}

// offer puts h (state idle) into p.idle: to the longest waiter, else to the
// idle set. It reports false when the idle set is full.
func (p *Pool[T]) offer(h *Handle[T]) bool {
	select {
	case p.idle <- h:
	default:
		return false
	}
	if p.closed.Load() {
		// Close may have drained p.idle before h arrived.
		p.mu.Lock()
		p.drainClosedLocked()
		p.checkDrainedLocked()
		p.mu.Unlock()
	} else if h.isDead() {
		// h died on its way: died may have looked for it in p.idle
		// before it arrived.
		p.mu.Lock()
		p.purgeDeadLocked()
		p.mu.Unlock()
	}
	return true
}

// TryAcquire returns an idle item or, at once, [ErrUnavailable] (starting a create
// if there is room) or [ErrClosed].
func (p *Pool[T]) TryAcquire(ctx context.Context) (*Handle[T], error) {
	for {
		select {
		case h := <-p.idle:
			if h.dispatched {
				p.undispatch(h)
			}
			if h, err, ok := p.take(ctx, h); ok {
				return h, err
			}
			continue
		default:
		}
		break
	}
	return p.set.tryAcquire(ctx)
}

// expired returns why h must not be handed out or kept idle at now, or "".
func (p *Pool[T]) expired(h *Handle[T], now time.Time) Reason {
	n := now.UnixNano()
	if h.deadline != 0 && n >= h.deadline {
		return reasonLifetime
	}
	if p.opts.WarmTTL > 0 && h.lastUsed == 0 && n-h.created >= int64(p.opts.WarmTTL) {
		return reasonWarmTTL
	}
	return ""
}

// dispatchLocked sends h, an item or an error token, to a waiter: nwait
// drops now, so that no create starts for that waiter meanwhile.
func (p *Pool[T]) dispatchLocked(h *Handle[T]) bool {
	p.nwait.Add(-1)
	h.dispatched = true
	if p.offerLocked(h) {
		return true
	}
	p.undispatch(h)
	return false
}

// offerLocked is a non-blocking send to p.idle.
func (p *Pool[T]) offerLocked(tok *Handle[T]) bool {
	select {
	case p.idle <- tok:
		return true
	default:
		return false
	}
}

// settle finds a home for h, an item in p.items in state idle that is not
// in p.idle: the longest waiter, else the idle set (local, or the shared
// Inventory); h is destroyed when closed, lost, or beyond MaxIdle.
func (p *Pool[T]) settle(h *Handle[T]) { p.set.settle(h) }

// dropReasonLocked says why h, settling, cannot be kept whatever the idle
// set: the pool is closed, the provider no longer lists h, or h died. It is
// "" when h may stay.
func (p *Pool[T]) dropReasonLocked(h *Handle[T]) Reason {
	switch {
	case p.closedLocked:
		return reasonShutdown
	case h.lost.Load():
		return ReasonLost
	case h.isDead():
		return ReasonDied
	}
	return ""
}
