package leasecheck

import (
	"context"
	crand "crypto/rand"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/lease"
)

func args(holder string, budget int, costs ...int) lease.GrantArgs {
	return lease.GrantArgs{ID: crand.Text(), Holder: holder, Costs: costs, TTL: 10 * time.Second,
		Grace: 5 * time.Second, Budget: budget, OnePerHolder: true}
}

// exercise runs a fixed sequence covering every operation and outcome.
func exercise(t *testing.T, s lease.Store) {
	a, err := s.Grant(ctx, args("a", 3, 2, 1))
	require.NoError(t, err)
	_, _ = s.Grant(ctx, args("a", 3, 1))
	b, _ := s.Grant(ctx, args("b", 3, 2, 1))
	_, _ = s.Grant(ctx, args("c", 3, 1))
	o := args("c", 3, 1)
	o.Overloaded = true
	_, _ = s.Grant(ctx, o)
	_, _ = s.Grant(ctx, args("", 3, 1))
	time.Sleep(3 * time.Second)
	_, _ = s.Heartbeat(ctx, a.ID, "")
	_, _ = s.Get(ctx, b.ID)
	_, _, _ = s.Usage(ctx)
	_, _ = s.List(ctx)
	time.Sleep(3 * time.Second) // b expired by grace
	_, _ = s.Get(ctx, b.ID)
	_, _ = s.Heartbeat(ctx, b.ID, "")
	_, _ = s.Sweep(ctx, 10)
	_, _ = s.Get(ctx, b.ID)
	_, _ = s.Grant(ctx, args("c", 3, 1))
	_, _ = s.Release(ctx, a.ID, "")
	_, _ = s.Release(ctx, a.ID, "")
	_, _, _ = s.Usage(ctx)
}

func TestCorrectStoreIsLinearizable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := New(time.Now)
		exercise(t, h.Store(0, lease.NewMemoryStore(nil)))
		assert.Equal(t, 18, h.Len())
		require.NoError(t, h.Verify(10*time.Second))
	})
}

// overBudget grants from one unit more than asked.
type overBudget struct{ lease.Store }

func (s overBudget) Grant(ctx context.Context, a lease.GrantArgs) (lease.Lease, error) {
	a.Budget++
	return s.Store.Grant(ctx, a)
}

// sameToken reports the same fencing token for every grant.
type sameToken struct{ lease.Store }

func (s sameToken) Grant(ctx context.Context, a lease.GrantArgs) (lease.Lease, error) {
	l, err := s.Store.Grant(ctx, a)
	l.Token = 1
	return l, err
}

// sweepsLive reports live leases as swept.
type sweepsLive struct{ lease.Store }

func (s sweepsLive) Sweep(ctx context.Context, limit int) ([]lease.Lease, error) {
	return s.Store.List(ctx)
}

func TestBrokenStoresAreCaught(t *testing.T) {
	for name, wrap := range map[string]func(lease.Store) lease.Store{
		"over budget": func(s lease.Store) lease.Store { return overBudget{s} },
		"same token":  func(s lease.Store) lease.Store { return sameToken{s} },
		"sweeps live": func(s lease.Store) lease.Store { return sweepsLive{s} },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := New(time.Now)
				h.Dir = t.TempDir()
				exercise(t, h.Store(0, wrap(lease.NewMemoryStore(nil))))
				err := h.Verify(10 * time.Second)
				require.Error(t, err)
				assert.NotErrorIs(t, err, ErrInconclusive)
			})
		})
	}
}

func TestModelRules(t *testing.T) {
	t0 := time.Date(2025, 12, 31, 10, 0, 0, 0, time.UTC)
	a := args("a", 3, 2)
	l := lease.Lease{ID: a.ID, Holder: "a", Cost: 2, Token: 1, CreatedAt: t0, HeartbeatAt: t0,
		ExpiresAt: t0.Add(a.TTL), Grace: a.Grace}
	s := state{leases: []lease.Lease{l}, maxToken: 1}
	late := t0.Add(6 * time.Second)

	// An expired lease is never heartbeated back to life.
	hb := l
	hb.HeartbeatAt = late
	assert.Empty(t, step(s, input{kind: opHeartbeat, id: l.ID, now: late}, output{lease: hb}))
	assert.Len(t, step(s, input{kind: opHeartbeat, id: l.ID, now: late}, output{outcome: expired}), 1)
	// Nor counted in usage.
	assert.Empty(t, step(s, input{kind: opUsage, now: late}, output{units: 2, count: 1}))
	assert.Len(t, step(s, input{kind: opUsage, now: late}, output{}), 1)
	// A sweep that leaves an expired record behind while under its limit.
	assert.Empty(t, step(s, input{kind: opSweep, limit: 5, now: late}, output{}))
	// The gate decides before the holder rule.
	o := args("a", 3, 1)
	o.Overloaded = true
	assert.Empty(t, step(s, input{kind: opGrant, args: o, now: t0}, output{outcome: rejected,
		rej: lease.RejectedError{Err: lease.ErrHolderHasLease, Available: 1, Existing: l.ID}}))
	assert.Len(t, step(s, input{kind: opGrant, args: o, now: t0}, output{outcome: rejected,
		rej: lease.RejectedError{Err: lease.ErrOverloaded, Available: 1}}), 1)
	// An ambiguous grant may or may not have taken the holder's slot.
	b := args("b", 3, 1)
	next := step(s, input{kind: opGrant, args: b}, output{outcome: ambiguous})
	require.Len(t, next, 2)
	rej := output{outcome: rejected, rej: lease.RejectedError{Err: lease.ErrHolderHasLease, Existing: "unseen"}}
	assert.Empty(t, step(next[0].(state), input{kind: opGrant, args: args("b", 3, 1)}, rej))
	assert.Len(t, step(next[1].(state), input{kind: opGrant, args: args("b", 3, 1)}, rej), 1)
}

