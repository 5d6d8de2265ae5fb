// Package shared lets several pool instances, in several processes, share
// one warm pool: one idle set, the warm target and idle limit counted
// across all of them, and reconciliation that knows every instance's items.
//
//	inv, err := redispool.New(rdb, redispool.Options{Prefix: "warm"}) // or shared.NewMemoryInventory(nil)
//	p, err := pool.New[Container](prov, pool.Options{
//		MinIdle:   2,   // across every instance
//		MaxSize:   10,  // this instance's capacity
//		Inventory: inv, // shared with the other instances
//		Instance:  hostname,
//	})
//	h, err := p.Acquire(ctx) // pops an idle item of any instance, or creates one
//	defer h.Release()        // back into the shared idle set
//
// A pool plugs an [Inventory] in through pool.Options.Inventory and then
// keeps its idle items in it, records there every item it holds, and
// refreshes those records while it runs, so that the items of an instance
// that dies are cleaned up as orphans by the others. The Provisioner must
// have an ID(T) string method (the item's identity at the provider) and
// may implement [Codec] (items travel as JSON otherwise).
//
// pool/redispool is the Redis Inventory; [NewMemoryInventory] is the
// in-process one; pool/pooltest is the conformance suite every Inventory
// passes.
package shared
