// Package lease grants time-bound leases on a weighted budget.
//
//	m, err := lease.New(35, lease.Options{}) // a budget of 35 units
//	if err != nil { ... }
//	defer m.Close(ctx)
//	l, err := m.Grant(ctx, lease.Request{Holder: "alice", Resource: "stream-7", Cost: 2, Fallback: []int{1}})
//	if errors.Is(err, lease.ErrOverCapacity) { ... } // also ErrOverloaded, ErrHolderHasLease
//	k := m.KeepAlive(ctx, l, 0) // heartbeats; <-k.Done() when the lease is lost
//	...
//	_, err = m.Release(ctx, l.ID, "")
//
// A [Manager] grants a [Lease] to a holder for a resource at a cost in
// budget units. A lease lives until its absolute ExpiresAt or until its
// heartbeat grace runs out, whichever comes first; heartbeats move only the
// latter. Grant is one atomic decision in the [Store], in this order: the
// admission gate ([ErrOverloaded]), one live lease per holder
// ([ErrHolderHasLease]), then the budget ([ErrOverCapacity]). A refusal is a
// [*RejectedError] that carries what the store saw (the budget available,
// the holder's existing lease) and matches its condition with errors.Is. A
// request may list fallback costs, and every grant carries a fencing token
// that only grows.
//
// Expired leases count as absent at once, for reads and for the budget; the
// Manager's sweep loop (or [Manager.Sweep] by hand) only reclaims their
// records and reports each one once as an [EventExpired] event, even with
// several Managers sweeping one shared store.
//
// The Store interface is the unit of atomicity. [NewMemoryStore] is the
// default; lease/redislease and lease/sqllease let several processes share
// one budget, and lease/leasetest is the conformance suite every store
// passes.
//
// [Manager.KeepAlive] heartbeats a lease in the background and reports its
// loss as soon as its own conservative deadline passes, without waiting for
// the server. [Manager.Heartbeat] returns the same local deadline
// ([HeartbeatResult]), and [Manager.Heartbeat] and [Manager.Release] given
// a holder check it in the same atomic step, so a server can let a user
// touch only its own leases.
//
// # What a caller may rely on
//
// While the store keeps its state, every store guarantees the same: never
// more live units than the budget, at most one live lease per holder (with
// the rule on), tokens that only grow, an expired lease never live again,
// and a store deadline never earlier than the local deadline of KeepAlive
// or HeartbeatResult (times are microseconds or finer, never rounded down).
// What each store needs from its server for that, and what it does when
// the server loses data:
//
//   - NewMemoryStore: nothing; it lives and dies with the process, and so do
//     the Managers that use it.
//   - lease/redislease: persistence for acknowledged state (appendonly yes,
//     ideally appendfsync always and WAITAOF or WAIT before acknowledging
//     on a replicated setup). When the state is lost anyway (a restart
//     without data or with older data, a failover to a replica that missed
//     writes) the store detects it, refuses grants with ErrRecovering
//     for its MaxGrace, until every lease granted before must have lapsed
//     for its holder, and keeps tokens growing (they never go below the
//     server clock in µs). Leases lost with the state are gone: their
//     heartbeats fail with ErrNotFound, and their holders stop at their
//     local deadlines. See the package documentation for what it cannot
//     detect.
//   - lease/sqllease: durable commits (PostgreSQL fsync and
//     synchronous_commit on, with synchronous replication for failover;
//     MySQL/MariaDB InnoDB with innodb_flush_log_at_trx_commit=1 and
//     sync_binlog=1, semi-synchronous replication for failover). It has no
//     detection of lost commits: a database restored to an earlier point
//     or failed over to a replica that missed commits breaks every promise
//     above until the leases granted before have lapsed; hold grants back
//     by hand for the longest grace after such an event.
//
// Errors tell a caller what happened (see Store for the exact contract):
//
//   - ErrNotFound, ErrExpired, ErrWrongHolder, ErrInvalid and a
//     *RejectedError: decided; nothing changed. ErrNotFound with
//     ErrReleased: the lease was released (perhaps by a call of yours
//     whose reply was lost).
//   - ErrRecovering (a *RejectedError): the store lost state; retry after
//     [RejectedError].RetryAfter.
//   - ErrNotApplied: the call failed and certainly changed nothing; retry
//     it freely.
//   - ErrUnknownOutcome: the call failed and may have taken effect. Retry
//     a Grant with the same id (Store.Grant) or ask the Manager again and
//     expect ErrHolderHasLease naming the lease you were granted; retry a
//     Release and take ErrReleased as success; a heartbeat that failed so
//     left the lease live at most until the local deadline of the last one
//     that succeeded.
//
// Files: lease.go (the Lease type), store.go (the Store contract), memory.go
// (NewMemoryStore), manager.go (Manager), sweep.go (Sweep and its loop),
// keepalive.go, options.go, event.go, stats.go and errors.go.
package lease
