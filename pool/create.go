package pool

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// This file makes items: the creates that the waiters and the warm target
// need, each Provisioner.Create call under CreateTimeout, and the record of
// the calls in flight that keeps their items from being taken for orphans.

// fillLocked starts the creates needed by the waiters and the warm target,
// within MaxSize and MaxConcurrentCreates, and returns how many it started.
func (p *Pool[T]) fillLocked() (started int) {
	if p.closedLocked {
		return 0
	}
	// nwait is below zero while an item dispatched to a waiter is still
	// in p.idle although that waiter took another item, sent just before
	// it: no waiter is owed a create then, and that item is simply idle
	// (whoever receives it next puts nwait right). Adding the negative
	// nwait would cancel a warm create the idle set still lacks and leave
	// the pool below MinIdle.
	demand := max(int(p.nwait.Load()), 0) + p.set.warmLocked()
	for p.creating < demand && p.totalLocked() < p.opts.MaxSize && p.creating+p.late < p.opts.MaxConcurrentCreates {
		p.startCreateLocked()
		started++
	}
	return started
}

func (p *Pool[T]) startCreateLocked() {
	p.creating++
	p.wg.Add(1)
	go p.obtain()
}

// obtain produces one item (a pop from the idle set, else a create) and
// settles it or its error.
func (p *Pool[T]) obtain() {
	defer p.wg.Done()
	var call uint64
	h, err := p.set.pop(p.ctx)
	popped := h != nil
	if h == nil && err == nil {
		h, call, err = p.createItem()
	}
	p.mu.Lock()
	p.creating--
	if call != 0 {
		p.endCreateLocked(call)
	}
	if err != nil {
		p.createFailures++
		// The error goes to one waiter, if any; else warm creates back off.
		if p.nwait.Load() > 0 && p.dispatchLocked(&Handle[T]{err: &createError{err}}) {
			p.fillLocked() // other waiters, held back by MaxConcurrentCreates
		} else if !p.closedLocked && !p.warmPaused {
			p.pauseWarmLocked()
		}
		p.mu.Unlock()
		p.emit(EventCreated, "", "", err)
		p.warn("create", err)
		return
	}
	if !popped {
		p.creates++
		p.backoff = 0
	}
	p.addItemLocked(h)
	h.state.Store(stateIdle)
	h.fresh = !popped // just created: no need to check it on acquire
	dispatched := !p.closedLocked && !h.lost.Load() && p.nwait.Load() > 0 && p.dispatchLocked(h)
	if dispatched {
		p.fillLocked() // other waiters, held back by MaxConcurrentCreates
	} else {
		h.fresh = false
		// No longer creating and not yet in the idle set: until settle
		// has placed it, it counts as idle, or a fill meanwhile would
		// start a create to replace it.
		p.settling++
	}
	p.mu.Unlock()
	if !dispatched {
		p.settle(h)
		p.mu.Lock()
		p.settling--
		p.fillLocked() // settle may have handed it to a waiter, or destroyed it
		p.mu.Unlock()
	}
	if popped {
		p.set.kick()
	} else {
		p.emit(EventCreated, "", h.id, nil)
	}
}

// pauseWarmLocked stops warm creates for a backoff after a failed create
// nobody was waiting for, so a broken provider is not hammered.
func (p *Pool[T]) pauseWarmLocked() {
	p.warmPaused = true
	if p.backoff == 0 {
		p.backoff = 100 * time.Millisecond
	} else {
		p.backoff = min(2*p.backoff, max(p.opts.JanitorInterval, time.Second))
	}
	p.warmTimer = p.clock.AfterFunc(p.backoff, func() {
		p.mu.Lock()
		p.warmPaused = false
		p.fillLocked()
		p.mu.Unlock()
		p.set.kick()
	})
}

