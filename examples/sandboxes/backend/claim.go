package backend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ttlkit/ttlkit/lease"
)

// claimBudget is the budget of the claims Manager a Backend makes when
// Config.Claims is nil: far more assignments than run at once.
const claimBudget = 1 << 20

// claimConversation claims conversation conv's assignment as a lease (package lease;
// the holder is the conversation, so that one instance at a time assigns
// it): granted for AssignTimeout plus ClaimGrace and kept alive while the
// assignment runs, so that the claim of an instance that died lapses
// ClaimGrace after its last heartbeat and another instance can take the
// conversation over. It returns a release function, or nil, nil if the
// conversation is claimed already (or the claims' store holds grants back
// after a loss): it is not this instance's to assign now.
func (b *Backend) claimConversation(ctx context.Context, conv string) (release func(), err error) {
	grace := b.cfg.ClaimGrace
	l, err := b.claims.Grant(ctx, lease.Request{
		Holder: conv, Resource: b.cfg.Instance, Cost: 1,
		TTL: b.cfg.AssignTimeout + grace, Grace: grace,
	})
	if rej := (*lease.RejectedError)(nil); errors.As(err, &rej) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("conversation %s: claim: %w", conv, err)
	}
	ka := b.claims.KeepAlive(context.WithoutCancel(ctx), l, grace/4)
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = ka.Close(ctx)
		if _, err := b.claims.Release(ctx, l.ID); err != nil && !errors.Is(err, lease.ErrNotFound) && !errors.Is(err, lease.ErrExpired) {
			b.log.Warn("releasing a conversation's claim failed; it lapses", "conversation", conv, "err", err)
		}
	}, nil
}
