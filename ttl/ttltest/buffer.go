package ttltest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/ttl"
)

// BufferHarness tells RunBuffer how to get buffers.
type BufferHarness struct {
	// New returns a new, empty buffer, isolated from every buffer New
	// returned before (a unique key for a Redis buffer). It registers its
	// own cleanup with t.Cleanup. Required.
	New func(t *testing.T) ttl.Buffer
}

// RunBuffer runs the Buffer conformance suite as subtests of t.
func RunBuffer(t *testing.T, h BufferHarness) {
	if h.New == nil {
		t.Fatal("ttltest: BufferHarness.New is nil")
	}
	s := &bufferSuite{h: h}
	t.Run("AddGreaterWins", s.addGreaterWins)
	t.Run("PeekKeeps", s.peekKeeps)
	t.Run("PeekMax", s.peekMax)
	t.Run("DrainAll", s.drainAll)
	t.Run("RemoveOnlyUnchanged", s.removeOnlyUnchanged)
	t.Run("AddConcurrent", s.addConcurrent)
	t.Run("DrainWhileAdding", s.drainWhileAdding)
	t.Run("PeekOrder", s.peekOrder)
	t.Run("WalkPastRefreshed", s.walkPastRefreshed)
}

type bufferSuite struct{ h BufferHarness }

// t0 is the suite's reference time; a Buffer has no clock of its own.
var t0 = time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func (s *bufferSuite) setup(t *testing.T) (context.Context, ttl.Buffer) {
	t.Helper()
	b := s.h.New(t)
	if b == nil {
		t.Fatal("ttltest: BufferHarness.New returned nil")
	}
	return context.Background(), b
}

func mustAdd(t *testing.T, ctx context.Context, b ttl.Buffer, acts ...ttl.Activity) {
	t.Helper()
	if err := b.Add(ctx, acts); err != nil {
		t.Fatalf("Add(%d activities): %v", len(acts), err)
	}
}

func mustPeek(t *testing.T, ctx context.Context, b ttl.Buffer, max int) []ttl.Activity {
	t.Helper()
	acts, err := b.Peek(ctx, ttl.Activity{}, max)
	if err != nil {
		t.Fatalf("Peek(%d): %v", max, err)
	}
	if len(acts) > max {
		t.Fatalf("Peek(%d) returned %d entries", max, len(acts))
	}
	return acts
}

func mustRemove(t *testing.T, ctx context.Context, b ttl.Buffer, acts []ttl.Activity) int {
	t.Helper()
	n, err := b.Remove(ctx, acts)
	if err != nil {
		t.Fatalf("Remove(%d entries): %v", len(acts), err)
	}
	return n
}

// asMap turns a Peek result into id -> time, failing on a repeated id.
func asMap(t *testing.T, acts []ttl.Activity) map[string]time.Time {
	t.Helper()
	m := make(map[string]time.Time, len(acts))
	for _, a := range acts {
		if _, dup := m[a.ID]; dup {
			t.Errorf("Peek returned %q twice", a.ID)
		}
		m[a.ID] = a.At
	}
	return m
}

func sameContents(t *testing.T, what string, got, want map[string]time.Time) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for id, w := range want {
		g, ok := got[id]
		switch {
		case !ok:
			t.Errorf("%s: %q missing", what, id)
		case !g.Equal(w):
			t.Errorf("%s: %q at %v, want %v", what, id, g, w)
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("%s: unexpected %q", what, id)
		}
	}
}

func (s *bufferSuite) addGreaterWins(t *testing.T) {
	ctx, b := s.setup(t)
	if got := mustPeek(t, ctx, b, 10); len(got) != 0 {
		t.Errorf("Peek of an empty buffer = %v, want nothing", got)
	}
	if _, err := b.Peek(ctx, ttl.Activity{}, 0); !errors.Is(err, ttl.ErrInvalid) {
		t.Errorf("Peek(0): err = %v, want ErrInvalid", err)
	}
	mustAdd(t, ctx, b)
	mustAdd(t, ctx, b, ttl.Activity{ID: "a", At: at(1000)}, ttl.Activity{ID: "b", At: at(2000)})
	// Out of order: an older time arriving later never moves time back.
	mustAdd(t, ctx, b, ttl.Activity{ID: "a", At: at(500)}, ttl.Activity{ID: "b", At: at(2001)})
	// One batch holding an id several times.
	mustAdd(t, ctx, b,
		ttl.Activity{ID: "c", At: at(7)},
		ttl.Activity{ID: "c", At: at(9)},
		ttl.Activity{ID: "c", At: at(8)},
	)
	sameContents(t, "buffer", asMap(t, mustPeek(t, ctx, b, 10)), map[string]time.Time{
		"a": at(1000), "b": at(2001), "c": at(9),
	})
}

