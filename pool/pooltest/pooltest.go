// Package pooltest is the conformance suite every shared.Inventory must pass:
// the in-memory one, pool/redispool, and third-party backends.
//
// It imports only the standard library and package pool/shared, so any
// module can run it:
//
//	func TestInventory(t *testing.T) {
//		pooltest.Run(t, pooltest.Harness{
//			Open: func(t *testing.T, n int) []shared.Inventory { ... },
//		})
//	}
package pooltest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/pool/shared"
)

// Harness tells Run how to open the Inventory under test.
type Harness struct {
	// Open returns n views of one fresh, empty store, as n pool instances
	// (n processes, each with its own connection) would see it. The store
	// must be isolated from every other Open call, so subtests can run in
	// parallel, and cleaned up with t.Cleanup. An in-process inventory
	// returns the same value n times.
	Open func(t *testing.T, n int) []shared.Inventory
}

// Run runs the conformance suite against h as subtests of t. The expiry
// subtest uses real time (stores decide ttls by their own clock) and takes
// about two seconds.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("pooltest: Harness.Open is nil")
	}
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"AddPop", testAddPop},
		{"AddExisting", testAddExisting},
		{"AddInUse", testAddInUse},
		{"PopAtomicAcrossInstances", testPopAtomic},
		{"Claim", testClaim},
		{"Put", testPut},
		{"PutMaxIdleAtomic", testPutMaxIdleAtomic},
		{"Remove", testRemove},
		{"RecordsAndCounts", testRecordsAndCounts},
		{"Reserve", testReserve},
		{"ReserveAtomic", testReserveAtomic},
		{"Expiry", testExpiry},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

func open(t *testing.T, h Harness, n int) []shared.Inventory {
	t.Helper()
	invs := h.Open(t, n)
	if len(invs) != n {
		t.Fatalf("Harness.Open(%d) returned %d inventories", n, len(invs))
	}
	return invs
}

// base is a whole second, so that millisecond stores keep it exactly.
var base = time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)

func rec(id, owner string) shared.Record {
	return shared.Record{
		ID:       id,
		Owner:    owner,
		Data:     []byte(`{"id":"` + id + `"}`),
		Created:  base,
		Deadline: base.Add(8 * time.Hour),
	}
}

func sameTime(a, b time.Time) bool {
	d := a.Sub(b)
	return (a.IsZero() && b.IsZero()) || (!a.IsZero() && !b.IsZero() && d < time.Millisecond && d > -time.Millisecond)
}

func checkRecord(t *testing.T, what string, got, want shared.Record) {
	t.Helper()
	if got.ID != want.ID || got.Owner != want.Owner || string(got.Data) != string(want.Data) ||
		!sameTime(got.Created, want.Created) || !sameTime(got.Deadline, want.Deadline) || !sameTime(got.LastUsed, want.LastUsed) {
		t.Errorf("%s: record = %+v, want %+v", what, got, want)
	}
}

func mustAdd(t *testing.T, inv shared.Inventory, r shared.Record, ttl time.Duration) {
	t.Helper()
	if err := inv.Add(context.Background(), r, ttl); err != nil {
		t.Fatalf("Add(%q): %v", r.ID, err)
	}
}

func counts(t *testing.T, inv shared.Inventory) shared.Counts {
	t.Helper()
	c, err := inv.Counts(context.Background())
	if err != nil {
		t.Fatalf("Counts: %v", err)
	}
	return c
}

func wantCounts(t *testing.T, inv shared.Inventory, want shared.Counts) {
	t.Helper()
	if got := counts(t, inv); got != want {
		t.Errorf("Counts = %+v, want %+v", got, want)
	}
}

