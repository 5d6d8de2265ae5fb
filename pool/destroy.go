package pool

import "context"

// This file destroys items: those the pool holds, late items of creates
// that ran past CreateTimeout, and the bookkeeping that keeps items being
// destroyed known to Reconcile.

// destroyLocked forgets h and destroys it in the background. h counts
// against capacity until Destroy returns.
func (p *Pool[T]) destroyLocked(h *Handle[T], reason Reason) {
	p.removeItemLocked(h)
	h.state.Store(stateGone)
	p.destroyingLocked(h)
	go p.destroy(h, reason)
}

// destroyingLocked counts h as being destroyed until destroy returns.
func (p *Pool[T]) destroyingLocked(h *Handle[T]) {
	p.destroying++
	if h.id != "" {
		p.goneLocked(h.id)
	}
	p.wg.Add(1)
}

// goneLocked marks id as being destroyed: Reconcile still knows it.
func (p *Pool[T]) goneLocked(id string) {
	if p.gone == nil {
		p.gone = map[string]int{}
	}
	p.gone[id]++
}

// forgetGoneLocked ends a goneLocked.
func (p *Pool[T]) forgetGoneLocked(id string) {
	if p.gone[id]--; p.gone[id] <= 0 {
		delete(p.gone, id)
	}
}

func (p *Pool[T]) destroy(h *Handle[T], reason Reason) {
	defer p.wg.Done()
	unwatchItem(h)
	err := p.callDestroy(h.value)
	if h.id != "" {
		p.set.forget(h.id)
	}
	p.mu.Lock()
	p.destroying--
	if h.id != "" {
		p.forgetGoneLocked(h.id)
	}
	p.countDestroyLocked(reason, err)
	p.fillLocked()
	p.mu.Unlock()
	p.afterDestroy(h.id, reason, err)
}

// destroyValue destroys an item the pool never held (a create that
// returned after its timeout). Like an orphan it is claimed first, so that
// no Reconcile destroys it again: the caller has marked id as being
// destroyed (goneLocked), and it is recorded as this instance's in a
// shared Inventory (where another instance may have claimed it first).
func (p *Pool[T]) destroyValue(v T, id string, reason Reason) {
	defer p.wg.Done()
	if id != "" {
		defer func() {
			p.mu.Lock()
			p.forgetGoneLocked(id)
			p.mu.Unlock()
		}()
		if !p.set.claimValue(id, v) {
			p.mu.Lock()
			p.late--
			p.fillLocked()
			p.mu.Unlock()
			return // another instance destroys it
		}
		defer p.set.forget(id)
	}
	err := p.callDestroy(v)
	p.mu.Lock()
	p.late--
	p.countDestroyLocked(reason, err)
	p.fillLocked()
	p.mu.Unlock()
	p.afterDestroy(id, reason, err)
}

func (p *Pool[T]) callDestroy(v T) error {
	_, err := callTimeout(p, context.Background(), p.opts.DestroyTimeout, "destroy", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, p.prov.Destroy(ctx, v)
	}, nil, nil)
	return err
}

func (p *Pool[T]) countDestroyLocked(reason Reason, err error) {
	if err != nil {
		p.destroyErrors++
		if p.closedLocked {
			p.closeErrs = append(p.closeErrs, err)
		}
		return
	}
	p.destroyed[reasonIndex(reason)]++
}

func (p *Pool[T]) afterDestroy(id string, reason Reason, err error) {
	if err != nil {
		p.emit(EventDestroyed, reason, id, err)
		p.warn("destroy", err, "reason", string(reason), "id", id)
		return
	}
	p.emit(EventDestroyed, reason, id, nil)
}
