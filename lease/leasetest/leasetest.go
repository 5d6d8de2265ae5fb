// Package leasetest is the conformance suite for lease.Store
// implementations. The in-memory store, lease/redislease and lease/sqllease
// all run it, and so can any third-party store:
//
//	func TestConformance(t *testing.T) {
//		leasetest.Run(t, leasetest.Harness{
//			New:  func(t *testing.T) lease.Store { return newStore(t) },
//			Unit: 250 * time.Millisecond,
//		})
//	}
//
// It imports only the standard library and package lease.
package leasetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/lease"
)

// Harness tells Run how to make stores and how time passes for them.
//
// A memory store runs the suite in fake time: set Wrap to run each subtest in
// a synctest bubble and leave Unit at its default; waits then cost nothing.
// A server store (whose own clock decides) runs in real time with a short
// Unit such as 250ms; the suite then takes about 25 Units of waiting in all.
type Harness struct {
	// New returns a fresh, empty store for one subtest; it registers any
	// cleanup with t.Cleanup. Required. It is called inside Wrap.
	New func(t *testing.T) lease.Store

	// Peer, if set, returns another store over the same data as s, as a
	// second instance would see it (its own connection or pool). The
	// concurrency subtests spread their goroutines over s and two peers.
	// Nil means the goroutines share s.
	Peer func(t *testing.T, s lease.Store) lease.Store

	// Wait lets d pass on the store's clock. Nil means time.Sleep, which is
	// right both in a synctest bubble and for a server's real clock.
	Wait func(t *testing.T, d time.Duration)

	// Unit is the time step the suite builds its TTLs, graces and waits
	// from. Waits keep half a Unit of margin around every deadline, so a
	// server store needs a Unit well above its round-trip time and clock
	// precision. Zero means 1s.
	Unit time.Duration

	// Wrap, if set, runs the body of every subtest, for example
	// synctest.Test for a store on fake time. Nil runs the body directly.
	Wrap func(t *testing.T, body func(t *testing.T))
}

// tolerance is how far two store times may differ from an exact sum because
// the store rounds to its precision (1 ms or finer).
const tolerance = 2 * time.Millisecond

