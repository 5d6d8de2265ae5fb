// Package leasecheck records the operations that clients run on lease
// Stores and checks that the history is linearizable against a sequential
// model of the Store contract (with github.com/anishathalye/porcupine). The
// model knows every rule: decision order, fallback costs, strictly
// increasing tokens, liveness, heartbeats, sweeps. So a linearizable history
// also never oversubscribed the budget nor gave a holder two live leases.
//
// Time: with a now function (a memory store in a synctest bubble, where an
// operation runs at the instant it is called) the model applies expiry
// exactly. Without one (a server store, whose clock the client cannot read)
// the model treats every lease as live, so the run must use TTLs and graces
// longer than the run and expects sweeps to find nothing.
//
// Calls that fail with a transport error (neither a rule outcome nor a
// context error before sending) are recorded as ambiguous: they may or may
// not have taken effect, at any time after their call.
package leasecheck
