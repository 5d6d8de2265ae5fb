package backend

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/lease"
)

// TestClaimConversation: one instance at a time assigns a conversation;
// a claim released is free at once; a claim kept alive holds however long
// the assignment runs; the claim of an instance that died lapses after
// ClaimGrace, and another instance takes the conversation over.
func TestClaimConversation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		claims, err := lease.New(claimBudget, lease.Options{})
		require.NoError(t, err)
		defer func() { require.NoError(t, claims.Close(ctx)) }()
		const grace = 10 * time.Second
		instance := func(name string) *Backend {
			return &Backend{claims: claims, log: slog.New(slog.DiscardHandler),
				cfg: Config{Instance: name, AssignTimeout: 2 * time.Minute, ClaimGrace: grace}}
		}
		a, b := instance("a"), instance("b")

		release, err := a.claimConversation(ctx, "c1")
		require.NoError(t, err)
		require.NotNil(t, release)
		other, err := b.claimConversation(ctx, "c1")
		require.NoError(t, err)
		assert.Nil(t, other, "a conversation is claimed by one instance at a time")
		other, err = b.claimConversation(ctx, "c2")
		require.NoError(t, err)
		require.NotNil(t, other, "claims of other conversations are independent")
		other()

		// Kept alive, a's claim outlives several graces.
		time.Sleep(3 * grace)
		other, err = b.claimConversation(ctx, "c1")
		require.NoError(t, err)
		assert.Nil(t, other, "a claim kept alive holds past its grace")
		release()
		other, err = b.claimConversation(ctx, "c1")
		require.NoError(t, err)
		require.NotNil(t, other, "a released claim is free at once")
		other()

		// An instance that died mid-assignment: its claim, granted as
		// claimConversation grants one, is never heartbeated again.
		_, err = claims.Grant(ctx, lease.Request{Holder: "assign/c3", Resource: "dead", Cost: 1,
			TTL: 2*time.Minute + grace, Grace: grace})
		require.NoError(t, err)
		time.Sleep(grace - time.Millisecond)
		other, err = b.claimConversation(ctx, "c3")
		require.NoError(t, err)
		assert.Nil(t, other, "never before the dead instance's grace")
		time.Sleep(time.Millisecond)
		other, err = b.claimConversation(ctx, "c3")
		require.NoError(t, err)
		require.NotNil(t, other, "taken over once the dead instance's claim lapsed")
		other()
	})
}