func (s *bufferSuite) peekKeeps(t *testing.T) {
	ctx, b := s.setup(t)
	mustAdd(t, ctx, b, ttl.Activity{ID: "a", At: at(1)}, ttl.Activity{ID: "b", At: at(2)})
	first := asMap(t, mustPeek(t, ctx, b, 10))
	second := asMap(t, mustPeek(t, ctx, b, 10))
	want := map[string]time.Time{"a": at(1), "b": at(2)}
	sameContents(t, "first Peek", first, want)
	sameContents(t, "second Peek", second, want)
}

func (s *bufferSuite) peekMax(t *testing.T) {
	ctx, b := s.setup(t)
	want := make(map[string]time.Time)
	acts := make([]ttl.Activity, 0, 50)
	for i := range 50 {
		a := ttl.Activity{ID: fmt.Sprintf("id-%02d", i), At: at(1000 + i*37%50)}
		acts = append(acts, a)
		want[a.ID] = a.At
	}
	mustAdd(t, ctx, b, acts...)
	got := mustPeek(t, ctx, b, 20)
	if len(got) != 20 {
		t.Errorf("Peek(20) of 50 entries returned %d", len(got))
	}
	for id, g := range asMap(t, got) {
		if w, ok := want[id]; !ok || !g.Equal(w) {
			t.Errorf("Peek(20) returned %q at %v, want it at %v (present %v)", id, g, w, ok)
		}
	}
}

// drainAll drains in batches, as the Runner does, and gets every entry
// exactly once.
func (s *bufferSuite) drainAll(t *testing.T) {
	ctx, b := s.setup(t)
	const n, batch = 1000, 128
	want := make(map[string]time.Time, n)
	acts := make([]ttl.Activity, 0, n)
	for i := range n {
		a := ttl.Activity{ID: fmt.Sprint("ws-", i), At: at((i * 7919) % n)}
		acts = append(acts, a)
		want[a.ID] = a.At
	}
	mustAdd(t, ctx, b, acts...)
	got := make(map[string]time.Time, n)
	for round := 0; ; round++ {
		if round > 2*n/batch {
			t.Fatalf("drain did not finish after %d batches", round)
		}
		peeked := mustPeek(t, ctx, b, batch)
		if len(peeked) == 0 {
			break
		}
		for id, at := range asMap(t, peeked) {
			if _, dup := got[id]; dup {
				t.Errorf("%q drained twice", id)
			}
			got[id] = at
		}
		if removed := mustRemove(t, ctx, b, peeked); removed != len(peeked) {
			t.Errorf("Remove of %d unchanged entries removed %d", len(peeked), removed)
		}
	}
	sameContents(t, "drained", got, want)
}

