package pool

import (
	"context"
	"github.com/ttlkit/ttlkit/pool/shared"
	"time"
)

// localSet is the idle set of a Pool without an Inventory: p.idle itself,
// in this process's memory. Nothing else knows the items, so there is
// nothing to record, claim or remove, and the warm target is this
// instance's, refilled by fillLocked.
type localSet[T any] struct{ p *Pool[T] }

var _ idleSet[int] = (*localSet[int])(nil)

// settle hands h to the longest waiter or puts it into p.idle; when p.idle
// is full, h is beyond MaxIdle and destroyed.
func (s *localSet[T]) settle(h *Handle[T]) {
	p := s.p
	if p.over.Load() && p.shed(h) {
		return
	}
	if !p.closed.Load() && !h.lost.Load() && !h.isDead() && p.offerDispatch(h) {
		return
	}
	p.mu.Lock()
	r := p.dropReasonLocked(h)
	if r == "" {
		r = reasonIdle // beyond MaxIdle
	}
	p.destroyLocked(h, r)
	p.checkDrainedLocked()
	p.mu.Unlock()
}

// tryAcquire starts a create in the background when nothing is waiting or
// being created and there is capacity, so that a later call may succeed.
func (s *localSet[T]) tryAcquire(context.Context) (*Handle[T], error) {
	p := s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closedLocked {
		return nil, ErrClosed
	}
	if p.nwait.Load() == 0 && p.creating == 0 && p.totalLocked() < p.opts.MaxSize {
		p.startCreateLocked()
	}
	return nil, ErrUnavailable
}

// warmLocked counts an item being checked, or on its way from its create,
// as idle, and creates nothing while warm creates back off or wait for the
// start-up cleanup.
func (s *localSet[T]) warmLocked() int {
	p := s.p
	if idle := len(p.idle) + p.checking + p.settling; !p.warmPaused && !p.cleanupDue && idle < p.opts.MinIdle {
		return p.opts.MinIdle - idle
	}
	return 0
}

func (s *localSet[T]) pop(context.Context) (*Handle[T], error) { return nil, nil }

func (s *localSet[T]) register(*Handle[T], uint64, time.Time) (bool, error) { return true, nil }

func (s *localSet[T]) claimValue(string, T) bool { return true }

func (s *localSet[T]) forget(string) {}

func (s *localSet[T]) remove(context.Context, string) error { return nil }

func (s *localSet[T]) records(context.Context) ([]shared.Record, error) { return nil, nil }

func (s *localSet[T]) claimOrphan(context.Context, Listed[T], time.Time, *[]error) bool { return true }

func (s *localSet[T]) reconcile(context.Context, []shared.Record, map[string]bool, time.Time, *Result) (bool, error) {
	return false, nil
}

func (s *localSet[T]) prune(context.Context, time.Time) (int, error) { return 0, nil }

func (s *localSet[T]) check(context.Context, *Result) error { return nil }

func (s *localSet[T]) replenish(context.Context) (int, error) { return 0, nil }

func (s *localSet[T]) kick() {}