func testAddPop(t *testing.T, h Harness) {
	ctx := context.Background()
	inv := open(t, h, 1)[0]
	if _, ok, err := inv.Pop(ctx, "a", time.Minute); err != nil || ok {
		t.Fatalf("Pop on empty = ok %v, err %v; want false, nil", ok, err)
	}
	for _, id := range []string{"i1", "i2", "i3"} {
		mustAdd(t, inv, rec(id, ""), 0)
	}
	wantCounts(t, inv, shared.Counts{Idle: 3})
	seen := map[string]bool{}
	for i := range 3 {
		got, ok, err := inv.Pop(ctx, "owner-a", time.Minute)
		if err != nil || !ok {
			t.Fatalf("Pop %d = ok %v, err %v", i, ok, err)
		}
		if seen[got.ID] {
			t.Fatalf("Pop returned %q twice", got.ID)
		}
		seen[got.ID] = true
		want := rec(got.ID, "owner-a")
		checkRecord(t, "Pop", got, want)
	}
	if _, ok, err := inv.Pop(ctx, "a", time.Minute); err != nil || ok {
		t.Errorf("Pop after draining = ok %v, err %v; want false, nil", ok, err)
	}
	wantCounts(t, inv, shared.Counts{InUse: 3})
}

func testAddExisting(t *testing.T, h Harness) {
	ctx := context.Background()
	inv := open(t, h, 1)[0]
	mustAdd(t, inv, rec("x", ""), 0)
	dup := rec("x", "someone")
	dup.Data = []byte("other")
	if err := inv.Add(ctx, dup, 0); !errors.Is(err, shared.ErrExists) {
		t.Errorf("Add of an existing ID = %v, want ErrExists", err)
	}
	got, ok, err := inv.Pop(ctx, "b", 0)
	if err != nil || !ok {
		t.Fatalf("Pop = ok %v, err %v", ok, err)
	}
	checkRecord(t, "Pop after rejected Add", got, rec("x", "b"))
}

func testAddInUse(t *testing.T, h Harness) {
	ctx := context.Background()
	inv := open(t, h, 1)[0]
	mustAdd(t, inv, rec("busy", "inst-1"), time.Minute)
	wantCounts(t, inv, shared.Counts{InUse: 1})
	if _, ok, err := inv.Pop(ctx, "inst-2", time.Minute); err != nil || ok {
		t.Errorf("Pop took an in-use item: ok %v, err %v", ok, err)
	}
	if ok, err := inv.Claim(ctx, "busy", "inst-2", time.Minute); err != nil || ok {
		t.Errorf("Claim took an in-use item: ok %v, err %v", ok, err)
	}
}