// removeOnlyUnchanged is the race a hand-written ZRANGE, UPDATE, ZREM loses: an
// Add between Peek and Remove must survive.
func (s *bufferSuite) removeOnlyUnchanged(t *testing.T) {
	ctx, b := s.setup(t)
	mustAdd(t, ctx, b,
		ttl.Activity{ID: "newer", At: at(100)},
		ttl.Activity{ID: "older", At: at(100)},
		ttl.Activity{ID: "same", At: at(100)},
		ttl.Activity{ID: "plain", At: at(100)},
	)
	peeked := mustPeek(t, ctx, b, 10)
	if len(peeked) != 4 {
		t.Fatalf("Peek returned %d entries, want 4", len(peeked))
	}
	// Activity arriving while the runner writes the batch to the store.
	mustAdd(t, ctx, b,
		ttl.Activity{ID: "newer", At: at(200)},
		ttl.Activity{ID: "older", At: at(50)},
		ttl.Activity{ID: "same", At: at(100)},
		ttl.Activity{ID: "late", At: at(10)},
	)
	if removed := mustRemove(t, ctx, b, peeked); removed != 3 {
		t.Errorf("Remove removed %d entries, want 3 (all but the one updated since Peek)", removed)
	}
	sameContents(t, "after Remove", asMap(t, mustPeek(t, ctx, b, 10)), map[string]time.Time{
		"newer": at(200), "late": at(10),
	})

	if removed := mustRemove(t, ctx, b, nil); removed != 0 {
		t.Errorf("Remove(nil) removed %d", removed)
	}
	if removed := mustRemove(t, ctx, b, []ttl.Activity{{ID: "unknown", At: at(1)}, {ID: "newer", At: at(199)}}); removed != 0 {
		t.Errorf("Remove of unknown and stale entries removed %d", removed)
	}
	if removed := mustRemove(t, ctx, b, []ttl.Activity{{ID: "newer", At: at(200)}, {ID: "late", At: at(10)}}); removed != 2 {
		t.Errorf("Remove of current entries removed %d, want 2", removed)
	}
	if got := mustPeek(t, ctx, b, 10); len(got) != 0 {
		t.Errorf("buffer not empty after removing everything: %v", got)
	}
}

