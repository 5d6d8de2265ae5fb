// Package leasetest is the conformance suite for lease.Store
// implementations. The in-memory store, lease/redislease and lease/sqllease
// all run it, and so can any third-party store:
//
//	func TestConformance(t *testing.T) {
//		leasetest.Run(t, leasetest.Harness{
//			New:  func(t *testing.T) lease.Store { return newStore(t) },
//			Peer: func(t *testing.T, s lease.Store) lease.Store { return reopen(t, s) },
//			Unit: 250 * time.Millisecond,
//		})
//	}
//
// It imports only the standard library and package lease. The suite is in
// files by concern: leasetest.go (Harness, Run), env.go (a subtest's store
// and checks), grant.go (the grant decision), lifecycle.go (heartbeat,
// release, expiry, sweep), holder.go (holder-checked calls), text.go
// (byte-exact text, limits, stamps, remembered releases), concurrency.go
// and peers.go (several instances).
package leasetest

import (
	"context"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/lease"
)

// Harness tells Run how to make stores and how time passes for them.
//
// A memory store runs the suite in fake time: set Wrap to run each subtest in
// a synctest bubble and leave Unit at its default; waits then cost nothing.
// A server store (whose own clock decides) runs in real time with a short
// Unit such as 250ms; the suite then takes about 25 Units of waiting in all.
type Harness struct {
	// New returns a fresh, empty store for one subtest; it registers any
	// cleanup with t.Cleanup. Required. It is called inside Wrap.
	New func(t *testing.T) lease.Store

	// Peer returns another store over the same data as s, as a second
	// instance would see it (its own connection or pool); for a store
	// shared only within one process, s itself. Optional: nil skips the
	// SharedByPeers subtest, and the concurrency subtests, which spread
	// their goroutines over s and two peers, then share s.
	Peer func(t *testing.T, s lease.Store) lease.Store

	// Wait lets d pass on the store's clock. Nil means time.Sleep, which is
	// right both in a synctest bubble and for a server's real clock.
	Wait func(t *testing.T, d time.Duration)

	// Unit is the time step the suite builds its TTLs, graces and waits
	// from. Waits keep half a Unit of margin around every deadline, so a
	// server store needs a Unit well above its round-trip time and clock
	// precision. Zero means 1s.
	Unit time.Duration

	// Wrap, if set, runs the body of every subtest, for example
	// synctest.Test for a store on fake time. Nil runs the body directly.
	Wrap func(t *testing.T, body func(t *testing.T))

	// LocalClock says that the store's clock is this process's time.Now:
	// an in-process store, or a server on this host. It enables the
	// StampsNeverBeforeSend subtest, which compares the store's stamps
	// with the moments the calls were sent.
	LocalClock bool

	// RemembersReleases says that the store keeps releases for
	// at least a minute, as every store whose Release can fail with
	// lease.ErrUnknownOutcome must. It enables the ReleaseRemembered
	// subtest.
	RemembersReleases bool
}

// Run runs the whole conformance suite against the stores h makes, one
// fresh store per subtest. A subtest that needs an optional Harness field
// that is nil is skipped with a message naming the field.
func Run(t *testing.T, h Harness) {
	if h.New == nil {
		t.Fatal("leasetest: Harness.New is nil")
	}
	if h.Unit <= 0 {
		h.Unit = time.Second
	}
	if h.Wait == nil {
		h.Wait = func(_ *testing.T, d time.Duration) { time.Sleep(d) }
	}
	if h.Wrap == nil {
		h.Wrap = func(t *testing.T, body func(t *testing.T)) { body(t) }
	}
	tests := []struct {
		name  string
		fn    func(t *testing.T, e *env)
		needs string // the optional Harness field the subtest needs
	}{
		{"GrantFields", testGrantFields, ""},
		{"DecisionOrder", testDecisionOrder, ""},
		{"OnePerHolderOff", testOnePerHolderOff, ""},
		{"FallbackCosts", testFallbackCosts, ""},
		{"RepeatedGrantIsIdempotent", testRepeatedGrant, ""},
		{"BudgetPerCall", testBudgetPerCall, ""},
		{"FencingTokens", testFencingTokens, ""},
		{"BadInputStoresNothing", testBadInput, ""},
		{"UnknownID", testUnknownID, ""},
		{"ReleaseReturnsUnits", testRelease, ""},
		{"HolderChecked", testHolderChecked, ""},
		{"ReleaseRemembered", testReleaseRemembered, "RemembersReleases"},
		{"TextIsExact", testTextIsExact, ""},
		{"TextLimits", testTextLimits, ""},
		{"StampsNeverBeforeSend", testStampsNeverBeforeSend, "LocalClock"},
		{"CanceledContext", testCanceledContext, ""},
		{"HeartbeatMovesOnlyHeartbeatDeadline", testHeartbeat, ""},
		{"HeartbeatNeverPastExpiresAt", testHeartbeatCapped, ""},
		{"ExpiredIsAbsentBeforeSweep", testExpiredAbsent, ""},
		{"SweepExactlyOnce", testSweepExactlyOnce, ""},
		{"ConcurrentGrantsNeverOversubscribe", testConcurrentGrants, ""},
		{"ConcurrentSameHolder", testConcurrentSameHolder, ""},
		{"ConcurrentMixed", testConcurrentMixed, ""},
		{"SharedByPeers", testSharedByPeers, "Peer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			switch {
			case tc.needs == "Peer" && h.Peer == nil:
				t.Skip("leasetest: Harness.Peer is nil; set it to check that two instances share one store")
			case tc.needs == "LocalClock" && !h.LocalClock:
				t.Skip("leasetest: Harness.LocalClock is false; set it for a store on this process's clock")
			case tc.needs == "RemembersReleases" && !h.RemembersReleases:
				t.Skip("leasetest: Harness.RemembersReleases is false; set it for a store that remembers releases")
			}
			h.Wrap(t, func(t *testing.T) {
				e := &env{h: h, s: h.New(t), u: h.Unit, ctx: context.Background()}
				tc.fn(t, e)
			})
		})
	}
}
