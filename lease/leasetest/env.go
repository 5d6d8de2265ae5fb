package leasetest

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/lease"
)

// tolerance is how far two store times may differ from an exact sum because
// the store rounds to its precision (1 ms or finer).
const tolerance = 2 * time.Millisecond

// env is one subtest's store and helpers.
type env struct {
	h   Harness
	s   lease.Store
	u   time.Duration
	ctx context.Context
}

func (e *env) wait(t *testing.T, units float64) {
	t.Helper()
	e.h.Wait(t, time.Duration(units*float64(e.u)))
}

// args returns valid GrantArgs with a fresh id: TTL 10 units, grace 10 units.
func (e *env) args(holder string, budget int, costs ...int) lease.GrantArgs {
	return lease.GrantArgs{
		ID: newID(), Holder: holder, Resource: "res-" + holder,
		Costs: costs, TTL: 10 * e.u, Grace: 10 * e.u,
		Budget: budget, OnePerHolder: true,
	}
}

func (e *env) grant(t *testing.T, a lease.GrantArgs) lease.Lease {
	t.Helper()
	l, err := e.s.Grant(e.ctx, a)
	if err != nil {
		t.Fatalf("Grant(holder %q, costs %v, budget %d): %v", a.Holder, a.Costs, a.Budget, err)
	}
	return l
}

// rejected checks that err is a *RejectedError with the given fields and
// that errors.Is matches exactly the right sentinel.
func rejected(t *testing.T, err error, cond error, available int, existing string) {
	t.Helper()
	var re *lease.RejectedError
	if !errors.As(err, &re) {
		t.Errorf("error = %v, want *lease.RejectedError %v", err, cond)
		return
	}
	if re.Err != cond || re.Available != available || re.Existing != existing {
		t.Errorf("rejection = {%v, Available %d, Existing %q}, want {%v, Available %d, Existing %q}",
			re.Err, re.Available, re.Existing, cond, available, existing)
	}
	for _, s := range []error{lease.ErrOverloaded, lease.ErrHolderHasLease, lease.ErrOverCapacity, lease.ErrRecovering} {
		if errors.Is(err, s) != (s == cond) {
			t.Errorf("errors.Is(%v, %v) = %v", err, s, !(s == cond))
		}
	}
}

func (e *env) usage(t *testing.T, wantUnits, wantLeases int) {
	t.Helper()
	u, n, err := e.s.Usage(e.ctx)
	if err != nil {
		t.Fatalf("Usage: %v", err)
	}
	if u != wantUnits || n != wantLeases {
		t.Errorf("Usage = %d units, %d leases; want %d, %d", u, n, wantUnits, wantLeases)
	}
}

func (e *env) list(t *testing.T) []lease.Lease {
	t.Helper()
	ls, err := e.s.List(e.ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return ls
}

func ids(ls []lease.Lease) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.ID
	}
	return out
}

// gone checks that get, heartbeat and release of id all fail with want.
func (e *env) gone(t *testing.T, id string, want error) {
	t.Helper()
	if _, err := e.s.Get(e.ctx, id); !errors.Is(err, want) {
		t.Errorf("Get(%s) error = %v, want %v", id, err, want)
	}
	if _, err := e.s.Heartbeat(e.ctx, id, ""); !errors.Is(err, want) {
		t.Errorf("Heartbeat(%s) error = %v, want %v", id, err, want)
	}
	if _, err := e.s.Release(e.ctx, id, ""); !errors.Is(err, want) {
		t.Errorf("Release(%s) error = %v, want %v", id, err, want)
	}
}

func near(a, b time.Time) bool {
	d := a.Sub(b)
	return d <= tolerance && d >= -tolerance
}

func sameLease(t *testing.T, what string, got, want lease.Lease) {
	t.Helper()
	if got.ID != want.ID || got.Holder != want.Holder || got.Resource != want.Resource ||
		got.Cost != want.Cost || got.Token != want.Token || got.Grace != want.Grace ||
		!got.CreatedAt.Equal(want.CreatedAt) || !got.ExpiresAt.Equal(want.ExpiresAt) ||
		!got.HeartbeatAt.Equal(want.HeartbeatAt) {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

// stores returns the subtest's store and up to two peers.
func (e *env) stores(t *testing.T) []lease.Store {
	out := []lease.Store{e.s}
	if e.h.Peer != nil {
		out = append(out, e.h.Peer(t, e.s), e.h.Peer(t, e.s))
	}
	return out
}

// CheckList reports on t what a List result ls breaks of the Store
// contract: more units than budget, two live leases for one holder, or
// leases not in ascending token order. The suite calls it on every List it
// makes under concurrency; a store's own tests may call it too.
func CheckList(t testing.TB, ls []lease.Lease, budget int) {
	t.Helper()
	sum, seen := 0, map[string]bool{}
	for i, l := range ls {
		sum += l.Cost
		if seen[l.Holder] {
			t.Errorf("List shows two live leases for holder %s", l.Holder)
		}
		seen[l.Holder] = true
		if i > 0 && l.Token <= ls[i-1].Token {
			t.Errorf("List not ordered by Token: %d after %d", l.Token, ls[i-1].Token)
		}
	}
	if sum > budget {
		t.Errorf("List holds %d units, budget %d", sum, budget)
	}
}

// newID returns a fresh lease id as a Manager makes them: 32 random
// lower-case hex digits.
func newID() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}
