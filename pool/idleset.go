package pool

import (
	"context"
	"github.com/ttlkit/ttlkit/pool/shared"
	"time"
)

// idleSet is where a Pool keeps its idle items, chosen once at New: a
// localSet (Options.Inventory nil) keeps them in p.idle, in this process's
// memory; a sharedSet keeps them in the Inventory that several instances
// share, and p.idle only carries items on their way to a waiter of this
// instance. Everything else (the hand-off to waiters, creates, destroys, the
// janitor's local steps) is the same for both and stays in the Pool.
//
// The Pool calls settle on every Release; the rest runs off the hot path.
type idleSet[T any] interface {
	// settle finds a home for h, an item in p.items in state idle that is
	// not in p.idle: the longest waiter, else the idle set; h is destroyed
	// when the pool is closed, h is lost, or the set has no room.
	settle(h *Handle[T])
	// tryAcquire is TryAcquire once p.idle is empty: an item at once, or
	// ErrUnavailable (ErrClosed once closed).
	tryAcquire(ctx context.Context) (*Handle[T], error)
	// warmLocked returns how many idle items this instance lacks for the
	// warm target, which fillLocked creates (the shared set's warm target
	// is the fleet's, refilled by replenish).
	warmLocked() int
	// pop takes an idle item for a create slot before Create is called, or
	// returns nil, nil when the set has none to give.
	pop(ctx context.Context) (*Handle[T], error)
	// register records h, just created by the call, as this instance's. It
	// reports false, with the error, when h must not be used; it has then
	// ended the call and seen to h's destroy.
	register(h *Handle[T], call uint64, started time.Time) (bool, error)
	// claimValue records v, an item nobody knows (a create that returned
	// after its timeout), as this instance's before it is destroyed; false
	// means another instance has it.
	claimValue(id string, v T) bool
	// forget drops the record of id, destroyed, in the background of a
	// destroy: failures are only logged.
	forget(id string)
	// remove drops the record of id for Reconcile.
	remove(ctx context.Context, id string) error
	// records returns every instance's records, the items Reconcile knows
	// beyond this instance's own.
	records(ctx context.Context) ([]shared.Record, error)
	// claimOrphan makes sure nobody else owns l before Reconcile destroys
	// it, appending to errs what went wrong.
	claimOrphan(ctx context.Context, l Listed[T], now time.Time, errs *[]error) bool
	// reconcile is the set's part of Reconcile: it drops the idle records
	// of items the provider no longer lists (created before listStart). It
	// reports whether replenish must run even when no local item was
	// dropped.
	reconcile(ctx context.Context, recs []shared.Record, listed map[string]bool, listStart time.Time, res *Result) (refill bool, err error)
	// prune is the set's part of prune, after the local idle items: it
	// returns how many items it destroyed.
	prune(ctx context.Context, now time.Time) (int, error)
	// check is the set's part of CheckHealth, after the local idle items.
	check(ctx context.Context, res *Result) error
	// replenish is the set's part of replenish, after fillLocked: it
	// returns how many creates it started.
	replenish(ctx context.Context) (int, error)
	// kick runs replenish in the background, after the warm target may
	// have been missed (a pop, a failure's backoff ended, cleanup done).
	kick()
}
