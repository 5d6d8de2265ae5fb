package pool

import (
	"context"

	"github.com/ttlkit/ttlkit/internal/event"
)

// StrandDispatched puts p, which must hold at least two idle items, in the
// state a waiter leaves when it takes an item that reached the idle set
// just before the one its create dispatched to it: that item stays idle,
// last in line, still marked as dispatched and fresh, and nwait is -1.
func StrandDispatched[T any](p *Pool[T]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := <-p.idle
	rest := make([]*Handle[T], 0, len(p.idle))
	for len(p.idle) > 0 {
		rest = append(rest, <-p.idle)
	}
	for _, r := range rest {
		p.idle <- r
	}
	h.dispatched = true
	h.fresh = true
	p.nwait.Add(-1)
	p.idle <- h
}

// Prune runs the janitor's prune step alone.
func (p *Pool[T]) Prune(ctx context.Context) (Result, error) { return p.prune(ctx) }

// Replenish runs the janitor's replenish step alone.
func (p *Pool[T]) Replenish(ctx context.Context) (Result, error) { return p.replenish(ctx) }

// Cleanup runs the start-up cleanup (Options.CleanupOnStart) by hand.
func (p *Pool[T]) Cleanup(ctx context.Context) (Result, error) { return p.cleanup(ctx) }

// EventQueueDefault is the size of the event queue of Options.EventQueue 0.
const EventQueueDefault = event.DefaultSize