// createItem calls Create and wraps the result in a Handle (not yet in
// p.items), registered with the idle set (with a shared Inventory, as in
// use by this instance) and watched. The caller ends the create call when the item is
// in p.items.
func (p *Pool[T]) createItem() (*Handle[T], uint64, error) {
	started := p.clock.Now()
	v, call, err := p.callCreate()
	if err != nil {
		return nil, 0, err
	}
	h := p.newHandle(v, p.clock.Now())
	if ok, err := p.set.register(h, call, started); !ok {
		return nil, 0, err
	}
	p.watch(h) // an item dead already is dropped where it would be handed out
	return h, call, nil
}

func (p *Pool[T]) newHandle(v T, now time.Time) *Handle[T] {
	h := &Handle[T]{p: p, value: v, created: now.UnixNano(), idx: -1}
	if p.ider != nil {
		h.id = p.ider.ID(v)
	}
	if p.opts.MaxLifetime > 0 {
		life := p.opts.MaxLifetime
		if p.opts.LifetimeJitter > 0 {
			life -= rand.N(p.opts.LifetimeJitter)
		}
		h.deadline = h.created + int64(life)
	}
	return h
}

// timedOut reports whether err is the end of a call that ran past its own
// timeout, rather than of the pool's context.
func (p *Pool[T]) timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) && p.ctx.Err() == nil
}

// beginCreateLocked registers a Create call about to start: until it
// ends, Reconcile takes no item created after it for an orphan.
func (p *Pool[T]) beginCreateLocked() uint64 {
	if p.inflight == nil {
		p.inflight = map[uint64]time.Time{}
	}
	p.createSeq++
	p.inflight[p.createSeq] = p.clock.Now()
	return p.createSeq
}

// endCreateLocked ends a beginCreateLocked, once the Create call has
// returned and its item (if any) is known to the pool.
func (p *Pool[T]) endCreateLocked(call uint64) { delete(p.inflight, call) }

// createsSinceLocked reports whether a Create call that started at or
// before t is still running: an item created at t may be its.
func (p *Pool[T]) createsSinceLocked(t time.Time) bool {
	for _, start := range p.inflight {
		if !start.After(t) {
			return true
		}
	}
	return false
}

// callCreate calls Create under the pool's context and CreateTimeout. The
// call stays registered as in flight until endCreateLocked(call) when it
// succeeds, and until it returns if it fails or runs past CreateTimeout (an
// item it then returns is destroyed as an orphan).
func (p *Pool[T]) callCreate() (T, uint64, error) {
	p.mu.Lock()
	call := p.beginCreateLocked()
	p.mu.Unlock()
	gaveUp := false
	abandoned := func() {
		// The call goes on past CreateTimeout: it keeps counting against
		// MaxSize (its item may exist at the provider) until it returns.
		gaveUp = true
		p.mu.Lock()
		p.late++
		p.mu.Unlock()
	}
	v, err := callTimeout(p, p.ctx, p.opts.CreateTimeout, "create", p.prov.Create, abandoned, func(v T, err error) {
		// Create returned after its caller gave up: nobody owns v. It is
		// marked as being destroyed before the call stops counting as in
		// flight, so Reconcile never sees it unknown.
		id := ""
		if err == nil && p.ider != nil {
			id = p.ider.ID(v)
		}
		p.mu.Lock()
		if id != "" {
			p.goneLocked(id)
		}
		p.endCreateLocked(call)
		if err == nil {
			p.wg.Add(1) // destroyValue ends the late count
		} else {
			p.late--
			p.fillLocked()
		}
		p.mu.Unlock()
		if err == nil {
			go p.destroyValue(v, id, ReasonOrphan)
		}
	})
	if err != nil {
		if !gaveUp {
			p.mu.Lock()
			p.endCreateLocked(call)
			p.mu.Unlock()
		}
		if gaveUp || p.timedOut(err) {
			err = &createTimeoutError{p.opts.CreateTimeout}
		}
		return v, 0, err
	}
	return v, call, nil
}
