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
// gateway) with per-key options; Group.Start creates the pools of the keys
// known up front, and other keys get theirs on first use. Each pool runs
// its own janitor.
//
// A Provisioner that learns when an item dies (a Watcher: pool/process
// sees its workers exit, pool/docker its containers stop) has a dead idle
// item destroyed at once, and a dead item in use destroyed when it is
// released, so no item whose death it reported is handed out. For deaths
// nobody reports (a worker that hangs), Pool.Do runs a function with an
// item and destroys the item, and retries once on another, when the
// function fails; Options.CheckOnAcquire checks idle items before they are
// handed out.
//
// By default a Pool keeps its idle items in its own memory. With
// Options.Inventory it shares one warm set with other instances (processes)
// through an Inventory such as pool/redispool; pool/pooltest is the
// conformance suite an Inventory must pass.
package pool
