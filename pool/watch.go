package pool

import "context"

// This file watches the items this instance holds for death, with the
// Provisioner's Watcher: a dead idle item is destroyed at once, a dead
// item anywhere else is marked, and every path that would hand an item out
// or keep it idle (take, settle, prune) drops a marked one.

// watch starts watching h, an item this instance is about to hold, and
// reports false when it has already died (h is then marked dead). It calls
// the Watcher, so it runs outside p.mu. The watch ends when h leaves
// p.items (removeItemLocked), is destroyed, or the pool closes.
func (p *Pool[T]) watch(h *Handle[T]) bool {
	if p.watcher == nil {
		return true
	}
	ctx, cancel := context.WithCancel(p.ctx)
	died := p.watcher.Watch(ctx, h.value)
	if died == nil {
		cancel()
		return true
	}
	select {
	case <-died:
		cancel()
		h.dead.Store(true)
		return false
	default:
	}
	h.died, h.unwatch = died, cancel
	p.mu.Lock()
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		select {
		case <-died:
			p.died(h)
		case <-ctx.Done():
		}
	}()
	return true
}

// isDead reports whether h's Watcher reported it dead. It reads the
// watch's channel too: an item is never handed out in the instant between
// its death and its watch's goroutine marking it.
func (h *Handle[T]) isDead() bool {
	if h.dead.Load() {
		return true
	}
	if h.died != nil {
		select {
		case <-h.died:
			h.dead.Store(true)
			return true
		default:
		}
	}
	return false
}

// unwatchItem ends h's watch, if any.
func unwatchItem[T any](h *Handle[T]) {
	if h.unwatch != nil {
		h.unwatch()
	}
}

// died marks h dead and, when it is idle, destroys it at once. An item
// in use, being checked or on its way back to a shared Inventory is
// destroyed where it arrives: take, settle and prune drop a dead item.
func (p *Pool[T]) died(h *Handle[T]) {
	h.dead.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	if h.idx < 0 || p.closedLocked {
		return
	}
	// A released item stays "settling" in p.idle until it is taken.
	if st := h.state.Load(); st == stateIdle || st == stateSettling {
		p.purgeDeadLocked()
	}
}

// purgeDeadLocked destroys the dead items in p.idle. An item that reached
// p.idle after its death was marked is found by the offer that put it
// there (offer looks at the mark after its send), so none stays idle.
func (p *Pool[T]) purgeDeadLocked() {
	idle := p.drainIdleLocked()
	kept := idle[:0]
	for _, h := range idle {
		if h.isDead() {
			p.destroyLocked(h, ReasonDied)
			continue
		}
		kept = append(kept, h)
	}
	p.restoreIdleLocked(kept)
	p.fillLocked()
}
