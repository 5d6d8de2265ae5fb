// Package provisionertest is the conformance suite for pool.Provisioner
// implementations that can also list what exists (pool.Lister): worker
// processes, containers, VMs. It imports only testing and the pool package,
// so a third-party provisioner runs the same suite:
//
//	func TestContract(t *testing.T) {
//		provisionertest.Run(t, provisionertest.Harness[Worker]{
//			New: func(t *testing.T) provisionertest.Provisioner[Worker] { ... },
//		})
//	}
package provisionertest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/pool"
)

// Provisioner is what the suite checks: create, destroy and list.
type Provisioner[T any] interface {
	pool.Provisioner[T]
	pool.Lister[T]
}

// Harness tells the suite how to make provisioners. New is required; the
// other fields enable the subtests that need them.
type Harness[T any] struct {
	// New returns a provisioner. Provisioners from one Harness share one
	// label (they see each other's items, as a restarted owner sees its
	// predecessor's) and no other test's items; New registers any cleanup
	// with t.Cleanup.
	New func(t *testing.T) Provisioner[T]
	// CrashOwner, when set, runs an owner in another OS process that
	// creates n items with a provisioner of the same label, and kills that
	// process with SIGKILL once they exist; it returns their IDs. The items
	// must survive the crash.
	CrashOwner func(t *testing.T, n int) []string
	// Kill, when set, ends item from outside (the process or container
	// dies). With a pool.Checker, Check must then fail; with a
	// pool.Watcher, its watches must report the death.
	Kill func(t *testing.T, item T)
	// Timeout bounds each call the suite makes. 0 means one minute.
	Timeout time.Duration
}

// Run runs the contract's subtests.
func Run[T any](t *testing.T, h Harness[T]) {
	t.Helper()
	if h.New == nil {
		t.Fatal("provisionertest: Harness.New is nil")
	}
	if h.Timeout == 0 {
		h.Timeout = time.Minute
	}
	t.Run("CreateListDestroy", func(t *testing.T) { testCreateListDestroy(t, h) })
	t.Run("DestroyTwice", func(t *testing.T) { testDestroyTwice(t, h) })
	t.Run("DestroyMissing", func(t *testing.T) { testDestroyMissing(t, h) })
	t.Run("CreateCancelled", func(t *testing.T) { testCreateCancelled(t, h) })
	t.Run("Killed", func(t *testing.T) { testKilled(t, h) })
	t.Run("Watched", func(t *testing.T) { testWatched(t, h) })
	t.Run("OwnerCrash", func(t *testing.T) { testOwnerCrash(t, h) })
}

