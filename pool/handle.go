package pool

import "time"

// Item states, guarded by Pool.mu.
const (
	stateIdle      uint8 = iota
	stateInUse           // handed out
	stateChecking        // taken out of the idle set by CheckHealth
	stateReturning       // being put back into a shared Inventory
	stateGone            // being destroyed or forgotten
	stateForced          // destroyed by Close while still handed out
)

// Handle is an item handed out by Acquire. Exactly one of Release or
// Destroy must be called, once; a second call panics with "pool: handle
// released twice". Handles are reused for the same item: do not keep one
// after releasing it.
type Handle[T any] struct {
	p        *Pool[T]
	value    T
	id       string
	created  int64 // unix nanoseconds, by the pool's clock
	deadline int64 // end of lifetime, 0 for none
	lastUsed int64 // last release, 0 if never used
	state    uint8
	lost     bool // the provider no longer lists it: drop on release
	idx      int  // position in Pool.items, -1 when not there
}

// Value returns the item.
func (h *Handle[T]) Value() T { return h.value }

// ID returns the item's ID, or "" when the Provisioner has no Identifier.
func (h *Handle[T]) ID() string { return h.id }

// CreatedAt returns when the item was created.
func (h *Handle[T]) CreatedAt() time.Time { return time.Unix(0, h.created) }

// Release returns the item to the pool: to the first waiter, else to the idle
// set; an item past its lifetime, or beyond MaxIdle, is destroyed instead.
// After Close has destroyed the item (its context ended first), Release does
// nothing.
func (h *Handle[T]) Release() {
	p := h.p
	p.mu.Lock()
	if h.state != stateInUse {
		forced := h.state == stateForced
		p.mu.Unlock()
		if forced {
			return
		}
		panic("pool: handle released twice")
	}
	p.inUse--
	if p.stampUse || p.checkExpiry {
		now := p.clock.Now()
		if p.checkExpiry && h.deadline != 0 && now.UnixNano() >= h.deadline {
			p.destroyLocked(h, ReasonLifetime)
			p.releaseDrainedLocked()
			p.mu.Unlock()
			return
		}
		h.lastUsed = now.UnixNano()
	} else {
		h.lastUsed = 1 // used: WarmTTL no longer applies
	}
	if p.waiters.n > 0 && !h.lost && !p.closed {
		// Direct hand-off: the item never becomes idle, so no later
		// Acquire can overtake the first waiter.
		w := p.waiters.pop()
		h.state = stateInUse
		p.inUse++
		p.acquires++
		w.h = h
		w.ch <- struct{}{}
		p.mu.Unlock()
		return
	}
	if p.inv == nil && !h.lost && !p.closed && len(p.idle) < p.opts.MaxIdle {
		h.state = stateIdle
		p.idle = append(p.idle, h)
		p.mu.Unlock()
		return
	}
	toShared := p.settleLocked(h)
	p.releaseDrainedLocked()
	p.mu.Unlock()
	if toShared {
		p.putShared(h)
	}
}

// Destroy discards the item instead of returning it, for the given reason
// (ReasonEvicted unless the caller knows better: a crashed worker is
// ReasonUnhealthy). The pool destroys it in the background and counts it
// against capacity until Destroy returns.
func (h *Handle[T]) Destroy(reason Reason) {
	p := h.p
	p.mu.Lock()
	if h.state != stateInUse {
		forced := h.state == stateForced
		p.mu.Unlock()
		if forced {
			return
		}
		panic("pool: handle released twice")
	}
	p.inUse--
	if reason == "" {
		reason = ReasonEvicted
	}
	p.destroyLocked(h, reason)
	p.releaseDrainedLocked()
	p.mu.Unlock()
}

// waiter is one Acquire call waiting for an item.
type waiter[T any] struct {
	ch         chan struct{} // buffered: the hand-off never blocks
	h          *Handle[T]
	err        error
	prev, next *waiter[T]
	queued     bool
}

// waitQueue is a FIFO of waiters with O(1) removal of a cancelled one.
type waitQueue[T any] struct {
	head, tail *waiter[T]
	n          int
}

func (q *waitQueue[T]) push(w *waiter[T]) {
	w.queued = true
	w.prev, w.next = q.tail, nil
	if q.tail == nil {
		q.head = w
	} else {
		q.tail.next = w
	}
	q.tail = w
	q.n++
}

func (q *waitQueue[T]) remove(w *waiter[T]) {
	if w.prev == nil {
		q.head = w.next
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		q.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
	q.n--
}

// pop removes and returns the first waiter, or nil.
func (q *waitQueue[T]) pop() *waiter[T] {
	w := q.head
	if w != nil {
		q.remove(w)
	}
	return w
}
