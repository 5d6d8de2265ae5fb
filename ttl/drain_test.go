package ttl_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/ttl"
)

// TestRunnerDrainsPastRefreshedBatch: a flush lands between the first Peek
// and its Remove and makes every entry of the batch newer, so Remove
// deletes none of them. The drain must still merge what it read, carry on
// past the refreshed entries to the end of the buffer, and only then apply
// the idle rule: no entity whose buffered activity is fresh may expire.
// Before, the drain stopped after that first batch and the rule expired
// every entity it had not reached.
func TestRunnerDrainsPastRefreshedBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := ttl.NewMemoryStore(ttl.MemoryStoreOptions{})
		buf := &flakyBuffer{b: ttl.NewMemoryBuffer()}
		r := newRunner(t, st, ttl.WorkspaceRules(5*time.Second, time.Hour),
			ttl.RunnerOptions{Buffer: buf, Interval: time.Hour, BatchSize: 100})
		defer r.Close(context.Background())
		now := time.Now()
		const n = 300
		older, newer := make([]ttl.Activity, n), make([]ttl.Activity, n)
		for i := range n {
			id := fmt.Sprintf("ws-%03d", i)
			create(t, st, ttl.Entity{ID: id, Phase: "RUNNING", CreatedAt: now.Add(-7 * time.Second)})
			older[i] = ttl.Activity{ID: id, At: now.Add(-3 * time.Second)}
			newer[i] = ttl.Activity{ID: id, At: now.Add(-time.Second)}
		}
		require.NoError(t, buf.Add(ctx, older))
		buf.afterPeek = func([]ttl.Activity) {
			buf.afterPeek = nil
			require.NoError(t, buf.b.Add(ctx, newer)) // a Tracker's flush
		}

		res, err := r.Tick(ctx)
		require.NoError(t, err)
		assert.Empty(t, res.Expired, "entities with fresh buffered activity expired")
		assert.Empty(t, res.Skipped)
		assert.Equal(t, n+100, res.Synced, "the first batch, then every entry at its newer time")
		assert.Zero(t, buf.b.Len(), "the drain reached the end of the buffer")
		for _, a := range newer {
			assert.Equal(t, a.At, get(t, st, a.ID).LastActivityAt, a.ID)
		}
	})
}
