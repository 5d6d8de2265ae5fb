package leasetest

import (
	"errors"
	"testing"

	"github.com/ttlkit/ttlkit/lease"
)

// testSharedByPeers: two instances over one store's data see the same
// leases, budget, holder rule and fencing tokens, and each can release or
// sweep what the other granted.
func testSharedByPeers(t *testing.T, e *env) {
	const budget = 3
	p := e.h.Peer(t, e.s)
	a := e.grant(t, e.args("alice", budget, 2))
	got, err := p.Get(e.ctx, a.ID)
	if err != nil {
		t.Fatalf("peer Get of a lease granted by the first instance: %v", err)
	}
	sameLease(t, "peer Get", got, a)

	// The peer decides on the same holder rule and budget.
	_, err = p.Grant(e.ctx, e.args("alice", budget, 1))
	rejected(t, err, lease.ErrHolderHasLease, 1, a.ID)
	_, err = p.Grant(e.ctx, e.args("bob", budget, 2))
	rejected(t, err, lease.ErrOverCapacity, 1, "")
	b, err := p.Grant(e.ctx, e.args("bob", budget, 2, 1))
	if err != nil {
		t.Fatalf("peer Grant with the fallback that fits: %v", err)
	}
	if b.Cost != 1 || b.Token <= a.Token {
		t.Errorf("peer granted cost %d, token %d; want cost 1 and a token > %d", b.Cost, b.Token, a.Token)
	}
	for _, s := range []lease.Store{e.s, p} {
		u, n, err := s.Usage(e.ctx)
		if err != nil || u != 3 || n != 2 {
			t.Errorf("Usage = %d units, %d leases, %v; want 3, 2 on both instances", u, n, err)
		}
	}

	// A heartbeat through one instance is seen by the other.
	h, err := p.Heartbeat(e.ctx, a.ID, "")
	if err != nil {
		t.Fatalf("peer Heartbeat: %v", err)
	}
	got, err = e.s.Get(e.ctx, a.ID)
	if err != nil {
		t.Fatalf("Get after the peer's heartbeat: %v", err)
	}
	sameLease(t, "Get after the peer's heartbeat", got, h)

	// Either instance releases the other's lease, once.
	if _, err := p.Release(e.ctx, a.ID, ""); err != nil {
		t.Fatalf("peer Release of the first instance's lease: %v", err)
	}
	if _, err := e.s.Release(e.ctx, a.ID, ""); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("second Release through the other instance = %v, want ErrNotFound", err)
	}
	if ls := e.list(t); len(ls) != 1 || ls[0].ID != b.ID {
		t.Errorf("List = %v, want only the peer's lease %s", ids(ls), b.ID)
	}

	// A lease granted by one instance that expires is swept by the other.
	short := e.args("carol", budget, 1)
	short.Grace = e.u
	c := e.grant(t, short)
	e.wait(t, 1.5)
	swept, err := p.Sweep(e.ctx, 10)
	if err != nil {
		t.Fatalf("peer Sweep: %v", err)
	}
	if len(swept) != 1 || swept[0].ID != c.ID {
		t.Errorf("peer Sweep = %v, want [%s]", ids(swept), c.ID)
	}
	if swept, err := e.s.Sweep(e.ctx, 10); err != nil || len(swept) != 0 {
		t.Errorf("Sweep after the peer's sweep = %v, %v; want nothing", ids(swept), err)
	}
}