// Run runs the whole conformance suite against the stores h makes.
func Run(t *testing.T, h Harness) {
	if h.New == nil {
		t.Fatal("leasetest: Harness.New is nil")
	}
	if h.Unit <= 0 {
		h.Unit = time.Second
	}
	if h.Wait == nil {
		h.Wait = func(_ *testing.T, d time.Duration) { time.Sleep(d) }
	}
	if h.Wrap == nil {
		h.Wrap = func(t *testing.T, body func(t *testing.T)) { body(t) }
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, e *env)
	}{
		{"GrantFields", testGrantFields},
		{"DecisionOrder", testDecisionOrder},
		{"OnePerHolderOff", testOnePerHolderOff},
		{"FallbackCosts", testFallbackCosts},
		{"RepeatedGrantIsIdempotent", testRepeatedGrant},
		{"BudgetPerCall", testBudgetPerCall},
		{"FencingTokens", testFencingTokens},
		{"BadInputStoresNothing", testBadInput},
		{"UnknownID", testUnknownID},
		{"ReleaseReturnsUnits", testRelease},
		{"CanceledContext", testCanceledContext},
		{"HeartbeatMovesOnlyHeartbeatDeadline", testHeartbeat},
		{"HeartbeatNeverPastExpiresAt", testHeartbeatCapped},
		{"ExpiredIsAbsentBeforeSweep", testExpiredAbsent},
		{"SweepExactlyOnce", testSweepExactlyOnce},
		{"ConcurrentGrantsNeverOversubscribe", testConcurrentGrants},
		{"ConcurrentSameHolder", testConcurrentSameHolder},
		{"ConcurrentMixed", testConcurrentMixed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h.Wrap(t, func(t *testing.T) {
				e := &env{h: h, s: h.New(t), u: h.Unit, ctx: context.Background()}
				tc.fn(t, e)
			})
		})
	}
}

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
		ID: lease.NewID(), Holder: holder, Resource: "res-" + holder,
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
func rejected(t *testing.T, err error, reason lease.Reason, available int, existing string) {
	t.Helper()
	var re *lease.RejectedError
	if !errors.As(err, &re) {
		t.Errorf("error = %v, want *lease.RejectedError %s", err, reason)
		return
	}
	if re.Reason != reason || re.Available != available || re.Existing != existing {
		t.Errorf("rejection = {%s, Available %d, Existing %q}, want {%s, Available %d, Existing %q}",
			re.Reason, re.Available, re.Existing, reason, available, existing)
	}
	for r, s := range map[lease.Reason]error{
		lease.ReasonOverloaded: lease.ErrOverloaded, lease.ReasonHolderHasLease: lease.ErrHolderHasLease,
		lease.ReasonOverCapacity: lease.ErrOverCapacity,
	} {
		if errors.Is(err, s) != (r == reason) {
			t.Errorf("errors.Is(%v, %v) = %v", err, s, !(r == reason))
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
	if _, err := e.s.Heartbeat(e.ctx, id); !errors.Is(err, want) {
		t.Errorf("Heartbeat(%s) error = %v, want %v", id, err, want)
	}
	if _, err := e.s.Release(e.ctx, id); !errors.Is(err, want) {
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

func testGrantFields(t *testing.T, e *env) {
	a := e.args("alice", 35, 2)
	a.Resource = "cam_2f_19"
	l := e.grant(t, a)
	if l.ID != a.ID || l.Holder != "alice" || l.Resource != "cam_2f_19" || l.Cost != 2 || l.Grace != a.Grace {
		t.Errorf("granted %+v, want ID %s, holder alice, resource cam_2f_19, cost 2, grace %v", l, a.ID, a.Grace)
	}
	if l.Token < 1 {
		t.Errorf("Token = %d, want ≥ 1", l.Token)
	}
	if l.CreatedAt.IsZero() || !l.HeartbeatAt.Equal(l.CreatedAt) {
		t.Errorf("CreatedAt %v, HeartbeatAt %v: want equal and non-zero", l.CreatedAt, l.HeartbeatAt)
	}
	if !near(l.ExpiresAt, l.CreatedAt.Add(a.TTL)) {
		t.Errorf("ExpiresAt − CreatedAt = %v, want TTL %v", l.ExpiresAt.Sub(l.CreatedAt), a.TTL)
	}
	got, err := e.s.Get(e.ctx, l.ID)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	sameLease(t, "Get", got, l)
	ls := e.list(t)
	if len(ls) != 1 {
		t.Fatalf("List = %v, want one lease", ids(ls))
	}
	sameLease(t, "List[0]", ls[0], l)
	e.usage(t, 2, 1)
}

// testRepeatedGrant: a Grant repeated with the same ID (a retry after a lost
// reply) returns the stored lease without a new decision; the same ID for
// another holder is invalid.
func testRepeatedGrant(t *testing.T, e *env) {
	a := e.args("alice", 2, 2)
	l := e.grant(t, a)
	// The budget is full and alice holds a lease: a new decision would
	// reject either way.
	for _, onePerHolder := range []bool{true, false} {
		a.OnePerHolder = onePerHolder
		again, err := e.s.Grant(e.ctx, a)
		if err != nil {
			t.Fatalf("repeated Grant (OnePerHolder %v): %v", onePerHolder, err)
		}
		sameLease(t, "repeated Grant", again, l)
	}
	e.usage(t, 2, 1)
	b := a
	b.Holder = "bob"
	if _, err := e.s.Grant(e.ctx, b); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("Grant of alice's ID to bob: error = %v, want ErrInvalid", err)
	}
	e.usage(t, 2, 1)
	if ls := e.list(t); len(ls) != 1 || ls[0].Holder != "alice" {
		t.Errorf("List = %v, want alice's lease alone", ls)
	}
	if _, err := e.s.Release(e.ctx, l.ID); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if n := e.grant(t, e.args("carol", 2, 2)); n.Token <= l.Token {
		t.Errorf("token after a repeated grant = %d, want > %d", n.Token, l.Token)
	}
}

func testDecisionOrder(t *testing.T, e *env) {
	const budget = 3
	a := e.grant(t, e.args("alice", budget, 3))

	// Every rule fails: the gate decides first.
	r := e.args("alice", budget, 1)
	r.Overloaded = true
	_, err := e.s.Grant(e.ctx, r)
	rejected(t, err, lease.ReasonOverloaded, 0, "")

	// Holder and budget fail: the holder rule decides.
	_, err = e.s.Grant(e.ctx, e.args("alice", budget, 1))
	rejected(t, err, lease.ReasonHolderHasLease, 0, a.ID)

	// Only the budget fails.
	_, err = e.s.Grant(e.ctx, e.args("bob", budget, 1))
	rejected(t, err, lease.ReasonOverCapacity, 0, "")

	// Overloaded with budget to spare still reports what is available.
	if _, err := e.s.Release(e.ctx, a.ID); err != nil {
		t.Fatalf("Release: %v", err)
	}
	r = e.args("bob", budget, 1)
	r.Overloaded = true
	_, err = e.s.Grant(e.ctx, r)
	rejected(t, err, lease.ReasonOverloaded, 3, "")
	b := e.grant(t, e.args("bob", budget, 1))
	_, err = e.s.Grant(e.ctx, e.args("bob", budget, 1))
	rejected(t, err, lease.ReasonHolderHasLease, 2, b.ID)
	_, err = e.s.Grant(e.ctx, e.args("carol", budget, 3))
	rejected(t, err, lease.ReasonOverCapacity, 2, "")
	e.usage(t, 1, 1)
}

func testOnePerHolderOff(t *testing.T, e *env) {
	a := e.args("alice", 4, 2)
	a.OnePerHolder = false
	e.grant(t, a)
	a.ID = lease.NewID()
	e.grant(t, a)
	a.ID = lease.NewID()
	_, err := e.s.Grant(e.ctx, a)
	rejected(t, err, lease.ReasonOverCapacity, 0, "")
	e.usage(t, 4, 2)
	// With the rule on again, the holder's live leases count.
	_, err = e.s.Grant(e.ctx, e.args("alice", 4, 1))
	var re *lease.RejectedError
	if !errors.As(err, &re) || re.Reason != lease.ReasonHolderHasLease || re.Existing == "" {
		t.Errorf("error = %v, want HolderHasLease naming one of alice's leases", err)
	}
}

func testFallbackCosts(t *testing.T, e *env) {
	const budget = 3
	x := e.grant(t, e.args("x", budget, 2, 1))
	if x.Cost != 2 {
		t.Errorf("first grant cost %d, want the preferred 2", x.Cost)
	}
	y := e.grant(t, e.args("y", budget, 2, 1))
	if y.Cost != 1 {
		t.Errorf("second grant cost %d, want the fallback 1", y.Cost)
	}
	_, err := e.s.Grant(e.ctx, e.args("z", budget, 2, 1))
	rejected(t, err, lease.ReasonOverCapacity, 0, "")
	if _, err := e.s.Release(e.ctx, y.ID); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// The first cost that fits wins, even a smaller one listed first.
	z := e.grant(t, e.args("z", budget, 1, 2))
	if z.Cost != 1 {
		t.Errorf("grant with costs [1 2] got %d, want 1", z.Cost)
	}
	e.usage(t, 3, 2)
}

// testBudgetPerCall: each decision uses the Budget of its own call, and
// Available is never negative even when a smaller budget is already
// exceeded.
func testBudgetPerCall(t *testing.T, e *env) {
	a := e.grant(t, e.args("a", 10, 4))
	_, err := e.s.Grant(e.ctx, e.args("b", 3, 1))
	rejected(t, err, lease.ReasonOverCapacity, 0, "")
	r := e.args("b", 3, 1)
	r.Overloaded = true
	_, err = e.s.Grant(e.ctx, r)
	rejected(t, err, lease.ReasonOverloaded, 0, "")
	_, err = e.s.Grant(e.ctx, e.args("a", 3, 1))
	rejected(t, err, lease.ReasonHolderHasLease, 0, a.ID)
	e.grant(t, e.args("b", 6, 2))
	e.usage(t, 6, 2)
}

func testFencingTokens(t *testing.T, e *env) {
	var last uint64
	check := func(l lease.Lease) {
		t.Helper()
		if l.Token <= last {
			t.Errorf("token %d after %d: want strictly increasing", l.Token, last)
		}
		last = l.Token
	}
	for i := range 5 {
		l := e.grant(t, e.args(fmt.Sprint("h", i), 10, 1))
		check(l)
		if i%2 == 0 {
			if _, err := e.s.Release(e.ctx, l.ID); err != nil {
				t.Fatalf("Release: %v", err)
			}
		}
	}
	// A rejected grant issues nothing that a later grant could reuse, and
	// an expired, swept lease's token is never reused either.
	_, _ = e.s.Grant(e.ctx, e.args("h1", 10, 1))
	a := e.args("short", 10, 1)
	a.Grace = e.u
	check(e.grant(t, a))
	e.wait(t, 1.5)
	if _, err := e.s.Sweep(e.ctx, 100); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	check(e.grant(t, e.args("short", 10, 1)))
}

func testBadInput(t *testing.T, e *env) {
	good := e.args("alice", 5, 1)
	cases := map[string]func(a *lease.GrantArgs){
		"empty holder":      func(a *lease.GrantArgs) { a.Holder = "" },
		"empty id":          func(a *lease.GrantArgs) { a.ID = "" },
		"no costs":          func(a *lease.GrantArgs) { a.Costs = nil },
		"zero cost":         func(a *lease.GrantArgs) { a.Costs = []int{0} },
		"negative cost":     func(a *lease.GrantArgs) { a.Costs = []int{2, -1} },
		"cost above budget": func(a *lease.GrantArgs) { a.Costs = []int{6, 1} },
		"zero ttl":          func(a *lease.GrantArgs) { a.TTL = 0 },
		"negative ttl":      func(a *lease.GrantArgs) { a.TTL = -time.Second },
		"zero grace":        func(a *lease.GrantArgs) { a.Grace = 0 },
		"zero budget":       func(a *lease.GrantArgs) { a.Budget = 0; a.Costs = []int{1} },
	}
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a := good
		a.ID = lease.NewID()
		a.Costs = []int{1}
		cases[n](&a)
		l, err := e.s.Grant(e.ctx, a)
		if !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("%s: Grant = %+v, %v; want ErrInvalid", n, l, err)
		}
		var re *lease.RejectedError
		if errors.As(err, &re) {
			t.Errorf("%s: bad input reported as a rejection: %v", n, err)
		}
		if a.ID != "" {
			if _, err := e.s.Get(e.ctx, a.ID); !errors.Is(err, lease.ErrNotFound) {
				t.Errorf("%s: Get after bad grant = %v, want ErrNotFound", n, err)
			}
		}
	}
	if ls := e.list(t); len(ls) != 0 {
		t.Errorf("List after bad grants = %v, want empty", ids(ls))
	}
	e.usage(t, 0, 0)
	// The holder is still free and the whole budget still there.
	e.grant(t, e.args("alice", 5, 5))
}

func testUnknownID(t *testing.T, e *env) {
	e.gone(t, lease.NewID(), lease.ErrNotFound)
	e.gone(t, "", lease.ErrNotFound)
}

func testRelease(t *testing.T, e *env) {
	a := e.grant(t, e.args("alice", 2, 2))
	r, err := e.s.Release(e.ctx, a.ID)
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	sameLease(t, "Release", r, a)
	e.gone(t, a.ID, lease.ErrNotFound)
	e.usage(t, 0, 0)
	// Units and the holder are free again at once.
	ba := e.args("alice", 2, 2)
	ba.Grace = e.u
	b := e.grant(t, ba)
	if b.Token <= a.Token {
		t.Errorf("token after release %d ≤ %d", b.Token, a.Token)
	}
	// A released lease is never reported by a sweep.
	e.wait(t, 1.5)
	swept, err := e.s.Sweep(e.ctx, 10)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if len(swept) != 1 || swept[0].ID != b.ID {
		t.Errorf("Sweep = %v, want only %s", ids(swept), b.ID)
	}
}

func testCanceledContext(t *testing.T, e *env) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a := e.args("alice", 2, 1)
	if _, err := e.s.Grant(ctx, a); !errors.Is(err, context.Canceled) {
		t.Errorf("Grant with cancelled context = %v, want context.Canceled", err)
	}
	e.usage(t, 0, 0)
	if _, err := e.s.Get(e.ctx, a.ID); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("Get after cancelled grant = %v, want ErrNotFound", err)
	}
	l := e.grant(t, e.args("alice", 2, 1))
	if _, err := e.s.Heartbeat(ctx, l.ID); !errors.Is(err, context.Canceled) {
		t.Errorf("Heartbeat with cancelled context = %v, want context.Canceled", err)
	}
	if _, err := e.s.Release(ctx, l.ID); !errors.Is(err, context.Canceled) {
		t.Errorf("Release with cancelled context = %v, want context.Canceled", err)
	}
	e.usage(t, 1, 1)
}

