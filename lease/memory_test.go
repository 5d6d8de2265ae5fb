package lease_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/leasetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	leasetest.Run(t, leasetest.Harness{
		New:        func(t *testing.T) lease.Store { return lease.NewMemoryStore(nil) },
		Peer:       func(t *testing.T, s lease.Store) lease.Store { return s },
		Unit:       time.Second,
		LocalClock: true,
		Wrap:       func(t *testing.T, body func(t *testing.T)) { synctest.Test(t, body) },
	})
}

// TestMemoryStoreConformanceRealTime runs the suite as a server store runs
// it: real time, short units, no synctest.
func TestMemoryStoreConformanceRealTime(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	leasetest.Run(t, leasetest.Harness{
		New:        func(t *testing.T) lease.Store { return lease.NewMemoryStore(nil) },
		Peer:       func(t *testing.T, s lease.Store) lease.Store { return s },
		Unit:       250 * time.Millisecond, // margins of Unit/2 survive a loaded CI machine
		LocalClock: true,
	})
}
