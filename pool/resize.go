package pool

import (
	"sort"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// SetLimits changes [Options.MaxSize] and [Options.MinIdle] of a running pool
// without an Inventory. Shrinking never takes an item from its user: idle items above
// the new size are destroyed at once (longest idle first) and items in use on
// release; until then Stats.Size may exceed MaxSize and no create starts. MaxIdle
// stays as New set it (set it there for a pool that will grow); minIdle must not
// exceed it. Bad arguments match [ErrInvalid] and change nothing; after Close
// SetLimits returns [ErrClosed].
func (p *Pool[T]) SetLimits(maxSize, minIdle int) error {
	switch {
	case p.opts.Inventory != nil:
		return errs.Invalid(ErrInvalid, "pool: SetLimits needs a pool without an Inventory")
	case maxSize < 1:
		return errs.Invalid(ErrInvalid, "pool: SetLimits: maxSize (%d) < 1", maxSize)
	case minIdle < 0:
		return errs.Invalid(ErrInvalid, "pool: SetLimits: minIdle (%d) is negative", minIdle)
	case minIdle > maxSize:
		return errs.Invalid(ErrInvalid, "pool: SetLimits: minIdle (%d) > maxSize (%d)", minIdle, maxSize)
	case minIdle > cap(p.idle):
		return errs.Invalid(ErrInvalid, "pool: SetLimits: minIdle (%d) > MaxIdle (%d)", minIdle, cap(p.idle))
	}
	p.mu.Lock()
	if p.closedLocked {
		p.mu.Unlock()
		return ErrClosed
	}
	// MaxConcurrentCreates left to its default follows the capacity.
	if p.opts.MaxConcurrentCreates == p.opts.MaxSize || p.opts.MaxConcurrentCreates > maxSize {
		p.opts.MaxConcurrentCreates = maxSize
	}
	p.opts.MaxSize = maxSize
	p.opts.MinIdle = minIdle
	p.minIdle.Store(int64(minIdle))
	if excess := p.heldLocked() - maxSize; excess > 0 {
		idle := p.drainIdleLocked()
		sort.Slice(idle, func(i, j int) bool { return lastUse(idle[i]) < lastUse(idle[j]) })
		n := min(excess, len(idle))
		for _, h := range idle[:n] {
			p.destroyLocked(h, reasonIdle)
		}
		p.restoreIdleLocked(idle[n:])
	}
	p.over.Store(p.heldLocked() > maxSize)
	p.fillLocked()
	p.mu.Unlock()
	p.set.kick()
	return nil
}

// shed destroys h, just released, when the pool holds more items than
// MaxSize after a shrink; it reports whether it did.
func (p *Pool[T]) shed(h *Handle[T]) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.heldLocked() <= p.opts.MaxSize {
		p.over.Store(false)
		return false
	}
	p.destroyLocked(h, reasonIdle)
	p.checkDrainedLocked()
	return true
}

// heldLocked counts the items that stay after a shrink unless shed: in
// use, idle and being created. Items being destroyed are on their way out,
// so they are not shed for again (they still count against capacity).
func (p *Pool[T]) heldLocked() int { return len(p.items) + p.creating + p.late }
