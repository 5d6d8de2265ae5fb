package backend

import (
	"context"
	"time"

	"github.com/ttlkit/ttlkit/examples/internal/claim"
)

// Claims. One instance at a time assigns a conversation, and one destroys
// a sandbox: each holds a claim, a lease (package lease) in Config.Claims
// whose holder names the work ("assign/<conversation>",
// "destroy/<conversation>/<sandbox>"; a holder has one live lease at a
// time). The claim is kept alive while the work runs, so the claim of an
// instance that died lapses ClaimGrace after its last heartbeat, and the
// next instance that tries takes the work over: a conversation's next
// request, Reconcile for a destroy.

// claimBudget is the budget of the claims Manager a Backend makes when
// Config.Claims is nil: far more claims than are held at once.
const claimBudget = 1 << 20

// claimConversation claims conversation conv's assignment for
// AssignTimeout (plus ClaimGrace). It returns a release function, or
// nil, nil if the conversation is claimed already (or the claims' store
// holds grants back after a loss): it is not this instance's to assign now.
func (b *Backend) claimConversation(ctx context.Context, conv string) (release func(), err error) {
	return b.takeClaim(ctx, "assign/"+conv, b.cfg.AssignTimeout)
}

// claimDestroy claims the destroy of entity id for claimTTL, as
// claimConversation does an assignment.
func (b *Backend) claimDestroy(ctx context.Context, id string) (release func(), err error) {
	return b.takeClaim(ctx, "destroy/"+id, b.claimTTL())
}

// claimTTL bounds one destroy: a claim lives at most this long however
// long it is kept alive.
func (b *Backend) claimTTL() time.Duration { return b.cfg.Grace + 3*time.Minute }

// takeClaim grants the claim holder for work that takes at most d and
// keeps it alive until the returned release function runs; nil, nil if
// another instance holds it.
func (b *Backend) takeClaim(ctx context.Context, holder string, d time.Duration) (release func(), err error) {
	c, err := claim.Take(ctx, b.claims, holder, b.cfg.Instance, d+b.cfg.ClaimGrace, b.cfg.ClaimGrace)
	if c == nil {
		return nil, err
	}
	return func() {
		if err := c.Release(ctx); err != nil {
			b.log.Warn("releasing a claim failed; it lapses", "claim", holder, "err", err)
		}
	}, nil
}
