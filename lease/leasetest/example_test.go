package leasetest_test

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/leasetest"
)

// A Harness tells Run how to get stores: New returns a fresh store for each
// subtest, isolated from every other, and the optional Peer returns a second
// instance over the same data as the store it is given (for the in-memory
// store, the store itself; for a server store, one on its own connection).
// This example checks both properties by hand, as the suite relies on them.
// A store's test then runs the whole suite with one call:
//
//	func TestConformance(t *testing.T) { leasetest.Run(t, h) }
func Example() {
	h := leasetest.Harness{
		New:  func(*testing.T) lease.Store { return lease.NewMemoryStore(nil) },
		Peer: func(_ *testing.T, s lease.Store) lease.Store { return s },
		Unit: 250 * time.Millisecond, // for a server store; the memory suite runs in synctest
	}
	ctx := context.Background()
	first, other := h.New(nil), h.New(nil)
	peer := h.Peer(nil, first)
	grant := func(s lease.Store, holder string) error {
		_, err := s.Grant(ctx, lease.GrantArgs{
			ID: crand.Text(), Holder: holder, Costs: []int{2}, Budget: 3,
			TTL: time.Minute, Grace: time.Minute, OnePerHolder: true,
		})
		return err
	}
	if err := grant(first, "alice"); err != nil {
		fmt.Println(err)
		return
	}
	units, n, _ := peer.Usage(ctx)
	fmt.Printf("the peer sees %d units in %d lease\n", units, n)
	units, n, _ = other.Usage(ctx)
	fmt.Printf("another new store sees %d units in %d leases\n", units, n)
	err := grant(peer, "alice")
	fmt.Println("alice again through the peer:", errors.Is(err, lease.ErrHolderHasLease))
	err = grant(other, "alice")
	fmt.Println("alice in the other store:", err)
	// Output:
	// the peer sees 2 units in 1 lease
	// another new store sees 0 units in 0 leases
	// alice again through the peer: true
	// alice in the other store: <nil>
}
