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
// A [Manager] grants a [Lease] of some budget units to a holder. A lease
// ends at its ExpiresAt or when its heartbeat grace runs out, whichever
// comes first; an expired lease is absent at once, for reads and for the
// budget, and is never live again. Every decision is one atomic step in a
// [Store]: [NewMemoryStore] (the default), or lease/redislease and
// lease/sqllease to share one budget between processes. lease/leasetest is
// the conformance suite every store passes.
//
// Every store guarantees, while it keeps its state: never more live units
// than the budget, at most one live lease per holder (unless
// [Options.AllowMultiplePerHolder]), fencing tokens that only grow, and a
// store deadline never earlier than the local deadline of a [KeepAlive] or
// [HeartbeatResult]. The memory store lives and dies with its process; what
// the server stores need from their servers, and what they do when one
// loses data, is in their package docs.
//
// # Errors
//
// A rule outcome changed nothing: [ErrNotFound], [ErrExpired] (not yet
// swept), [ErrWrongHolder], [ErrInvalid] (naming the field and its value)
// or a refused grant, a [*RejectedError] that errors.Is matches to its
// condition; [ErrRecovering] means the store lost state and refuses grants
// until every lease granted before must have lapsed. A failed store call
// matches [ErrNotApplied] if it certainly changed nothing (it never reached
// the server, or was refused or rolled back whole; retry freely), or
// [ErrUnknownOutcome] if it may have taken effect. Then retry a Grant with
// the same [GrantArgs].ID (the store answers with the lease it granted), or
// ask the Manager again and expect ErrHolderHasLease naming the lease you
// got; retry a Release and take [ErrReleased] (matched with ErrNotFound for
// a minute or more after a release) as success; a Heartbeat may be
// repeated, and the lease stays live at most until the local deadline of
// the last one that succeeded.
package lease
