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
// A [Manager] grants a [Lease] of budget units to a holder until its
// ExpiresAt or until its heartbeat grace runs out, whichever comes first;
// then it is absent at once, for reads and the budget. Each decision is one
// atomic step in a [Store]: [NewMemoryStore] (the default), or
// lease/redislease or lease/sqllease to share a budget between processes
// (their docs say what they need from the server). While it keeps its
// state, every store guarantees never more live units than the budget, one
// live lease per holder (unless [Options.AllowMultiplePerHolder]), fencing
// tokens that only grow, and a deadline never earlier than the local one of
// a [KeepAlive] or [HeartbeatResult].
//
// # Errors
//
// A rule outcome changed nothing: [ErrNotFound], [ErrExpired] (not yet
// swept), [ErrWrongHolder], [ErrInvalid] (naming the field and its value)
// or a [*RejectedError], which errors.Is matches to its condition;
// [ErrRecovering] means the store lost state and refuses grants until every
// lease granted before must have lapsed. A failed store call matches
// [ErrNotApplied] if it certainly changed nothing (it never reached the
// server, or was refused or rolled back whole; retry freely), or
// [ErrUnknownOutcome] if it may have taken effect: then retry a Grant with
// the same [GrantArgs].ID, or ask the Manager again and expect
// ErrHolderHasLease naming the lease you got; retry a Release and take
// [ErrReleased] (matched with ErrNotFound for a minute or more after a
// release) as success; a Heartbeat may be repeated, and the lease stays
// live at most until the local deadline of the last one that succeeded.
package lease
