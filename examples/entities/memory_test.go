package entities_test

import (
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/entities/entitiestest"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/ttltest"
)

func TestMemoryStore(t *testing.T) {
	entitiestest.RunStore(t, entitiestest.StoreHarness{
		New: func(*testing.T) entities.Store { return entities.NewMemoryStore(entities.MemoryStoreOptions{}) },
	})
}

func TestMemoryStoreMockClock(t *testing.T) {
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC))
	entitiestest.RunStore(t, entitiestest.StoreHarness{
		New: func(*testing.T) entities.Store {
			return entities.NewMemoryStore(entities.MemoryStoreOptions{Clock: mock})
		},
		Now: func(*testing.T) time.Time { return mock.Now() },
	})
}

func TestMemoryStoreTTLConformance(t *testing.T) {
	ttltest.RunStore(t, entitiestest.TTLHarness(func(*testing.T) entities.Store {
		return entities.NewMemoryStore(entities.MemoryStoreOptions{})
	}, nil))
}

var _ ttl.Store = (*entities.MemoryStore)(nil)
