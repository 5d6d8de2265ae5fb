package leasetest_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/leasetest"
)

// memoryHarness runs the suite on fake time: every subtest in a synctest
// bubble, so waits cost nothing.
var memoryHarness = leasetest.Harness{
	New:  func(t *testing.T) lease.Store { return lease.NewMemoryStore(nil) },
	Wrap: func(t *testing.T, body func(t *testing.T)) { synctest.Test(t, body) },
}

// serverHarness is the shape for a store whose server clock decides: real
// time, a short Unit, and a Peer on a second connection so the concurrency
// subtests run over several instances.
func serverHarness(open func(t *testing.T) lease.Store, peer func(t *testing.T, s lease.Store) lease.Store) leasetest.Harness {
	return leasetest.Harness{New: open, Peer: peer, Unit: 250 * time.Millisecond}
}

// conformance runs the suite on the memory store; a store's own test file
// does the same from its TestConformance.
func conformance(t *testing.T) { leasetest.Run(t, memoryHarness) }

// A store's test runs the whole suite with one call:
//
//	func TestConformance(t *testing.T) { leasetest.Run(t, harness) }
func Example() {
	h := serverHarness(nil, nil)
	fmt.Println("unit:", h.Unit)
	// Output:
	// unit: 250ms
}
