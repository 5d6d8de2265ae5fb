package pooltest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/pool/pooltest"
	"github.com/ttlkit/ttlkit/pool/shared"
)

// sharedMemory opens n views of one in-memory inventory: the shape of a
// harness for a shared store, where n pool instances see the same records.
func sharedMemory(t *testing.T, n int) []shared.Inventory {
	inv := shared.NewMemoryInventory(nil)
	views := make([]shared.Inventory, n)
	for i := range views {
		views[i] = inv
	}
	return views
}

// TestMemoryInventory runs the suite on the reference implementation, so the
// suite itself is checked wherever it changes.
func TestMemoryInventory(t *testing.T) {
	pooltest.Run(t, pooltest.Harness{Open: sharedMemory})
}

// An Inventory backend runs the whole suite from one test:
//
//	func TestInventory(t *testing.T) {
//		pooltest.Run(t, pooltest.Harness{Open: openShared})
//	}
//
// where Open returns n views of one fresh store, one per pool instance.
func Example() {
	invs := sharedMemory(nil, 2)
	ctx := context.Background()
	// One instance adds a warm item; another sees it and takes it.
	if err := invs[0].Add(ctx, shared.Record{ID: "c1"}, time.Minute); err != nil {
		fmt.Println(err)
	}
	rec, ok, err := invs[1].Pop(ctx, "instance-2", time.Minute)
	fmt.Println(rec.ID, rec.Owner, ok, err)
	c, _ := invs[0].Counts(ctx)
	fmt.Printf("idle %d, in use %d\n", c.Idle, c.InUse)
	// Output:
	// c1 instance-2 true <nil>
	// idle 0, in use 1
}
