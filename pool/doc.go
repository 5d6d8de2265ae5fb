// Package pool keeps warm pools of slow-to-create items — containers,
// worker processes, connections — with a capacity, first-come-first-served
// waiting, expiry, health checks, reconciliation with what really exists,
// and draining.
//
//	p, err := pool.New[Conn](prov, pool.Options{MinIdle: 2, MaxSize: 10})
//	if err != nil {
//		return err
//	}
//	defer p.Close(ctx)
//	h, err := p.Acquire(ctx) // an idle item, a new one, or a wait at MaxSize
//	if err != nil {
//		return err
//	}
//	defer h.Release() // back to the pool; h.Destroy(pool.ReasonUnhealthy) if broken
//	use(h.Value())
//
// A [Pool] gets its items from a [Provisioner] and hands them out as
// [Handle] values. Creates run under the pool's context, not the caller's:
// an Acquire that gives up leaves its new item to the next waiter or the
// idle set. Items expire on acquire, on release and in the janitor, whose
// pass [Pool.Tick] runs every [Options].JanitorInterval; [Pool.CheckHealth]
// checks idle items when the Provisioner is a [Checker]. [Pool.Close] drains
// the pool.
//
// A Provisioner that lists what exists (a [Lister]) lets [Pool.Reconcile]
// destroy orphans and forget lost items; one that learns when an item dies
// (a [Watcher]) has dead items destroyed before they are handed out.
// [Pool.Do] runs a function with an item and retries once on another when
// it fails.
//
// A [Group] holds one Pool per key, each with its own options, created on
// first use or by [Group.Start].
//
// Several processes share one warm pool through an Inventory
// ([Options].Inventory): see pool/shared and pool/redispool.
package pool
