package ttl_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/internal/memstore"
	"github.com/ttlkit/ttlkit/ttl/ttltest"
)

func TestMemoryStoreConformance(t *testing.T) {
	ttltest.RunStore(t, memstore.Harness(memstore.Options{}))
}

func TestMemoryStoreConformanceMockClock(t *testing.T) {
	mock := clock.NewMock()
	mock.Set(time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC))
	h := memstore.Harness(memstore.Options{Clock: mock})
	h.Now = func(*testing.T) time.Time { return mock.Now() }
	ttltest.RunStore(t, h)
}

func TestMemoryBufferConformance(t *testing.T) {
	ttltest.RunBuffer(t, ttltest.BufferHarness{
		New: func(*testing.T) ttl.Buffer { return new(ttl.MemoryBuffer) },
	})
}

// TestMemoryStoreUsesItsClock shows that Apply decides with the store's
// clock, not the caller's: with a mock clock nothing expires until the mock
// moves past the rule's After.
func TestMemoryStoreUsesItsClock(t *testing.T) {
	ctx := context.Background()
	mock := clock.NewMock()
	start := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)
	mock.Set(start)
	st := memstore.New(memstore.Options{Clock: mock})
	e, err := st.Create(ctx, memstore.Entity{ID: "ws", Phase: "RUNNING"})
	require.NoError(t, err)
	assert.Equal(t, start, e.CreatedAt)
	rules := workspaceRules(10*time.Minute, 30*time.Minute)

	mock.Add(10 * time.Minute) // exactly After: not expired yet (strictly greater)
	ids, err := st.Apply(ctx, rules[0])
	require.NoError(t, err)
	assert.Empty(t, ids)

	mock.Add(time.Millisecond)
	ids, err = st.Apply(ctx, rules[0])
	require.NoError(t, err)
	assert.Equal(t, []ttl.Expiry{{ID: "ws", Rule: "standby", Then: "STANDBY", LastActivityAt: start, DecidedAt: mock.Now()}}, ids)

	e, err = st.Update(ctx, "ws", memstore.Update{Phase: "STANDBY"})
	require.NoError(t, err)
	assert.Equal(t, mock.Now(), e.PhaseChangedAt)
	mock.Add(30*time.Minute + time.Millisecond)
	ids, err = st.Apply(ctx, rules[1])
	require.NoError(t, err)
	assert.Equal(t, []ttl.Expiry{{ID: "ws", Rule: "archive", Then: "ARCHIVED", LastActivityAt: start, DecidedAt: mock.Now()}}, ids)
}
