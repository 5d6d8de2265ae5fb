package pool

import (
	"context"
	"sync/atomic"
	"time"
)

// Item states.
const (
	stateIdle      uint32 = iota
	stateInUse            // handed out
	stateChecking         // taken out of the idle set by CheckHealth
	stateReturning        // being put back into a shared Inventory
	stateGone             // being destroyed or forgotten
	stateForced           // destroyed by Close while still handed out
	stateSettling         // released, on its way back (to a waiter, idle or destroy)
)

// Handle is an item handed out by Acquire. Call exactly one of Release, Destroy or
// Detach, once; a second call panics with "pool: handle released twice". Do not keep
// a Handle after that: it is reused for the same item.
type Handle[T any] struct {
	p        *Pool[T]
	value    T
	id       string
	created  int64 // unix nanoseconds, by the pool's clock
	deadline int64 // end of lifetime, 0 for none
	lastUsed int64 // last release, 0 if never used; written by the holder
	state    atomic.Uint32
	lost     atomic.Bool // the provider no longer lists it: drop on release
	dead     atomic.Bool // the Watcher reported it dead: never hand it out
	idx      int         // position in Pool.items, -1 when not there; under Pool.mu
	err      error       // set only on the error tokens sent to waiters
	// died is the channel of the item's watch and unwatch ends it
	// (watch.go); both set before the Handle is shared.
	died    <-chan struct{}
	unwatch context.CancelFunc
	// dispatched marks an item or token sent to a waiter and already
	// taken off nwait; written before the send, read after the receive.
	dispatched bool
	// fresh marks an item handed from its create straight to a waiter:
	// CheckOnAcquire need not check it. Written before the send, read
	// after the receive.
	fresh bool
}

// Value returns the item.
func (h *Handle[T]) Value() T { return h.value }

// ID returns the item's ID, or "" when the Provisioner has no ID(T) string method.
func (h *Handle[T]) ID() string { return h.id }

// CreatedAt returns when the item was created.
func (h *Handle[T]) CreatedAt() time.Time { return time.Unix(0, h.created) }

// Release gives the item to the longest waiter or the idle set, or destroys it if
// expired, beyond MaxIdle or closing.
func (h *Handle[T]) Release() {
	// Settling, not idle: until the item is back in the idle set (or
	// destroyed), Close must keep waiting for it.
	if !h.state.CompareAndSwap(stateInUse, stateSettling) {
		h.misuse()
		return
	}
	p := h.p
	if p.stampUse || p.checkExpiry {
		now := p.clock.Now().UnixNano()
		if h.deadline != 0 && now >= h.deadline {
			p.discard(h, reasonLifetime)
			return
		}
		h.lastUsed = now
	}
	p.settle(h)
}

// Destroy destroys the item in the background for reason (empty: "evicted"),
// counting it against MaxSize until done.
func (h *Handle[T]) Destroy(reason Reason) {
	if !h.state.CompareAndSwap(stateInUse, stateGone) {
		h.misuse()
		return
	}
	if reason == "" {
		reason = reasonEvicted
	}
	h.p.discard(h, reason)
}

// Detach takes the item out of the pool for good and returns it, for a long-lived
// owner: the pool stops counting it, refills MinIdle, drops its Inventory record and
// never destroys it; the caller does. A [Lister] still lists it, so record the owner
// first and report it through [Options.Owned], or Reconcile destroys it as an orphan.
func (h *Handle[T]) Detach() T {
	if !h.state.CompareAndSwap(stateInUse, stateGone) {
		h.misuse()
		var zero T
		return zero
	}
	p := h.p
	p.mu.Lock()
	p.removeItemLocked(h)
	p.detached++
	p.fillLocked()
	p.checkDrainedLocked()
	p.mu.Unlock()
	if h.id != "" {
		p.set.forget(h.id)
	}
	p.emit(EventDetached, "", h.id, nil)
	return h.value
}

func (h *Handle[T]) misuse() {
	if h.state.Load() == stateForced {
		return // destroyed by Close: inert
	}
	panic("pool: handle released twice")
}
