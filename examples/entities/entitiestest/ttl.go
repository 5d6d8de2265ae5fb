package entitiestest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/ttltest"
)

// TTLHarness returns the ttltest.StoreHarness of the stores newStore makes,
// writing and reading entities with the store's CreateMany and Get; now is
// StoreHarness.Now (nil: time.Now).
func TTLHarness(newStore func(*testing.T) entities.Store, now func(*testing.T) time.Time) ttltest.StoreHarness {
	return ttltest.StoreHarness{
		New: func(t *testing.T) ttl.Store { return newStore(t) },
		Create: func(t *testing.T, st ttl.Store, es ...ttltest.Entity) {
			t.Helper()
			in := make([]entities.Entity, len(es))
			for i, e := range es {
				in[i] = entities.Entity(e)
			}
			if _, err := st.(entities.Store).CreateMany(context.Background(), in); err != nil {
				t.Fatalf("CreateMany: %v", err)
			}
		},
		Get: func(t *testing.T, st ttl.Store, id string) (ttltest.Entity, bool) {
			t.Helper()
			e, err := st.(entities.Store).Get(context.Background(), id)
			if errors.Is(err, entities.ErrNotFound) {
				return ttltest.Entity{}, false
			}
			if err != nil {
				t.Fatalf("Get(%q): %v", id, err)
			}
			return ttltest.Entity(e), true
		},
		Now: now,
	}
}
