package ttl_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/internal/memstore"
)

// TestControllerKeepsEntityActiveAfterDecision is the sequence "the TTL
// runner decides STANDBY on stale activity; the proxy sees activity at the
// same time; the controller sees the activity and keeps it RUNNING". The
// wake carries the decision and the LastActivityAt it was based on; the
// controller's compare-and-set on that LastActivityAt fails because newer
// activity was merged since, so it clears the decision instead, and the
// rule decides again once the entity is really idle. Before, a wake
// carried only ids, Update could compare only the operation, and a
// DesiredState could not be cleared: once STANDBY, the decision stood.
func TestControllerKeepsEntityActiveAfterDecision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := memstore.New(memstore.Options{})
		buf := new(ttl.MemoryBuffer)
		var (
			mu    sync.Mutex
			woken []ttl.Expiry
		)
		r := newRunner(t, st, workspaceRules(10*time.Minute, 30*time.Minute), ttl.RunnerOptions{
			Buffer: buf, Interval: time.Hour,
			Wake: func(_ context.Context, exps []ttl.Expiry) error {
				mu.Lock()
				defer mu.Unlock()
				woken = append(woken, exps...)
				return nil
			},
		})
		defer r.Close(context.Background())
		tr := newTracker(t, buf, ttl.TrackerOptions{FlushInterval: time.Hour, Resolution: -1})
		defer tr.Close(ctx)
		old := time.Now().Add(-11 * time.Minute)
		create(t, st, memstore.Entity{ID: "ws", Phase: "RUNNING", CreatedAt: old})

		_, err := r.Tick(ctx)
		require.NoError(t, err)
		mu.Lock()
		require.Len(t, woken, 1)
		x := woken[0]
		woken = nil
		mu.Unlock()
		assert.Equal(t, ttl.Expiry{ID: "ws", Rule: "standby", Then: "STANDBY", LastActivityAt: old, DecidedAt: time.Now()}, x)

		// The user types before the controller gets to it.
		time.Sleep(time.Second)
		tr.Record("ws")
		require.NoError(t, flushErr(tr.Flush(ctx)))
		_, err = r.Tick(ctx)
		require.NoError(t, err)

		// The controller stops only if nothing happened since the decision.
		stop := memstore.Update{ExpectPhase: "RUNNING", ExpectDesiredState: x.Then, ExpectLastActivityAt: x.LastActivityAt, Operation: "STOPPING"}
		_, err = st.Update(ctx, x.ID, stop)
		require.ErrorIs(t, err, memstore.ErrConflict)
		e := get(t, st, "ws")
		require.True(t, e.LastActivityAt.After(x.LastActivityAt))
		e, err = st.Update(ctx, x.ID, memstore.Update{ExpectDesiredState: x.Then, ClearDesiredState: true})
		require.NoError(t, err)
		assert.Equal(t, "RUNNING", e.Phase)
		assert.Empty(t, e.DesiredState)
		assert.Empty(t, e.Operation)

		// A full reconcile finds nothing pending.
		assert.Empty(t, get(t, st, "ws").DesiredState)

		// Really idle now: the rule decides again, and this time the
		// controller's compare-and-set goes through.
		time.Sleep(10*time.Minute + time.Second)
		_, err = r.Tick(ctx)
		require.NoError(t, err)
		mu.Lock()
		require.Len(t, woken, 1)
		x = woken[0]
		mu.Unlock()
		assert.Equal(t, e.LastActivityAt, x.LastActivityAt)
		pending := get(t, st, "ws")
		require.Equal(t, "RUNNING", pending.Phase)
		require.Equal(t, "STANDBY", pending.DesiredState)
		_, err = st.Update(ctx, x.ID, memstore.Update{ExpectPhase: "RUNNING", ExpectDesiredState: x.Then, ExpectLastActivityAt: x.LastActivityAt, Operation: "STOPPING"})
		require.NoError(t, err)
	})
}
