// Package pool keeps warm pools of slow-to-create items — containers, worker
// processes, connections — with a capacity, first-come-first-served waiting,
// expiry, health checks, reconciliation with what really exists, and draining.
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
// A [Pool] gets items from a [Provisioner] (optionally a [Checker], [Lister] or
// [Watcher]) and hands them out as [Handle] values; a [Group] holds one Pool per
// key. Processes share a warm pool through [Options.Inventory] (see pool/shared).
package pool
