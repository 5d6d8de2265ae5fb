// Package pool keeps warm pools of slow-to-create items — containers, worker
// processes, connections — with capacity limits, FIFO waiting, expiry, health
// checks, reconciliation against the provider's real inventory and draining.
//
// A Pool[T] gets items from a Provisioner[T] and hands them out as
// *Handle[T]: Acquire waits (first come, first served) while the pool is at
// Options.MaxSize; Release returns the item; Destroy discards it. Items are
// expired on acquire, on release and by the janitor, whose steps (Prune,
// CheckHealth, Reconcile, Replenish) are public and run every
// Options.JanitorInterval. Close drains the pool.
//
// A Group[K,T] holds one Pool per key (one per function in a serverless
// gateway), created on first use with per-key options, with one janitor.
//
// By default a Pool keeps its idle items in its own memory. With
// Options.Inventory it shares one warm set with other instances (processes)
// through an Inventory such as pool/redispool; pool/pooltest is the
// conformance suite an Inventory must pass.
package pool
