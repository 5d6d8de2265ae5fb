package ttltest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ttlkit/ttlkit/ttl"
)

// A backend runs the suites from its own tests with a harness that returns an
// isolated, empty store or buffer:
//
//	func TestConformance(t *testing.T) {
//		ttltest.RunStore(t, ttltest.StoreHarness{
//			New: func(t *testing.T) ttl.Store { return newStoreInFreshSchema(t) },
//		})
//	}
//
// The suite never waits for a TTL to pass. Like this example, it creates
// entities whose timestamps already lie in the past, relative to the store's
// now, and applies rules with a minute of margin either side, so a store that
// decides with a database server's clock passes in seconds.
func Example() {
	ctx := context.Background()
	store := ttl.NewMemoryStore(ttl.MemoryStoreOptions{})
	now := time.Now() // StoreHarness.Now; the server's now() for a SQL store
	for id, idle := range map[string]time.Duration{"idle": 11 * time.Minute, "fresh": 9 * time.Minute} {
		if _, err := store.Create(ctx, ttl.Entity{ID: id, Phase: "RUNNING", CreatedAt: now.Add(-idle)}); err != nil {
			panic(err)
		}
	}
	standby := ttl.Rule{Name: "standby", Phase: "RUNNING", Since: ttl.SinceLastActivity, After: 10 * time.Minute, Then: "STANDBY"}
	expired, err := store.Apply(ctx, standby)
	if err != nil {
		panic(err)
	}
	for _, x := range expired {
		fmt.Printf("expired: %s (%s -> %s), idle %v\n", x.ID, x.Rule, x.Then, x.DecidedAt.Sub(x.LastActivityAt).Round(time.Minute))
	}
	// Output: expired: idle (standby -> STANDBY), idle 11m0s
}
