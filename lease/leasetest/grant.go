package leasetest

import (
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/lease"
)

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
	if _, err := e.s.Release(e.ctx, l.ID, ""); err != nil {
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
	rejected(t, err, lease.ErrOverloaded, 0, "")

	// Holder and budget fail: the holder rule decides.
	_, err = e.s.Grant(e.ctx, e.args("alice", budget, 1))
	rejected(t, err, lease.ErrHolderHasLease, 0, a.ID)

	// Only the budget fails.
	_, err = e.s.Grant(e.ctx, e.args("bob", budget, 1))
	rejected(t, err, lease.ErrOverCapacity, 0, "")

	// Overloaded with budget to spare still reports what is available.
	if _, err := e.s.Release(e.ctx, a.ID, ""); err != nil {
		t.Fatalf("Release: %v", err)
	}
	r = e.args("bob", budget, 1)
	r.Overloaded = true
	_, err = e.s.Grant(e.ctx, r)
	rejected(t, err, lease.ErrOverloaded, 3, "")
	b := e.grant(t, e.args("bob", budget, 1))
	_, err = e.s.Grant(e.ctx, e.args("bob", budget, 1))
	rejected(t, err, lease.ErrHolderHasLease, 2, b.ID)
	_, err = e.s.Grant(e.ctx, e.args("carol", budget, 3))
	rejected(t, err, lease.ErrOverCapacity, 2, "")
	e.usage(t, 1, 1)
}

func testOnePerHolderOff(t *testing.T, e *env) {
	a := e.args("alice", 4, 2)
	a.OnePerHolder = false
	e.grant(t, a)
	a.ID = newID()
	e.grant(t, a)
	a.ID = newID()
	_, err := e.s.Grant(e.ctx, a)
	rejected(t, err, lease.ErrOverCapacity, 0, "")
	e.usage(t, 4, 2)
	// With the rule on again, the holder's live leases count.
	_, err = e.s.Grant(e.ctx, e.args("alice", 4, 1))
	var re *lease.RejectedError
	if !errors.As(err, &re) || re.Err != lease.ErrHolderHasLease || re.Existing == "" {
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
	rejected(t, err, lease.ErrOverCapacity, 0, "")
	if _, err := e.s.Release(e.ctx, y.ID, ""); err != nil {
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
	rejected(t, err, lease.ErrOverCapacity, 0, "")
	r := e.args("b", 3, 1)
	r.Overloaded = true
	_, err = e.s.Grant(e.ctx, r)
	rejected(t, err, lease.ErrOverloaded, 0, "")
	_, err = e.s.Grant(e.ctx, e.args("a", 3, 1))
	rejected(t, err, lease.ErrHolderHasLease, 0, a.ID)
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
			if _, err := e.s.Release(e.ctx, l.ID, ""); err != nil {
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
		a.ID = newID()
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
