// Package claim holds a unit of work as a lease: one holder at a time (an
// operation, a conversation's assignment, a destroy), kept alive while the
// work runs and released when it ends. An instance that dies while holding
// a claim stops heartbeating it, so another instance takes the work over
// once the lease's grace has passed: no lock to reset by hand.
package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ttlkit/ttlkit/lease"
)

// Claim is a claim held, kept alive until Release. Its embedded KeepAlive
// tells when it is lost (Done, Err): the work must stop then, as another
// instance may take it over.
type Claim struct {
	*lease.KeepAlive
	m      *lease.Manager
	id     string
	holder string
}

// Take grants holder's claim on resource as a lease of cost 1 for ttl with
// grace, heartbeated every grace/4 until Release. It returns nil, nil when
// the claim is not this caller's to take: another instance holds it, or
// the Manager refuses grants for now (a [lease.RejectedError]).
func Take(ctx context.Context, m *lease.Manager, holder, resource string, ttl, grace time.Duration) (*Claim, error) {
	l, err := m.Grant(ctx, lease.Request{Holder: holder, Resource: resource, Cost: 1, TTL: ttl, Grace: grace})
	if rej := (*lease.RejectedError)(nil); errors.As(err, &rej) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", holder, err)
	}
	ka := m.KeepAlive(context.WithoutCancel(ctx), l, grace/4)
	return &Claim{KeepAlive: ka, m: m, id: l.ID, holder: holder}, nil
}

// Release stops keeping the claim alive and releases it, within 10 s
// whatever ctx's deadline. A claim already gone is released; a release
// that fails is harmless, as the claim lapses after its grace.
func (c *Claim) Release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = c.KeepAlive.Close(ctx)
	_, err := c.m.Release(ctx, c.id, c.holder)
	if err != nil && !errors.Is(err, lease.ErrNotFound) && !errors.Is(err, lease.ErrExpired) {
		return fmt.Errorf("claim %s: release: %w", c.holder, err)
	}
	return nil
}