// testHeartbeat keeps 1.5 units or more of margin wherever a delay could
// make a live lease look expired (a loaded server can stretch the two round
// trips between the heartbeat's stamp and the Get's clock read well past
// half a unit); the expired check errs the safe way.
func testHeartbeat(t *testing.T, e *env) {
	a := e.args("alice", 5, 2)
	a.Grace = 4 * e.u
	l := e.grant(t, a)
	e.wait(t, 2)
	h, err := e.s.Heartbeat(e.ctx, l.ID)
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if d := h.HeartbeatAt.Sub(l.HeartbeatAt); d < 2*e.u-tolerance {
		t.Errorf("HeartbeatAt moved by %v, want ≥ %v", d, 2*e.u)
	}
	want := l
	want.HeartbeatAt = h.HeartbeatAt
	sameLease(t, "Heartbeat", h, want) // only HeartbeatAt changed
	// 2.5 units after the heartbeat, 4.5 or more after the grant: past the
	// first heartbeat deadline (4), so only the heartbeat keeps it live.
	e.wait(t, 2.5)
	g, err := e.s.Get(e.ctx, l.ID)
	if err != nil {
		t.Fatalf("Get 2.5 units after heartbeat (grace 4): %v", err)
	}
	sameLease(t, "Get", g, h)
	e.usage(t, 2, 1)
	e.wait(t, 2) // 4.5 units after the heartbeat: expired by grace
	e.gone(t, l.ID, lease.ErrExpired)
	e.gone(t, l.ID, lease.ErrExpired) // still expired: nothing resurrected it
	e.usage(t, 0, 0)
}