// testPopAtomic pops from several instances at once: every item must be
// handed out exactly once.
func testPopAtomic(t *testing.T, h Harness) {
	ctx := context.Background()
	const instances, workers, items = 3, 4, 60
	invs := open(t, h, instances)
	for i := range items {
		mustAdd(t, invs[0], rec(fmt.Sprintf("item-%03d", i), ""), 0)
	}
	var mu sync.Mutex
	got := map[string]string{}
	var errs []error
	var wg sync.WaitGroup
	for i := range instances * workers {
		owner := fmt.Sprintf("inst-%d", i%instances)
		inv := invs[i%instances]
		wg.Go(func() {
			for {
				r, ok, err := inv.Pop(ctx, owner, time.Minute)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				if err != nil || !ok {
					mu.Unlock()
					return
				}
				if prev, dup := got[r.ID]; dup {
					errs = append(errs, fmt.Errorf("item %q popped by %s and %s", r.ID, prev, owner))
				}
				got[r.ID] = owner
				if r.Owner != owner {
					errs = append(errs, fmt.Errorf("item %q popped by %s has Owner %q", r.ID, owner, r.Owner))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if len(got) != items {
		t.Errorf("popped %d distinct items, want %d", len(got), items)
	}
	wantCounts(t, invs[1], shared.Counts{InUse: items})
}

func testClaim(t *testing.T, h Harness) {
	ctx := context.Background()
	invs := open(t, h, 2)
	mustAdd(t, invs[0], rec("c1", ""), 0)
	mustAdd(t, invs[0], rec("c2", ""), 0)
	if ok, err := invs[1].Claim(ctx, "missing", "b", time.Minute); err != nil || ok {
		t.Errorf("Claim(missing) = %v, %v; want false, nil", ok, err)
	}
	if ok, err := invs[1].Claim(ctx, "c1", "b", time.Minute); err != nil || !ok {
		t.Fatalf("Claim(c1) = %v, %v; want true, nil", ok, err)
	}
	if ok, err := invs[0].Claim(ctx, "c1", "a", time.Minute); err != nil || ok {
		t.Errorf("second Claim(c1) = %v, %v; want false, nil", ok, err)
	}
	r, ok, err := invs[0].Pop(ctx, "a", time.Minute)
	if err != nil || !ok || r.ID != "c2" {
		t.Errorf("Pop after Claim(c1) = %q, %v, %v; want c2", r.ID, ok, err)
	}
	if _, ok, _ := invs[0].Pop(ctx, "a", time.Minute); ok {
		t.Errorf("Pop returned a claimed item")
	}
	recs, err := invs[0].Records(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.ID == "c1" && r.Owner != "b" {
			t.Errorf("claimed record has Owner %q, want b", r.Owner)
		}
	}
}

func testPut(t *testing.T, h Harness) {
	ctx := context.Background()
	invs := open(t, h, 2)
	mustAdd(t, invs[0], rec("p1", "a"), time.Minute)
	used := base.Add(90 * time.Minute)
	back := rec("p1", "a")
	back.Data = []byte(`{"id":"p1","uses":1}`)
	back.LastUsed = used
	if _, err := invs[1].Put(ctx, func() shared.Record { r := back; r.Owner = "b"; return r }(), 0, 0); !errors.Is(err, shared.ErrNotHeld) {
		t.Errorf("Put by a non-owner = %v, want ErrNotHeld", err)
	}
	if ok, err := invs[0].Put(ctx, back, 0, 0); err != nil || !ok {
		t.Fatalf("Put = %v, %v; want true, nil", ok, err)
	}
	if _, err := invs[0].Put(ctx, back, 0, 0); !errors.Is(err, shared.ErrNotHeld) {
		t.Errorf("Put of an idle item = %v, want ErrNotHeld", err)
	}
	wantCounts(t, invs[1], shared.Counts{Idle: 1})
	got, ok, err := invs[1].Pop(ctx, "b", time.Minute)
	if err != nil || !ok {
		t.Fatalf("Pop = %v, %v", ok, err)
	}
	want := back
	want.Owner = "b"
	checkRecord(t, "Pop after Put", got, want)

	// The idle limit: with one idle item and maxIdle 1, Put refuses and
	// the item stays in use by its owner.
	mustAdd(t, invs[0], rec("p2", ""), 0)
	ok, err = invs[1].Put(ctx, got, 1, 0)
	if err != nil || ok {
		t.Errorf("Put over maxIdle = %v, %v; want false, nil", ok, err)
	}
	wantCounts(t, invs[0], shared.Counts{Idle: 1, InUse: 1})
	if ok, err := invs[1].Put(ctx, got, 2, 0); err != nil || !ok {
		t.Errorf("Put under maxIdle = %v, %v; want true, nil", ok, err)
	}
	wantCounts(t, invs[0], shared.Counts{Idle: 2})
}

// testPutMaxIdleAtomic returns many items at once with a global idle limit:
// the idle set must never exceed it.
func testPutMaxIdleAtomic(t *testing.T, h Harness) {
	ctx := context.Background()
	const instances, items, maxIdle = 3, 30, 7
	invs := open(t, h, instances)
	for i := range items {
		mustAdd(t, invs[0], rec(fmt.Sprintf("m%02d", i), fmt.Sprintf("inst-%d", i%instances)), time.Minute)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	for i := range items {
		wg.Go(func() {
			r := rec(fmt.Sprintf("m%02d", i), fmt.Sprintf("inst-%d", i%instances))
			ok, err := invs[i%instances].Put(ctx, r, maxIdle, 0)
			if err != nil {
				t.Errorf("Put(%s): %v", r.ID, err)
			}
			if ok {
				mu.Lock()
				accepted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if accepted != maxIdle {
		t.Errorf("Put accepted %d items with maxIdle %d", accepted, maxIdle)
	}
	wantCounts(t, invs[0], shared.Counts{Idle: maxIdle, InUse: items - maxIdle})
}

func testRemove(t *testing.T, h Harness) {
	ctx := context.Background()
	invs := open(t, h, 2)
	mustAdd(t, invs[0], rec("r1", ""), 0)
	mustAdd(t, invs[0], rec("r2", "a"), time.Minute)
	for _, id := range []string{"r1", "r2"} {
		if ok, err := invs[1].Remove(ctx, id); err != nil || !ok {
			t.Errorf("Remove(%s) = %v, %v; want true, nil", id, ok, err)
		}
		if ok, err := invs[0].Remove(ctx, id); err != nil || ok {
			t.Errorf("second Remove(%s) = %v, %v; want false, nil", id, ok, err)
		}
	}
	if _, ok, err := invs[0].Pop(ctx, "a", 0); err != nil || ok {
		t.Errorf("Pop after Remove = %v, %v; want false, nil", ok, err)
	}
	if _, err := invs[0].Put(ctx, rec("r2", "a"), 0, 0); !errors.Is(err, shared.ErrNotHeld) {
		t.Errorf("Put after Remove = %v, want ErrNotHeld", err)
	}
	wantCounts(t, invs[1], shared.Counts{})
	// A removed ID can be added again.
	mustAdd(t, invs[1], rec("r1", ""), 0)
	wantCounts(t, invs[0], shared.Counts{Idle: 1})
}

func testRecordsAndCounts(t *testing.T, h Harness) {
	ctx := context.Background()
	invs := open(t, h, 3)
	mustAdd(t, invs[0], rec("idle-1", ""), 0)
	mustAdd(t, invs[1], rec("idle-2", ""), time.Minute)
	mustAdd(t, invs[1], rec("busy-b", "b"), time.Minute)
	mustAdd(t, invs[2], rec("busy-c", "c"), 0)
	recs, err := invs[0].Records(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].ID < recs[j].ID })
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
		checkRecord(t, "Records", r, rec(r.ID, map[string]string{"busy-b": "b", "busy-c": "c"}[r.ID]))
	}
	if want := []string{"busy-b", "busy-c", "idle-1", "idle-2"}; !slices.Equal(ids, want) {
		t.Errorf("Records IDs = %v, want %v", ids, want)
	}
	if ok, err := invs[2].Reserve(ctx, "tok", 10, time.Minute); err != nil || !ok {
		t.Fatalf("Reserve = %v, %v", ok, err)
	}
	for _, inv := range invs {
		wantCounts(t, inv, shared.Counts{Idle: 2, InUse: 2, Reserved: 1})
	}
}

func testReserve(t *testing.T, h Harness) {
	ctx := context.Background()
	invs := open(t, h, 2)
	reserve := func(inv shared.Inventory, tok string, target int, want bool) {
		t.Helper()
		ok, err := inv.Reserve(ctx, tok, target, time.Minute)
		if err != nil || ok != want {
			t.Errorf("Reserve(%s, %d) = %v, %v; want %v, nil", tok, target, ok, err, want)
		}
	}
	mustAdd(t, invs[0], rec("w1", ""), 0)
	reserve(invs[0], "a", 3, true)
	reserve(invs[1], "b", 3, true)
	reserve(invs[1], "c", 3, false) // 1 idle + 2 reserved
	reserve(invs[0], "a", 3, true)  // refresh of an existing token
	wantCounts(t, invs[1], shared.Counts{Idle: 1, Reserved: 2})
	if err := invs[0].Unreserve(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := invs[0].Unreserve(ctx, "never"); err != nil {
		t.Errorf("Unreserve of a missing token = %v, want nil", err)
	}
	reserve(invs[1], "c", 3, true)
	if _, ok, _ := invs[1].Pop(ctx, "x", 0); !ok {
		t.Fatal("Pop found no idle item")
	}
	reserve(invs[1], "d", 3, true) // in-use items do not count towards the warm target
	reserve(invs[1], "e", 3, false)
	wantCounts(t, invs[0], shared.Counts{InUse: 1, Reserved: 3})
}

// testReserveAtomic reserves from several instances at once: exactly target
// reservations may succeed.
func testReserveAtomic(t *testing.T, h Harness) {
	ctx := context.Background()
	const instances, tries, target = 3, 24, 5
	invs := open(t, h, instances)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for i := range tries {
		wg.Go(func() {
			ok, err := invs[i%instances].Reserve(ctx, fmt.Sprintf("tok-%d", i), target, time.Minute)
			if err != nil {
				t.Errorf("Reserve: %v", err)
			}
			if ok {
				mu.Lock()
				granted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if granted != target {
		t.Errorf("%d concurrent Reserves granted, want %d", granted, target)
	}
}

// testExpiry checks that records and reservations expire by their ttl unless
// refreshed, and that an expired record is absent everywhere.
func testExpiry(t *testing.T, h Harness) {
	ctx := context.Background()
	invs := open(t, h, 2)
	const ttl = 600 * time.Millisecond
	mustAdd(t, invs[0], rec("kept", "a"), ttl)
	mustAdd(t, invs[0], rec("dropped", "a"), ttl)
	mustAdd(t, invs[0], rec("idle-short", ""), ttl)
	mustAdd(t, invs[0], rec("idle-forever", ""), 0)
	if ok, err := invs[1].Reserve(ctx, "res", 10, ttl); err != nil || !ok {
		t.Fatalf("Reserve = %v, %v", ok, err)
	}
	start := time.Now()
	for time.Since(start) < 2*ttl {
		time.Sleep(ttl / 4)
		lost, err := invs[1].Touch(ctx, "a", []string{"kept"}, ttl)
		if err != nil || len(lost) != 0 {
			t.Fatalf("Touch(kept) = %v, %v; want no lost ids", lost, err)
		}
	}
	recs, err := invs[1].Records(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	sort.Strings(ids)
	if want := []string{"idle-forever", "kept"}; !slices.Equal(ids, want) {
		t.Errorf("Records after %v = %v, want %v", 2*ttl, ids, want)
	}
	wantCounts(t, invs[0], shared.Counts{Idle: 1, InUse: 1})
	if _, err := invs[0].Put(ctx, rec("dropped", "a"), 0, 0); !errors.Is(err, shared.ErrNotHeld) {
		t.Errorf("Put of an expired record = %v, want ErrNotHeld", err)
	}
	lost, err := invs[0].Touch(ctx, "a", []string{"kept", "dropped"}, ttl)
	if err != nil || !slices.Equal(lost, []string{"dropped"}) {
		t.Errorf("Touch = %v, %v; want [dropped]", lost, err)
	}
	if ok, err := invs[0].Remove(ctx, "dropped"); err != nil || ok {
		t.Errorf("Remove of an expired record = %v, %v; want false", ok, err)
	}
	// An expired ID can be added again.
	mustAdd(t, invs[1], rec("dropped", ""), 0)
	r, ok, err := invs[1].Pop(ctx, "b", 0)
	if err != nil || !ok || r.ID != "idle-forever" {
		t.Errorf("Pop = %q, %v, %v; want the oldest live idle item idle-forever", r.ID, ok, err)
	}
	// Stop refreshing: the kept record expires too.
	deadline := time.Now().Add(10 * ttl)
	for {
		c := counts(t, invs[0])
		if c.InUse == 1 { // only "idle-forever", now held by b with no ttl
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kept record still live %v after its last Touch: %+v", 10*ttl, c)
		}
		time.Sleep(ttl / 4)
	}
}