func (h Harness[T]) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), h.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// listed returns the IDs p lists.
func listed[T any](t *testing.T, h Harness[T], p Provisioner[T]) []string {
	t.Helper()
	items, err := p.List(h.ctx(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	ids := make([]string, 0, len(items))
	for _, it := range items {
		if it.ID != p.ID(it.Value) {
			t.Errorf("List reports ID %q for an item whose ID is %q", it.ID, p.ID(it.Value))
		}
		ids = append(ids, it.ID)
	}
	return ids
}

func create[T any](t *testing.T, h Harness[T], p Provisioner[T]) T {
	t.Helper()
	item, err := p.Create(h.ctx(t))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() { _ = p.Destroy(context.Background(), item) })
	return item
}

func testCreateListDestroy[T any](t *testing.T, h Harness[T]) {
	p := h.New(t)
	a, b := create(t, h, p), create(t, h, p)
	ida, idb := p.ID(a), p.ID(b)
	if ida == "" || ida == idb {
		t.Fatalf("two items have IDs %q and %q: want distinct, non-empty", ida, idb)
	}
	ids := listed(t, h, p)
	if !slices.Contains(ids, ida) || !slices.Contains(ids, idb) {
		t.Fatalf("List = %v, want it to include %q and %q", ids, ida, idb)
	}
	if c, ok := any(p).(pool.Checker[T]); ok {
		if err := c.Check(h.ctx(t), a); err != nil {
			t.Errorf("Check of a new item: %v", err)
		}
	}
	if err := p.Destroy(h.ctx(t), a); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	ids = listed(t, h, p)
	if slices.Contains(ids, ida) {
		t.Errorf("List still has %q after Destroy returned", ida)
	}
	if !slices.Contains(ids, idb) {
		t.Errorf("List lost %q when another item was destroyed", idb)
	}
	// A provisioner made later (a restarted owner) sees what exists.
	if ids := listed(t, h, h.New(t)); !slices.Contains(ids, idb) || slices.Contains(ids, ida) {
		t.Errorf("a new provisioner lists %v, want %q and not %q", ids, idb, ida)
	}
}

func testDestroyTwice[T any](t *testing.T, h Harness[T]) {
	p := h.New(t)
	a := create(t, h, p)
	if err := p.Destroy(h.ctx(t), a); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if err := p.Destroy(h.ctx(t), a); err != nil {
		t.Errorf("second Destroy of the same item: %v, want nil (already gone is success)", err)
	}
}

func testDestroyMissing[T any](t *testing.T, h Harness[T]) {
	p := h.New(t)
	a := create(t, h, p)
	if err := p.Destroy(h.ctx(t), a); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	// Another owner that never knew the item destroys it too.
	if err := h.New(t).Destroy(h.ctx(t), a); err != nil {
		t.Errorf("Destroy of a missing item by another provisioner: %v, want nil", err)
	}
}

func testCreateCancelled[T any](t *testing.T, h Harness[T]) {
	p := h.New(t)
	before := listed(t, h, p)
	cause := errors.New("caller gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	if item, err := p.Create(ctx); err == nil {
		_ = p.Destroy(context.Background(), item)
		t.Fatal("Create with an ended context succeeded")
	} else if !errors.Is(err, cause) {
		t.Errorf("Create with an ended context: %v, want it to wrap the context's cause", err)
	}
	if after := listed(t, h, p); len(after) != len(before) {
		t.Errorf("a cancelled Create left items: List went from %v to %v", before, after)
	}
}

func testKilled[T any](t *testing.T, h Harness[T]) {
	if h.Kill == nil {
		t.Skip("provisionertest: Harness.Kill is nil")
	}
	p := h.New(t)
	c, ok := any(p).(pool.Checker[T])
	if !ok {
		t.Skip("provisionertest: the provisioner is not a pool.Checker")
	}
	a := create(t, h, p)
	h.Kill(t, a)
	deadline := time.Now().Add(h.Timeout)
	for c.Check(h.ctx(t), a) == nil {
		if time.Now().After(deadline) {
			t.Fatal("Check still passes for a killed item")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Destroy(h.ctx(t), a); err != nil {
		t.Errorf("Destroy of a killed item: %v, want nil", err)
	}
	if slices.Contains(listed(t, h, p), p.ID(a)) {
		t.Error("List has a killed and destroyed item")
	}
}

// testWatched checks a pool.Watcher: a watch reports its own item's death,
// and only its own, whichever provisioner of the label watches it, and
// Watch of an item that is dead already returns a closed channel (a pool
// relies on it for an item that died while idle in a shared Inventory).
func testWatched[T any](t *testing.T, h Harness[T]) {
	if h.Kill == nil {
		t.Skip("provisionertest: Harness.Kill is nil")
	}
	p := h.New(t)
	w, ok := any(p).(pool.Watcher[T])
	if !ok {
		t.Skip("provisionertest: the provisioner is not a pool.Watcher")
	}
	other, ok := any(h.New(t)).(pool.Watcher[T])
	if !ok {
		t.Fatal("provisionertest: New returned a pool.Watcher once only")
	}
	a, b := create(t, h, p), create(t, h, p)
	watch := func(w pool.Watcher[T], item T) <-chan struct{} {
		ctx, cancel := context.WithCancel(h.ctx(t))
		t.Cleanup(cancel)
		ch := w.Watch(ctx, item)
		if ch == nil {
			t.Fatalf("Watch of %q returned nil", p.ID(item))
		}
		return ch
	}
	isClosed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	wa, wb, wOther := watch(w, a), watch(w, b), watch(other, a)
	if isClosed(wa) || isClosed(wOther) {
		t.Fatal("the watch of a live item reports it dead")
	}
	h.Kill(t, a)
	for _, ch := range []<-chan struct{}{wa, wOther} {
		select {
		case <-ch:
		case <-time.After(h.Timeout):
			t.Fatal("a watch did not report the death of its item")
		}
	}
	if isClosed(wb) {
		t.Error("the watch of a live item reported another item's death")
	}
	if !isClosed(watch(w, a)) {
		t.Error("Watch of a dead item returned a channel that is not closed")
	}
	if err := p.Destroy(h.ctx(t), a); err != nil {
		t.Errorf("Destroy of a killed item: %v", err)
	}
	if isClosed(wb) {
		t.Error("the watch of a live item reported another item's destroy")
	}
}

func testOwnerCrash[T any](t *testing.T, h Harness[T]) {
	if h.CrashOwner == nil {
		t.Skip("provisionertest: Harness.CrashOwner is nil")
	}
	ids := h.CrashOwner(t, 2)
	if len(ids) != 2 {
		t.Fatalf("CrashOwner returned %d ids, want 2", len(ids))
	}
	p := h.New(t)
	items, err := p.List(h.ctx(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	found := 0
	for _, it := range items {
		if !slices.Contains(ids, it.ID) {
			continue
		}
		found++
		if err := p.Destroy(h.ctx(t), it.Value); err != nil {
			t.Errorf("Destroy of %q, left by a crashed owner: %v", it.ID, err)
		}
	}
	if found != len(ids) {
		t.Fatalf("List found %d of the %d items a crashed owner left", found, len(ids))
	}
	for _, id := range listed(t, h, p) {
		if slices.Contains(ids, id) {
			t.Errorf("List still has %q after Destroy", id)
		}
	}
}
