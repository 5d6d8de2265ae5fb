package ttltest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/ttltest"
)

// table is a system's own table of entities, in memory: all that ttl asks
// of it is a ttl.Store's Add and Apply.
type table struct {
	mu   sync.Mutex
	rows map[string]*ttltest.Entity
}

func (t *table) Add(_ context.Context, acts []ttl.Activity) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, a := range acts {
		if e, ok := t.rows[a.ID]; ok && a.At.After(e.LastActivityAt) {
			e.LastActivityAt = a.At
		}
	}
	return nil
}

func (t *table) Apply(_ context.Context, r ttl.Rule) ([]ttl.Expiry, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	var out []ttl.Expiry
	for id, e := range t.rows {
		since := map[ttl.Since]time.Time{
			ttl.SinceLastActivity: e.LastActivityAt,
			ttl.SincePhaseChanged: e.PhaseChangedAt,
			ttl.SinceCreated:      e.CreatedAt,
		}[r.Since]
		if e.Phase == r.Phase && e.Operation == "" && e.DeletedAt.IsZero() && e.DesiredState != r.Then &&
			!since.IsZero() && now.Sub(since) > r.After {
			e.DesiredState = r.Then
			out = append(out, ttl.Expiry{ID: id, Rule: r.String(), Then: r.Then, LastActivityAt: e.LastActivityAt, DecidedAt: now})
		}
	}
	return out, nil
}

// harness is what a backend's test passes to RunStore: how to make an
// isolated, empty store, and how to write and read its entities, which a
// ttl.Store leaves to the system that owns them.
var harness = ttltest.StoreHarness{
	New: func(*testing.T) ttl.Store { return &table{rows: map[string]*ttltest.Entity{}} },
	Create: func(_ *testing.T, st ttl.Store, es ...ttltest.Entity) {
		for _, e := range es {
			st.(*table).rows[e.ID] = &e
		}
	},
	Get: func(_ *testing.T, st ttl.Store, id string) (ttltest.Entity, bool) {
		e, ok := st.(*table).rows[id]
		if !ok {
			return ttltest.Entity{}, false
		}
		return *e, true
	},
}

func TestRunStore(t *testing.T) { ttltest.RunStore(t, harness) }

// A backend runs the suites from its own tests with a harness that returns an
// isolated, empty store or buffer:
//
//	func TestConformance(t *testing.T) {
//		ttltest.RunStore(t, ttltest.StoreHarness{
//			New:    func(t *testing.T) ttl.Store { return newStoreInFreshSchema(t) },
//			Create: insertRows,
//			Get:    selectRow,
//		})
//	}
//
// The suite never waits for a TTL to pass. Like this example, it creates
// entities whose timestamps already lie in the past, relative to the store's
// now, and applies rules with a minute of margin either side, so a store that
// decides with a database server's clock passes in seconds.
func Example() {
	ctx := context.Background()
	store := harness.New(nil)
	now := time.Now() // StoreHarness.Now; the server's now() for a SQL store
	for id, idle := range map[string]time.Duration{"idle": 11 * time.Minute, "fresh": 9 * time.Minute} {
		at := now.Add(-idle)
		harness.Create(nil, store, ttltest.Entity{ID: id, Phase: "RUNNING", CreatedAt: at, LastActivityAt: at, PhaseChangedAt: at})
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
