package leasetest_test

import (
	"testing"
	"testing/synctest"

	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/leasetest"
)

// TestMemory runs the suite on the in-memory store, so the suite itself is
// exercised by this package's tests: on fake time, every subtest in a
// synctest bubble, so waits cost nothing. The store is its own peer.
func TestMemory(t *testing.T) {
	leasetest.Run(t, leasetest.Harness{
		New:  func(t *testing.T) lease.Store { return lease.NewMemoryStore(nil) },
		Peer: func(t *testing.T, s lease.Store) lease.Store { return s },
		Wrap: func(t *testing.T, body func(t *testing.T)) { synctest.Test(t, body) },
	})
}

// TestWithoutPeer: a nil Peer skips the subtest that needs it, and the
// suite still runs every other one.
func TestWithoutPeer(t *testing.T) {
	leasetest.Run(t, leasetest.Harness{
		New:  func(t *testing.T) lease.Store { return lease.NewMemoryStore(nil) },
		Wrap: func(t *testing.T, body func(t *testing.T)) { synctest.Test(t, body) },
	})
}