func testHeartbeatCapped(t *testing.T, e *env) {
	a := e.args("alice", 5, 1)
	a.TTL, a.Grace = 3*e.u, 3*e.u
	l := e.grant(t, a)
	e.wait(t, 1)
	h, err := e.s.Heartbeat(e.ctx, l.ID)
	if err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	if !h.ExpiresAt.Equal(l.ExpiresAt) || !h.Deadline().Equal(l.ExpiresAt) {
		t.Errorf("after heartbeat ExpiresAt %v, Deadline %v; want both %v", h.ExpiresAt, h.Deadline(), l.ExpiresAt)
	}
	e.wait(t, 2.5) // 3.5 units: past ExpiresAt, heartbeat deadline (4) not reached
	e.usage(t, 0, 0)
	e.gone(t, l.ID, lease.ErrExpired)
}

func testExpiredAbsent(t *testing.T, e *env) {
	const budget = 2
	a := e.args("alice", budget, 2)
	a.Grace = e.u
	old := e.grant(t, a)
	e.wait(t, 1.5)
	// No sweep has run: the expired lease is absent for reads ...
	e.usage(t, 0, 0)
	if ls := e.list(t); len(ls) != 0 {
		t.Errorf("List = %v, want empty", ids(ls))
	}
	e.gone(t, old.ID, lease.ErrExpired)
	// ... for the holder rule and for the budget.
	fresh := e.grant(t, e.args("alice", budget, 2))
	if ls := e.list(t); len(ls) != 1 || ls[0].ID != fresh.ID {
		t.Errorf("List = %v, want [%s]", ids(ls), fresh.ID)
	}
	swept, err := e.s.Sweep(e.ctx, 10)
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if len(swept) != 1 || swept[0].ID != old.ID {
		t.Fatalf("Sweep = %v, want [%s]", ids(swept), old.ID)
	}
	sameLease(t, "swept lease", swept[0], old)
	e.gone(t, old.ID, lease.ErrNotFound)
	if _, err := e.s.Get(e.ctx, fresh.ID); err != nil {
		t.Errorf("Get(fresh) after sweep: %v", err)
	}
}