func TestModelListUntimed(t *testing.T) {
	t0 := time.Date(2025, 12, 31, 10, 0, 0, 0, time.UTC)
	a := args("a", 3, 2)
	l := lease.Lease{ID: a.ID, Holder: "a", Cost: 2, Token: 1, CreatedAt: t0, HeartbeatAt: t0,
		ExpiresAt: t0.Add(a.TTL), Grace: a.Grace}
	s := state{leases: []lease.Lease{l}, maxToken: 1}
	list := func(st state, ls ...lease.Lease) []any {
		return step(st, input{kind: opList}, output{leases: ls})
	}
	assert.Len(t, list(s, l), 1)
	assert.Empty(t, list(s), "a live lease missing")
	// A heartbeat nobody saw answer may have moved HeartbeatAt forward, never back.
	later, earlier := l, l
	later.HeartbeatAt, earlier.HeartbeatAt = t0.Add(time.Second), t0.Add(-time.Second)
	assert.Len(t, list(s, later), 1)
	assert.Empty(t, list(s, earlier))
	// A phantom from an ambiguous grant must show up in this branch.
	withPhantom := step(s, input{kind: opGrant, args: args("b", 3, 1)}, output{outcome: ambiguous})
	require.Len(t, withPhantom, 2)
	p := lease.Lease{ID: "unseen", Holder: "b", Cost: 1, Token: 2}
	assert.Empty(t, list(withPhantom[1].(state), l), "phantom not listed")
	assert.Len(t, list(withPhantom[1].(state), l, p), 1)
	assert.Empty(t, list(withPhantom[1].(state), p, l), "not by token")
	assert.Empty(t, list(withPhantom[0].(state), l, p), "no phantom in this branch")
}

func TestTransportErrorsAreAmbiguous(t *testing.T) {
	h := New(nil)
	s := h.Store(0, failing{})
	_, err := s.Grant(ctx, args("a", 3, 1))
	require.Error(t, err)
	_, _ = s.Get(ctx, "x") // a failed read is not recorded
	require.Equal(t, 1, h.Len())
	require.NoError(t, h.Verify(time.Second))
}

type failing struct{ lease.Store }

func (failing) Grant(context.Context, lease.GrantArgs) (lease.Lease, error) {
	return lease.Lease{}, errors.New("connection reset")
}

func (failing) Get(context.Context, string) (lease.Lease, error) {
	return lease.Lease{}, errors.New("connection reset")
}

// A heartbeat time that a Get revealed after an ambiguous heartbeat is
// adopted: a later List may show it (or a later one), never the old one.
func TestModelGetAdoptsHeartbeatUntimed(t *testing.T) {
	t0 := time.Date(2025, 12, 31, 10, 0, 0, 0, time.UTC)
	a := args("a", 3, 2)
	l := lease.Lease{ID: a.ID, Holder: "a", Cost: 2, Token: 1, CreatedAt: t0, HeartbeatAt: t0,
		ExpiresAt: t0.Add(a.TTL), Grace: a.Grace}
	s := state{leases: []lease.Lease{l}, maxToken: 1}
	after := step(s, input{kind: opHeartbeat, id: l.ID}, output{outcome: ambiguous})
	require.Len(t, after, 2)
	moved := l
	moved.HeartbeatAt = t0.Add(time.Second)
	for _, st := range after {
		got := step(st.(state), input{kind: opGet, id: l.ID}, output{lease: moved})
		require.Len(t, got, 1)
		ns := got[0].(state)
		assert.Len(t, step(ns, input{kind: opList}, output{leases: []lease.Lease{moved}}), 1)
		assert.Empty(t, step(ns, input{kind: opList}, output{leases: []lease.Lease{l}}), "heartbeat time went back")
		assert.Empty(t, step(ns, input{kind: opGet, id: l.ID}, output{lease: l}), "heartbeat time went back")
	}
}
