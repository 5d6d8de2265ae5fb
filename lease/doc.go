// Package lease grants time-bound leases on a weighted budget.
//
// A Manager grants a Lease to a holder for a resource at a cost in budget
// units. A lease lives until its absolute ExpiresAt or until its heartbeat
// grace runs out, whichever comes first; heartbeats move only the latter.
// Grant is one atomic decision in the Store, in this order: the admission gate
// (ReasonOverloaded), one live lease per holder (ReasonHolderHasLease), then the
// budget (ReasonOverCapacity). Rejections are *RejectedError values that match
// ErrOverloaded, ErrHolderHasLease and ErrOverCapacity with errors.Is. A
// request may list fallback costs (main stream 2 units, else sub stream 1),
// and every grant carries a fencing token that only grows.
//
// Expired leases count as absent at once, for reads and for the budget; the
// Manager's sweep loop (or Manager.Sweep by hand) only reclaims their records
// and reports each one once as an expired event, even with several Managers
// sweeping one shared store.
//
// The Store interface is the unit of atomicity. MemoryStore is the default;
// lease/redislease and lease/sqllease let several processes share one budget,
// and lease/leasetest is the conformance suite every store passes.
//
// KeepAlive heartbeats a lease in the background and reports its loss as soon
// as its own conservative deadline passes, without waiting for the server.
//
// Files: lease.go (the Lease type), store.go (the Store contract), memory.go
// (MemoryStore), manager.go (Manager), sweep.go (Sweep and its loop),
// keepalive.go, options.go, event.go, stats.go and errors.go.
package lease