func (s *bufferSuite) addConcurrent(t *testing.T) {
	ctx, b := s.setup(t)
	const ids, writers, rounds = 20, 4, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				acts := make([]ttl.Activity, 0, ids)
				for i := range ids {
					ms := ((r*7+i+w)%rounds)*writers + w
					acts = append(acts, ttl.Activity{ID: fmt.Sprint("e", i), At: at(ms)})
				}
				if err := b.Add(ctx, acts); err != nil {
					t.Errorf("concurrent Add: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	want := make(map[string]time.Time, ids)
	for i := range ids {
		want[fmt.Sprint("e", i)] = at((rounds-1)*writers + writers - 1)
	}
	sameContents(t, "buffer", asMap(t, mustPeek(t, ctx, b, 100)), want)
}

// drainWhileAdding drains into a greater-wins map while writers keep adding
// newer times: at the end the map holds every id's greatest time.
func (s *bufferSuite) drainWhileAdding(t *testing.T) {
	ctx, b := s.setup(t)
	const ids, writers, rounds, batch = 10, 2, 40, 4
	var (
		wg   sync.WaitGroup
		done = make(chan struct{})
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				acts := make([]ttl.Activity, 0, ids)
				for i := range ids {
					acts = append(acts, ttl.Activity{ID: fmt.Sprint("e", i), At: at(r*writers + w)})
				}
				if err := b.Add(ctx, acts); err != nil {
					t.Errorf("Add while draining: %v", err)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()

	store := make(map[string]time.Time)
	drain := func() int {
		peeked, err := b.Peek(ctx, ttl.Activity{}, batch)
		if err != nil {
			t.Errorf("Peek while adding: %v", err)
			return 0
		}
		for _, a := range peeked {
			if a.At.After(store[a.ID]) {
				store[a.ID] = a.At
			}
		}
		if _, err := b.Remove(ctx, peeked); err != nil {
			t.Errorf("Remove while adding: %v", err)
		}
		return len(peeked)
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			drain()
		}
	}
	for i := 0; drain() > 0; i++ {
		if i > ids*rounds*writers {
			t.Fatal("final drain does not finish")
		}
	}
	want := make(map[string]time.Time, ids)
	for i := range ids {
		want[fmt.Sprint("e", i)] = at((rounds-1)*writers + writers - 1)
	}
	sameContents(t, "drained while adding", store, want)
}

// peekOrder: Peek walks the buffer in (At, ID) order from any cursor, also
// one that is not (or no longer) in the buffer, and a walk in small pages
// reads every entry exactly once, even when many share one time.
func (s *bufferSuite) peekOrder(t *testing.T) {
	ctx, b := s.setup(t)
	var want []ttl.Activity
	for i := range 60 {
		// 40 entries share one time; the others spread around it.
		ms := 500
		if i >= 40 {
			ms = (i-40)*50 + 25
		}
		want = append(want, ttl.Activity{ID: fmt.Sprintf("e%02d", (i*37)%60), At: at(ms)})
	}
	mustAdd(t, ctx, b, want...)
	slices.SortFunc(want, func(x, y ttl.Activity) int {
		if less(x, y) {
			return -1
		}
		return 1
	})
	if got := mustPeek(t, ctx, b, 100); !sameList(got, want) {
		t.Errorf("Peek from the start = %v, want %v", got, want)
	}
	var walked []ttl.Activity
	var after ttl.Activity
	for round := 0; ; round++ {
		if round > len(want) {
			t.Fatal("walk does not end")
		}
		page, err := b.Peek(ctx, after, 7)
		if err != nil {
			t.Fatalf("Peek(after %v, 7): %v", after, err)
		}
		if len(page) > 7 {
			t.Fatalf("Peek(after %v, 7) returned %d entries", after, len(page))
		}
		if len(page) == 0 {
			break
		}
		walked = append(walked, page...)
		after = page[len(page)-1]
	}
	if !sameList(walked, want) {
		t.Errorf("walk in pages of 7 = %v, want %v", walked, want)
	}
	// Cursors that are not entries: between two ids of the shared time,
	// past the last id of a time, before everything, after everything.
	for _, after := range []ttl.Activity{
		{ID: "e10x", At: at(500)},
		{ID: "zz", At: at(500)},
		{ID: "e", At: at(500)},
		{ID: "a", At: at(-1)},
		{ID: want[3].ID, At: want[3].At},
		{ID: "", At: at(10000)},
	} {
		first := len(want)
		for i, w := range want {
			if less(after, w) {
				first = i
				break
			}
		}
		page, err := b.Peek(ctx, after, 3)
		if err != nil {
			t.Fatalf("Peek(after %v): %v", after, err)
		}
		end := min(first+3, len(want))
		if !sameList(page, want[first:end]) {
			t.Errorf("Peek(after %v, 3) = %v, want %v", after, page, want[first:end])
		}
	}
}

// walkPastRefreshed is the drain a busy buffer must not stall: every entry
// of a page is made newer between Peek and Remove, so Remove deletes none;
// the walk goes on from the page's last entry, reads the rest, and then
// the refreshed entries at their new times.
func (s *bufferSuite) walkPastRefreshed(t *testing.T) {
	ctx, b := s.setup(t)
	var old []ttl.Activity
	for i := range 9 {
		old = append(old, ttl.Activity{ID: fmt.Sprint("w", i), At: at(100 + i)})
	}
	mustAdd(t, ctx, b, old...)
	page := mustPeek(t, ctx, b, 3)
	if !sameList(page, old[:3]) {
		t.Fatalf("first page = %v, want %v", page, old[:3])
	}
	var newer []ttl.Activity
	for _, a := range page {
		newer = append(newer, ttl.Activity{ID: a.ID, At: at(1000)})
	}
	mustAdd(t, ctx, b, newer...)
	if n := mustRemove(t, ctx, b, page); n != 0 {
		t.Errorf("Remove of a refreshed page removed %d", n)
	}
	var rest []ttl.Activity
	after := page[len(page)-1]
	for {
		p, err := b.Peek(ctx, after, 4)
		if err != nil {
			t.Fatalf("Peek(after %v): %v", after, err)
		}
		if len(p) == 0 {
			break
		}
		rest = append(rest, p...)
		after = p[len(p)-1]
		if len(rest) > 20 {
			t.Fatal("walk does not end")
		}
	}
	if want := append(slices.Clone(old[3:]), newer...); !sameList(rest, want) {
		t.Errorf("walk after the refreshed page = %v, want %v", rest, want)
	}
}

func sameList(got, want []ttl.Activity) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].ID != want[i].ID || !got[i].At.Equal(want[i].At) {
			return false
		}
	}
	return true
}

// less reports whether a comes before b in the order Buffer.Peek walks:
// by At, then by ID.
func less(a, b ttl.Activity) bool {
	if !a.At.Equal(b.At) {
		return a.At.Before(b.At)
	}
	return a.ID < b.ID
}
