package redisttl_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/internal/memstore"
	"github.com/ttlkit/ttlkit/ttl/redisttl"
)

// hookStore runs a hook inside Add, that is after the Runner's
// Peek and before its Remove.
type hookStore struct {
	ttl.Store
	mu   sync.Mutex
	hook func()
}

func (s *hookStore) Add(ctx context.Context, acts []ttl.Activity) error {
	s.mu.Lock()
	hook := s.hook
	s.hook = nil
	s.mu.Unlock()
	err := s.Store.Add(ctx, acts)
	if hook != nil {
		hook()
	}
	return err
}

// TestRunnerTickKeepsActivityAddedDuringDrain goes through Runner.Tick: a
// second proxy instance adds newer activity on its own connection while the
// tick writes the batch it read to the store. The Remove that follows keeps
// it, and the next tick carries it to the store.
func TestRunnerTickKeepsActivityAddedDuringDrain(t *testing.T) {
	ctx := context.Background()
	b, r := newBuffer(t)
	proxy, err := redisttl.New(r.NewClient(t), redisttl.Options{Prefix: r.Prefix})
	require.NoError(t, err)
	mock := clock.NewMock()
	t0 := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)
	mock.Set(t0)
	mem := memstore.New(memstore.Options{Clock: mock})
	st := &hookStore{Store: mem}
	for _, id := range []string{"ws-1", "ws-2"} {
		_, err := mem.Create(ctx, memstore.Entity{ID: id, Phase: "RUNNING", CreatedAt: t0.Add(-time.Hour)})
		require.NoError(t, err)
	}
	runner, err := ttl.NewRunner(st, nil, ttl.RunnerOptions{Buffer: b, Clock: mock, Interval: time.Hour})
	require.NoError(t, err)
	defer runner.Close(context.Background())

	require.NoError(t, b.Add(ctx, []ttl.Activity{{ID: "ws-1", At: t0.Add(-time.Minute)}, {ID: "ws-2", At: t0.Add(-time.Minute)}}))
	st.hook = func() {
		require.NoError(t, proxy.Add(ctx, []ttl.Activity{{ID: "ws-1", At: t0}}))
	}
	res, err := runner.Tick(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Synced)
	left, err := b.Peek(ctx, ttl.Activity{}, 10)
	require.NoError(t, err)
	assert.Equal(t, []ttl.Activity{{ID: "ws-1", At: t0}}, left, "the activity added during the drain is still buffered")

	res, err = runner.Tick(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Synced)
	e, err := mem.Get(ctx, "ws-1")
	require.NoError(t, err)
	assert.True(t, e.LastActivityAt.Equal(t0), "ws-1 at %v, want %v", e.LastActivityAt, t0)
	n, err := b.Len(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
}
