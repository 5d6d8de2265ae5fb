package entities_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/entities/entitiestest"
	"github.com/ttlkit/ttlkit/ttl"
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

var _ ttl.Store = (*entities.MemoryStore)(nil)

// TestMemoryStoreUsesItsClock shows that Apply decides with the store's
// clock, not the caller's: with a mock clock nothing expires until the mock
// moves past the rule's After.
func TestMemoryStoreUsesItsClock(t *testing.T) {
	ctx := context.Background()
	mock := clock.NewMock()
	start := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)
	mock.Set(start)
	st := entities.NewMemoryStore(entities.MemoryStoreOptions{Clock: mock})
	e, err := st.Create(ctx, entities.Entity{ID: "ws", Phase: "RUNNING"})
	require.NoError(t, err)
	assert.Equal(t, start, e.CreatedAt)
	rules := []ttl.Rule{
		{Name: "standby", Phase: "RUNNING", Since: ttl.SinceLastActivity, After: 10 * time.Minute, Then: "STANDBY"},
		{Name: "archive", Phase: "STANDBY", Since: ttl.SincePhaseChanged, After: 30 * time.Minute, Then: "ARCHIVED"},
	}

	mock.Add(10 * time.Minute) // exactly After: not expired yet (strictly greater)
	ids, err := st.Apply(ctx, rules[0])
	require.NoError(t, err)
	assert.Empty(t, ids)

	mock.Add(time.Millisecond)
	ids, err = st.Apply(ctx, rules[0])
	require.NoError(t, err)
	assert.Equal(t, []ttl.Expiry{{ID: "ws", Rule: "standby", Then: "STANDBY", LastActivityAt: start, DecidedAt: mock.Now()}}, ids)

	e, err = st.Update(ctx, "ws", entities.Update{Phase: "STANDBY"})
	require.NoError(t, err)
	assert.Equal(t, mock.Now(), e.PhaseChangedAt)
	mock.Add(30*time.Minute + time.Millisecond)
	ids, err = st.Apply(ctx, rules[1])
	require.NoError(t, err)
	assert.Equal(t, []ttl.Expiry{{ID: "ws", Rule: "archive", Then: "ARCHIVED", LastActivityAt: start, DecidedAt: mock.Now()}}, ids)
}