func testSweepExactlyOnce(t *testing.T, e *env) {
	const expiring, live, budget = 20, 3, 100
	want := map[string]bool{}
	start := time.Now()
	for i := range expiring {
		a := e.args(fmt.Sprint("gone", i), budget, 1)
		a.Grace = 2 * e.u
		want[e.grant(t, a).ID] = true
	}
	for i := range live {
		e.grant(t, e.args(fmt.Sprint("live", i), budget, 2))
	}
	// Nothing has expired yet, unless the grants themselves took so long
	// on a slow server that the check would race the first deadline.
	if time.Since(start) < e.u {
		if swept, err := e.s.Sweep(e.ctx, 100); err != nil || len(swept) != 0 {
			t.Errorf("Sweep before expiry = %v, %v; want nothing", ids(swept), err)
		}
	}
	e.wait(t, 2.5)
	stores := e.stores(t)
	const sweepers, limit = 4, 3
	var (
		mu   sync.Mutex
		got  = map[string]int{}
		wg   sync.WaitGroup
		errs = make(chan error, sweepers)
	)
	for i := range sweepers {
		s := stores[i%len(stores)]
		wg.Go(func() {
			for {
				ls, err := s.Sweep(e.ctx, limit)
				if err != nil {
					errs <- err
					return
				}
				if len(ls) > limit {
					errs <- fmt.Errorf("Sweep(limit %d) returned %d", limit, len(ls))
				}
				mu.Lock()
				for _, l := range ls {
					got[l.ID]++
				}
				mu.Unlock()
				if len(ls) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Sweep: %v", err)
	}
	for id, n := range got {
		if !want[id] {
			t.Errorf("Sweep returned %s, which was not expired", id)
		} else if n != 1 {
			t.Errorf("Sweep returned %s %d times, want exactly once", id, n)
		}
	}
	for id := range want {
		if got[id] == 0 {
			t.Errorf("expired lease %s never returned by Sweep", id)
		}
	}
	e.usage(t, 2*live, live)
	if swept, err := e.s.Sweep(e.ctx, 100); err != nil || len(swept) != 0 {
		t.Errorf("Sweep after sweep = %v, %v; want nothing", ids(swept), err)
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

func testConcurrentGrants(t *testing.T, e *env) {
	const budget, workers = 10, 30
	stores := e.stores(t)
	var (
		mu     sync.Mutex
		sum    int
		tokens = map[uint64]bool{}
		wg     sync.WaitGroup
	)
	for i := range workers {
		s := stores[i%len(stores)]
		wg.Go(func() {
			l, err := s.Grant(e.ctx, e.args(fmt.Sprint("h", i), budget, 2, 1))
			var re *lease.RejectedError
			switch {
			case err == nil:
				mu.Lock()
				sum += l.Cost
				if tokens[l.Token] {
					t.Errorf("token %d issued twice", l.Token)
				}
				tokens[l.Token] = true
				mu.Unlock()
			case errors.As(err, &re) && re.Reason == lease.ReasonOverCapacity:
				// Cost 1 did not fit: nothing was left at that moment.
				if re.Available != 0 {
					t.Errorf("OverCapacity with %d available for cost 1", re.Available)
				}
			default:
				t.Errorf("Grant: %v", err)
			}
		})
	}
	wg.Wait()
	// Without releases the budget only fills, and cost 1 was always an
	// option, so the grants fill it exactly.
	if sum != budget {
		t.Errorf("granted %d units with budget %d", sum, budget)
	}
	e.usage(t, sum, len(tokens))
}

func testConcurrentSameHolder(t *testing.T, e *env) {
	const workers = 12
	stores := e.stores(t)
	var (
		mu       sync.Mutex
		winners  []string
		existing []string
		wg       sync.WaitGroup
	)
	for i := range workers {
		s := stores[i%len(stores)]
		wg.Go(func() {
			l, err := s.Grant(e.ctx, e.args("alice", 100, 1))
			var re *lease.RejectedError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, l.ID)
			case errors.As(err, &re) && re.Reason == lease.ReasonHolderHasLease:
				existing = append(existing, re.Existing)
			default:
				t.Errorf("Grant: %v", err)
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d grants for one holder, want exactly 1", len(winners))
	}
	for _, id := range existing {
		if id != winners[0] {
			t.Errorf("HolderHasLease names %q, want %q", id, winners[0])
		}
	}
	e.usage(t, 1, 1)
}

// testConcurrentMixed runs random-ish grant/heartbeat/release/sweep traffic
// over few holders and a small budget, checking after every Usage and List
// that the budget holds and no holder has two live leases.
func testConcurrentMixed(t *testing.T, e *env) {
	const budget, workers, ops, holders = 5, 6, 40, 4
	stores := e.stores(t)
	var wg sync.WaitGroup
	for w := range workers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			var mine []string
			for i := range ops {
				switch (i*7 + w) % 5 {
				case 0, 1:
					a := e.args(fmt.Sprint("h", (i+w)%holders), budget, 2, 1)
					l, err := s.Grant(e.ctx, a)
					var re *lease.RejectedError
					if err == nil {
						mine = append(mine, l.ID)
					} else if !errors.As(err, &re) {
						t.Errorf("Grant: %v", err)
					} else if re.Available < 0 || re.Available > budget {
						t.Errorf("Available %d outside 0..%d", re.Available, budget)
					}
				case 2:
					if len(mine) > 0 {
						if _, err := s.Heartbeat(e.ctx, mine[0]); err != nil {
							t.Errorf("Heartbeat of a live lease: %v", err)
						}
					}
				case 3:
					if len(mine) > 0 {
						if _, err := s.Release(e.ctx, mine[0]); err != nil {
							t.Errorf("Release of own live lease: %v", err)
						}
						mine = mine[1:]
					}
				case 4:
					if _, err := s.Sweep(e.ctx, 5); err != nil {
						t.Errorf("Sweep: %v", err)
					}
					u, _, err := s.Usage(e.ctx)
					if err != nil {
						t.Errorf("Usage: %v", err)
					} else if u > budget {
						t.Errorf("Usage %d units > budget %d", u, budget)
					}
					ls, err := s.List(e.ctx)
					if err != nil {
						t.Errorf("List: %v", err)
					}
					checkSnapshot(t, ls, budget)
				}
			}
			for _, id := range mine {
				if _, err := s.Release(e.ctx, id); err != nil {
					t.Errorf("final Release: %v", err)
				}
			}
		})
	}
	wg.Wait()
	e.usage(t, 0, 0)
}

// checkSnapshot checks one List result: within budget, one lease per holder,
// tokens ascending.
func checkSnapshot(t *testing.T, ls []lease.Lease, budget int) {
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
