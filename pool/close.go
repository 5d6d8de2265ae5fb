package pool

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
)

// Close drains the pool: acquires and waiters fail with [ErrClosed], and items are
// destroyed, idle ones at once and those in use on release or, once ctx ends, anyway
// (their handles become inert). It then waits, until ctx ends, for the janitor, the
// Provisioner calls in flight and the queued events. With an Inventory the shared
// idle set stays. It returns the destroy errors joined, plus an error wrapping
// context.Cause(ctx) if it destroyed items in use and one naming what still runs if
// ctx ended first. A later call waits the same way, and once all has stopped returns
// the destroy errors only.
func (p *Pool[T]) Close(ctx context.Context) error {
	p.closeOnce.Do(p.beginClose)
	var errs []error
	select {
	case <-p.drained:
	case <-ctx.Done():
		if n := p.forceInUse(); n > 0 {
			errs = append(errs, fmt.Errorf("pool: close: %d items still in use destroyed: %w", n, context.Cause(ctx)))
		}
	}
	select {
	case <-p.closeDone:
	default:
		select {
		case <-p.closeDone:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("pool: close: still running: %s: %w", p.running(), context.Cause(ctx)))
			return errors.Join(errs...)
		}
	}
	return errors.Join(append(errs, p.closeErr)...)
}

// beginClose starts closing the pool and starts finishClose, which owns the
// rest; it does not wait for anything a provider or a holder does.
func (p *Pool[T]) beginClose() {
	p.mu.Lock()
	p.closedLocked = true
	p.closed.Store(true)
	p.drainClosedLocked()
	if p.warmTimer != nil {
		p.warmTimer.Stop()
	}
	p.drained = make(chan struct{})
	p.checkDrainedLocked()
	p.mu.Unlock()

	// Wake the waiters: each takes one ErrClosed token. New ones cannot
	// start (closedLocked), and tokens left over are drained below.
	closedTok := &Handle[T]{err: ErrClosed}
	for p.nwait.Load() > 0 {
		select {
		case p.idle <- closedTok:
		default:
			runtime.Gosched()
		}
	}
	p.mu.Lock()
	p.drainClosedLocked()
	p.mu.Unlock()

	p.cancel() // creates and janitor steps in flight give up
	if p.janitorStop != nil {
		close(p.janitorStop)
	}
	go p.finishClose()
}

// finishClose waits for the handles, the janitor, every call in flight and
// the events queued, then records the result and ends every Close.
func (p *Pool[T]) finishClose() {
	<-p.drained
	if p.janitorDone != nil {
		<-p.janitorDone
	}
	// Wait for every create and destroy, and for stragglers: an Acquire
	// that took an item from the idle set just before Close drained it
	// finds the pool closed and destroys the item itself.
	for {
		p.wg.Wait()
		p.mu.Lock()
		p.drainClosedLocked()
		n := p.totalLocked()
		p.mu.Unlock()
		if n == 0 {
			break
		}
		runtime.Gosched()
	}
	// Nothing emits any more: deliver what is queued. Close reports a
	// callback that takes too long, as it does any other straggler.
	_ = p.events.Close(context.Background())
	p.mu.Lock()
	p.closeErr = errors.Join(p.closeErrs...)
	p.mu.Unlock()
	close(p.closeDone)
}

// forceInUse destroys the items still in use, whose handles become inert,
// and returns how many there were.
func (p *Pool[T]) forceInUse() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, h := range append([]*Handle[T](nil), p.items...) {
		if h.state.CompareAndSwap(stateInUse, stateForced) {
			n++
			p.removeItemLocked(h)
			p.destroyingLocked(h)
			go p.destroy(h, reasonShutdown)
		}
	}
	p.checkDrainedLocked()
	return n
}

// running says what Close is still waiting for.
func (p *Pool[T]) running() string {
	p.mu.Lock()
	var parts []string
	add := func(n int, one, many string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+one)
		case n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", n, many))
		}
	}
	inUse := 0
	for _, h := range p.items {
		if st := h.state.Load(); st == stateInUse || st == stateSettling || st == stateReturning {
			inUse++
		}
	}
	add(p.calls["create"], "Create call", "Create calls")
	add(p.late, "of them past CreateTimeout", "of them past CreateTimeout")
	add(p.calls["destroy"], "Destroy call", "Destroy calls")
	add(p.calls["check"], "Check call", "Check calls")
	add(inUse, "item in use", "items in use")
	p.mu.Unlock()
	if p.janitorDone != nil {
		select {
		case <-p.janitorDone:
		default:
			parts = append(parts, "a janitor step")
		}
	}
	if p.delivering.Load() {
		parts = append(parts, "an OnEvent call")
	}
	if p.events.Enabled() {
		// Events given to the queue and neither dropped nor delivered yet,
		// less the one OnEvent is handling (read in this order, so the
		// count is never negative).
		done := p.events.Dropped() + p.events.Delivered()
		queued := int(p.eventsSent.Load() - done)
		if p.delivering.Load() {
			queued--
		}
		add(queued, "queued event", "queued events")
	}
	if len(parts) == 0 {
		return "pool bookkeeping"
	}
	return strings.Join(parts, ", ")
}

// drainClosedLocked empties p.idle after Close began: items are destroyed,
// tokens dropped.
func (p *Pool[T]) drainClosedLocked() {
	for {
		select {
		case h := <-p.idle:
			if h.dispatched {
				p.undispatch(h) // its waiter needs ErrClosed instead
			}
			if h.err == nil {
				p.destroyLocked(h, reasonShutdown)
			}
		default:
			return
		}
	}
}

// checkDrainedLocked signals Close when no item is in use any more.
func (p *Pool[T]) checkDrainedLocked() {
	if p.drained == nil {
		return
	}
	select {
	case <-p.drained:
		return
	default:
	}
	for _, h := range p.items {
		if st := h.state.Load(); st == stateInUse || st == stateSettling || st == stateReturning {
			return
		}
	}
	close(p.drained)
}
