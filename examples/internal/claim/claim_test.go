package claim_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ttlkit/ttlkit/examples/internal/claim"
	"github.com/ttlkit/ttlkit/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestTake: one holder at a time; a released claim is free at once; a
// claim whose keeper stopped (its instance died) is free once its grace
// has passed after the last heartbeat, never before; a release of a
// claim already gone is not an error.
func TestTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m, err := lease.New(10, lease.Options{})
		require.NoError(t, err)
		defer m.Close(ctx)
		const ttl, grace = time.Minute, 10 * time.Second

		a, err := claim.Take(ctx, m, "op/1", "a", ttl, grace)
		require.NoError(t, err)
		require.NotNil(t, a)
		other, err := claim.Take(ctx, m, "op/1", "b", ttl, grace)
		require.NoError(t, err)
		assert.Nil(t, other, "a claim held is not taken")
		time.Sleep(ttl / 2) // kept alive past its grace
		other, err = claim.Take(ctx, m, "op/1", "b", ttl, grace)
		require.NoError(t, err)
		assert.Nil(t, other, "a claim kept alive is not taken")
		select {
		case <-a.Done():
			t.Fatal("a claim kept alive was lost")
		default:
		}

		require.NoError(t, a.Release(ctx))
		require.NoError(t, a.Release(ctx), "a claim already released")
		b, err := claim.Take(ctx, m, "op/1", "b", ttl, grace)
		require.NoError(t, err)
		require.NotNil(t, b, "a released claim is free")

		// b's instance dies: its heartbeats stop, its lease stays.
		require.NoError(t, b.KeepAlive.Close(ctx))
		time.Sleep(grace - time.Second)
		other, err = claim.Take(ctx, m, "op/1", "c", ttl, grace)
		require.NoError(t, err)
		assert.Nil(t, other, "taken over before the grace passed")
		time.Sleep(2 * time.Second)
		c, err := claim.Take(ctx, m, "op/1", "c", ttl, grace)
		require.NoError(t, err)
		require.NotNil(t, c, "taken over once the grace passed")
		require.NoError(t, b.Release(ctx), "the lapsed claim's release")
		require.NoError(t, c.Release(ctx))
	})
}
