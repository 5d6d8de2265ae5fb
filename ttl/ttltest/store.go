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

// StoreHarness tells RunStore how to get stores.
type StoreHarness struct {
	// New returns a new, empty store, isolated from every store New returned
	// before (a fresh table or schema for a SQL store). It registers its own
	// cleanup with t.Cleanup. Required.
	New func(t *testing.T) ttl.Store
	// Now returns the current time of the store's clock (the database
	// server's now()). Timestamps the suite creates are relative to it. Nil
	// means time.Now, which is fine when the store runs on this machine.
	Now func(t *testing.T) time.Time
}

// tolerance bounds how far "the store's now" may be from the suite's
// reference time: clock skew plus the time the suite takes.
const tolerance = time.Minute

// RunStore runs the Store conformance suite as subtests of t.
func RunStore(t *testing.T, h StoreHarness) {
	if h.New == nil {
		t.Fatal("ttltest: StoreHarness.New is nil")
	}
	if h.Now == nil {
		h.Now = func(*testing.T) time.Time { return time.Now() }
	}
	s := &storeSuite{h: h}
	t.Run("CreateGet", s.createGet)
	t.Run("CreateDefaults", s.createDefaults)
	t.Run("CreateInvalid", s.createInvalid)
	t.Run("MergeGreaterWins", s.mergeGreaterWins)
	t.Run("MergeConcurrent", s.mergeConcurrent)
	t.Run("ApplyLastActivity", s.applyLastActivity)
	t.Run("ApplyPhaseChanged", s.applyPhaseChanged)
	t.Run("ApplyCreated", s.applyCreated)
	t.Run("ApplyAfterActivity", s.applyAfterActivity)
	t.Run("ApplyInvalidRule", s.applyInvalidRule)
	t.Run("ApplyConcurrent", s.applyConcurrent)
	t.Run("UpdateCompareAndSet", s.updateCompareAndSet)
	t.Run("UpdatePhase", s.updatePhase)
	t.Run("UpdateDelete", s.updateDelete)
}

type storeSuite struct{ h StoreHarness }

// setup returns a fresh store and the reference time, truncated to the
// millisecond so that every store keeps it exactly.
func (s *storeSuite) setup(t *testing.T) (context.Context, ttl.Store, time.Time) {
	t.Helper()
	st := s.h.New(t)
	if st == nil {
		t.Fatal("ttltest: StoreHarness.New returned nil")
	}
	return context.Background(), st, s.h.Now(t).Truncate(time.Millisecond)
}

func mustCreate(t *testing.T, ctx context.Context, st ttl.Store, e ttl.Entity) ttl.Entity {
	t.Helper()
	got, err := st.Create(ctx, e)
	if err != nil {
		t.Fatalf("Create(%q): %v", e.ID, err)
	}
	return got
}

func mustGet(t *testing.T, ctx context.Context, st ttl.Store, id string) ttl.Entity {
	t.Helper()
	e, err := st.Get(ctx, id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	return e
}

func mustMerge(t *testing.T, ctx context.Context, st ttl.Store, acts ...ttl.Activity) {
	t.Helper()
	if err := st.MergeActivity(ctx, acts); err != nil {
		t.Fatalf("MergeActivity(%d activities): %v", len(acts), err)
	}
}

func mustApply(t *testing.T, ctx context.Context, st ttl.Store, r ttl.Rule) []string {
	t.Helper()
	ids, err := st.Apply(ctx, r)
	if err != nil {
		t.Fatalf("Apply(%s): %v", r, err)
	}
	return ids
}

// sameEntity reports the fields where got differs from want.
func sameEntity(t *testing.T, got, want ttl.Entity) {
	t.Helper()
	if got.ID != want.ID || got.Phase != want.Phase || got.DesiredState != want.DesiredState || got.Operation != want.Operation {
		t.Errorf("entity %q: got {Phase %q, DesiredState %q, Operation %q}, want {%q, %q, %q}",
			want.ID, got.Phase, got.DesiredState, got.Operation, want.Phase, want.DesiredState, want.Operation)
	}
	sameTime(t, want.ID+".LastActivityAt", got.LastActivityAt, want.LastActivityAt)
	sameTime(t, want.ID+".PhaseChangedAt", got.PhaseChangedAt, want.PhaseChangedAt)
	sameTime(t, want.ID+".CreatedAt", got.CreatedAt, want.CreatedAt)
	sameTime(t, want.ID+".DeletedAt", got.DeletedAt, want.DeletedAt)
}

func sameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// nearNow checks that got is the store's now between before and after.
func nearNow(t *testing.T, what string, got, before, after time.Time) {
	t.Helper()
	if got.Before(before.Add(-tolerance)) || got.After(after.Add(tolerance)) {
		t.Errorf("%s = %v, want the store's now (between %v and %v, ± %v)", what, got, before, after, tolerance)
	}
}

func sameIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	g := slices.Clone(got)
	w := slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Errorf("%s returned ids %q, want %q", what, g, w)
	}
}

func (s *storeSuite) createGet(t *testing.T) {
	ctx, st, now := s.setup(t)
	want := ttl.Entity{
		ID:             "ws-1",
		Phase:          "RUNNING",
		DesiredState:   "RUNNING",
		Operation:      "STARTING",
		LastActivityAt: now.Add(-time.Minute),
		PhaseChangedAt: now.Add(-2 * time.Minute),
		CreatedAt:      now.Add(-3 * time.Minute),
	}
	got := mustCreate(t, ctx, st, want)
	sameEntity(t, got, want)
	sameEntity(t, mustGet(t, ctx, st, "ws-1"), want)

	deleted := ttl.Entity{ID: "ws-2", Phase: "ARCHIVED", CreatedAt: now.Add(-time.Hour),
		LastActivityAt: now.Add(-time.Hour), PhaseChangedAt: now.Add(-time.Hour), DeletedAt: now.Add(-time.Minute)}
	mustCreate(t, ctx, st, deleted)
	sameEntity(t, mustGet(t, ctx, st, "ws-2"), deleted)

	if _, err := st.Create(ctx, ttl.Entity{ID: "ws-1", Phase: "STANDBY"}); !errors.Is(err, ttl.ErrExists) {
		t.Errorf("Create of an existing id: err = %v, want ErrExists", err)
	}
	if _, err := st.Create(ctx, ttl.Entity{ID: "ws-2", Phase: "RUNNING"}); !errors.Is(err, ttl.ErrExists) {
		t.Errorf("Create of a deleted id: err = %v, want ErrExists", err)
	}
	sameEntity(t, mustGet(t, ctx, st, "ws-1"), want)
	if _, err := st.Get(ctx, "missing"); !errors.Is(err, ttl.ErrNotFound) {
		t.Errorf("Get(missing): err = %v, want ErrNotFound", err)
	}
}

func (s *storeSuite) createDefaults(t *testing.T) {
	ctx, st, _ := s.setup(t)
	before := s.h.Now(t)
	got := mustCreate(t, ctx, st, ttl.Entity{ID: "new", Phase: "RUNNING"})
	after := s.h.Now(t)
	nearNow(t, "CreatedAt", got.CreatedAt, before, after)
	sameTime(t, "LastActivityAt", got.LastActivityAt, got.CreatedAt)
	sameTime(t, "PhaseChangedAt", got.PhaseChangedAt, got.CreatedAt)
	if !got.DeletedAt.IsZero() {
		t.Errorf("DeletedAt = %v, want zero", got.DeletedAt)
	}
	sameEntity(t, mustGet(t, ctx, st, "new"), got)

	created := before.Add(-time.Hour).Truncate(time.Millisecond)
	got = mustCreate(t, ctx, st, ttl.Entity{ID: "old", Phase: "RUNNING", CreatedAt: created})
	sameTime(t, "LastActivityAt", got.LastActivityAt, created)
	sameTime(t, "PhaseChangedAt", got.PhaseChangedAt, created)
}

func (s *storeSuite) createInvalid(t *testing.T) {
	ctx, st, _ := s.setup(t)
	if _, err := st.Create(ctx, ttl.Entity{Phase: "RUNNING"}); !errors.Is(err, ttl.ErrInvalid) {
		t.Errorf("Create without ID: err = %v, want ErrInvalid", err)
	}
	if _, err := st.Create(ctx, ttl.Entity{ID: "x"}); !errors.Is(err, ttl.ErrInvalid) {
		t.Errorf("Create without Phase: err = %v, want ErrInvalid", err)
	}
	if _, err := st.Get(ctx, "x"); !errors.Is(err, ttl.ErrNotFound) {
		t.Errorf("Get after invalid Create: err = %v, want ErrNotFound", err)
	}
}

func (s *storeSuite) mergeGreaterWins(t *testing.T) {
	ctx, st, now := s.setup(t)
	base := now.Add(-time.Hour)
	for _, id := range []string{"a", "b", "c", "gone"} {
		mustCreate(t, ctx, st, ttl.Entity{ID: id, Phase: "RUNNING", CreatedAt: base})
	}
	if _, err := st.Update(ctx, "gone", ttl.Update{Delete: true}); err != nil {
		t.Fatalf("Update(gone, Delete): %v", err)
	}

	mustMerge(t, ctx, st, ttl.Activity{ID: "a", At: base.Add(30 * time.Minute)})
	sameTime(t, "a after a newer merge", mustGet(t, ctx, st, "a").LastActivityAt, base.Add(30*time.Minute))
	mustMerge(t, ctx, st, ttl.Activity{ID: "a", At: base.Add(20 * time.Minute)})
	sameTime(t, "a after an older merge", mustGet(t, ctx, st, "a").LastActivityAt, base.Add(30*time.Minute))

	// One batch holding an id several times, out of order, plus an unknown id.
	mustMerge(t, ctx, st,
		ttl.Activity{ID: "b", At: base.Add(10 * time.Minute)},
		ttl.Activity{ID: "unknown", At: now},
		ttl.Activity{ID: "b", At: base.Add(40 * time.Minute)},
		ttl.Activity{ID: "c", At: base.Add(5 * time.Minute)},
		ttl.Activity{ID: "b", At: base.Add(25 * time.Minute)},
		ttl.Activity{ID: "gone", At: base.Add(15 * time.Minute)},
	)
	sameTime(t, "b", mustGet(t, ctx, st, "b").LastActivityAt, base.Add(40*time.Minute))
	sameTime(t, "c", mustGet(t, ctx, st, "c").LastActivityAt, base.Add(5*time.Minute))
	sameTime(t, "a untouched", mustGet(t, ctx, st, "a").LastActivityAt, base.Add(30*time.Minute))
	sameTime(t, "deleted entity", mustGet(t, ctx, st, "gone").LastActivityAt, base.Add(15*time.Minute))
	if _, err := st.Get(ctx, "unknown"); !errors.Is(err, ttl.ErrNotFound) {
		t.Errorf("MergeActivity created an unknown id: Get err = %v, want ErrNotFound", err)
	}

	// An older time than CreatedAt's default never moves time back either.
	mustMerge(t, ctx, st, ttl.Activity{ID: "c", At: base.Add(-time.Hour)})
	sameTime(t, "c after an ancient merge", mustGet(t, ctx, st, "c").LastActivityAt, base.Add(5*time.Minute))
	mustMerge(t, ctx, st)
}

func (s *storeSuite) mergeConcurrent(t *testing.T) {
	ctx, st, now := s.setup(t)
	const ids, writers, rounds = 20, 4, 10
	base := now.Add(-time.Hour)
	for i := range ids {
		mustCreate(t, ctx, st, ttl.Entity{ID: fmt.Sprint("e", i), Phase: "RUNNING", CreatedAt: base})
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				acts := make([]ttl.Activity, 0, ids)
				for i := range ids {
					// Writer w's times interleave with the others', in a
					// different order per writer; the greatest is
					// base + (rounds-1)*writers + writers-1 seconds.
					sec := ((r*7+i+w)%rounds)*writers + w
					acts = append(acts, ttl.Activity{ID: fmt.Sprint("e", i), At: base.Add(time.Duration(sec) * time.Second)})
				}
				if err := st.MergeActivity(ctx, acts); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent MergeActivity: %v", err)
	}
	want := base.Add(time.Duration((rounds-1)*writers+writers-1) * time.Second)
	for i := range ids {
		sameTime(t, fmt.Sprint("e", i), mustGet(t, ctx, st, fmt.Sprint("e", i)).LastActivityAt, want)
	}
}

// standby is a cloud-IDE workspace system's first rule.
var standby = ttl.Rule{Name: "standby", Phase: "RUNNING", Since: ttl.SinceLastActivity, After: 10 * time.Minute, Then: "STANDBY"}

func (s *storeSuite) applyLastActivity(t *testing.T) {
	ctx, st, now := s.setup(t)
	old := now.Add(-11 * time.Minute)
	created := now.Add(-time.Hour)
	ents := []ttl.Entity{
		{ID: "idle", Phase: "RUNNING", LastActivityAt: old},
		{ID: "idle2", Phase: "RUNNING", DesiredState: "RUNNING", LastActivityAt: old},
		{ID: "fresh", Phase: "RUNNING", LastActivityAt: now.Add(-9 * time.Minute)},
		{ID: "other-phase", Phase: "STANDBY", LastActivityAt: old},
		{ID: "busy", Phase: "RUNNING", Operation: "STARTING", LastActivityAt: old},
		{ID: "deleted", Phase: "RUNNING", LastActivityAt: old, DeletedAt: now.Add(-time.Minute)},
		{ID: "already", Phase: "RUNNING", DesiredState: "STANDBY", LastActivityAt: old},
	}
	for _, e := range ents {
		e.CreatedAt, e.PhaseChangedAt = created, created
		mustCreate(t, ctx, st, e)
	}
	sameIDs(t, "Apply(standby)", mustApply(t, ctx, st, standby), "idle", "idle2")
	for _, e := range ents {
		want := e.DesiredState
		if e.ID == "idle" || e.ID == "idle2" {
			want = "STANDBY"
		}
		got := mustGet(t, ctx, st, e.ID)
		if got.DesiredState != want || got.Phase != e.Phase || got.Operation != e.Operation {
			t.Errorf("%s after Apply: {Phase %q, DesiredState %q, Operation %q}, want {%q, %q, %q}",
				e.ID, got.Phase, got.DesiredState, got.Operation, e.Phase, want, e.Operation)
		}
		sameTime(t, e.ID+".LastActivityAt", got.LastActivityAt, e.LastActivityAt)
	}
	sameIDs(t, "second Apply(standby)", mustApply(t, ctx, st, standby))

	// Once the operation ends, the busy entity expires too.
	if _, err := st.Update(ctx, "busy", ttl.Update{ExpectOperation: "STARTING"}); err != nil {
		t.Fatalf("Update(busy): %v", err)
	}
	sameIDs(t, "Apply(standby) after the operation ended", mustApply(t, ctx, st, standby), "busy")
}

func (s *storeSuite) applyPhaseChanged(t *testing.T) {
	ctx, st, now := s.setup(t)
	archive := ttl.Rule{Name: "archive", Phase: "STANDBY", Since: ttl.SincePhaseChanged, After: 30 * time.Minute, Then: "ARCHIVED"}
	created := now.Add(-2 * time.Hour)
	mustCreate(t, ctx, st, ttl.Entity{ID: "long", Phase: "STANDBY", CreatedAt: created,
		PhaseChangedAt: now.Add(-31 * time.Minute), LastActivityAt: now.Add(-time.Minute)})
	// Idle for long, but in STANDBY only recently: PhaseChangedAt decides.
	mustCreate(t, ctx, st, ttl.Entity{ID: "recent", Phase: "STANDBY", CreatedAt: created,
		PhaseChangedAt: now.Add(-29 * time.Minute), LastActivityAt: created})
	sameIDs(t, "Apply(archive)", mustApply(t, ctx, st, archive), "long")
	if got := mustGet(t, ctx, st, "long").DesiredState; got != "ARCHIVED" {
		t.Errorf("long.DesiredState = %q, want ARCHIVED", got)
	}
	if got := mustGet(t, ctx, st, "recent").DesiredState; got != "" {
		t.Errorf("recent.DesiredState = %q, want empty", got)
	}
}

func (s *storeSuite) applyCreated(t *testing.T) {
	ctx, st, now := s.setup(t)
	lifetime := ttl.Rule{Name: "lifetime", Phase: "RUNNING", Since: ttl.SinceCreated, After: 8 * time.Hour, Then: "DESTROYED"}
	mustCreate(t, ctx, st, ttl.Entity{ID: "ancient", Phase: "RUNNING", CreatedAt: now.Add(-8*time.Hour - time.Minute),
		LastActivityAt: now, PhaseChangedAt: now.Add(-time.Minute)})
	mustCreate(t, ctx, st, ttl.Entity{ID: "young", Phase: "RUNNING", CreatedAt: now.Add(-8*time.Hour + time.Minute),
		LastActivityAt: now.Add(-8*time.Hour + time.Minute)})
	sameIDs(t, "Apply(lifetime)", mustApply(t, ctx, st, lifetime), "ancient")
}

// applyAfterActivity is "activity lands before the tick's sync":
// merged activity keeps an entity that was about to expire.
func (s *storeSuite) applyAfterActivity(t *testing.T) {
	ctx, st, now := s.setup(t)
	for _, id := range []string{"active", "idle"} {
		mustCreate(t, ctx, st, ttl.Entity{ID: id, Phase: "RUNNING", CreatedAt: now.Add(-11 * time.Minute)})
	}
	mustMerge(t, ctx, st, ttl.Activity{ID: "active", At: now.Add(-time.Minute)})
	sameIDs(t, "Apply(standby)", mustApply(t, ctx, st, standby), "idle")
	if got := mustGet(t, ctx, st, "active"); got.DesiredState != "" {
		t.Errorf("active.DesiredState = %q, want empty", got.DesiredState)
	}
}

func (s *storeSuite) applyInvalidRule(t *testing.T) {
	ctx, st, now := s.setup(t)
	mustCreate(t, ctx, st, ttl.Entity{ID: "idle", Phase: "RUNNING", CreatedAt: now.Add(-time.Hour)})
	for _, r := range []ttl.Rule{
		{Phase: "RUNNING", After: 0, Then: "STANDBY"},
		{Phase: "RUNNING", After: -time.Minute, Then: "STANDBY"},
		{Phase: "", After: time.Minute, Then: "STANDBY"},
		{Phase: "RUNNING", After: time.Minute, Then: ""},
		{Phase: "RUNNING", Since: ttl.Since(42), After: time.Minute, Then: "STANDBY"},
	} {
		if ids, err := st.Apply(ctx, r); !errors.Is(err, ttl.ErrInvalid) || len(ids) != 0 {
			t.Errorf("Apply(%+v) = %q, %v; want no ids and ErrInvalid", r, ids, err)
		}
	}
	if got := mustGet(t, ctx, st, "idle").DesiredState; got != "" {
		t.Errorf("invalid rules changed DesiredState to %q", got)
	}
}

// applyConcurrent runs one rule from several goroutines at once, as several
// runner instances sharing a database do: each id is returned exactly once.
func (s *storeSuite) applyConcurrent(t *testing.T) {
	ctx, st, now := s.setup(t)
	const n, appliers = 100, 4
	want := make([]string, 0, n)
	for i := range n {
		id := fmt.Sprintf("e%03d", i)
		want = append(want, id)
		mustCreate(t, ctx, st, ttl.Entity{ID: id, Phase: "RUNNING", CreatedAt: now.Add(-time.Hour)})
	}
	var (
		mu  sync.Mutex
		got []string
		wg  sync.WaitGroup
	)
	for range appliers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids, err := st.Apply(ctx, standby)
			if err != nil {
				t.Errorf("concurrent Apply: %v", err)
			}
			mu.Lock()
			got = append(got, ids...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sameIDs(t, "concurrent Apply (all appliers together)", got, want...)
}

func (s *storeSuite) updateCompareAndSet(t *testing.T) {
	ctx, st, now := s.setup(t)
	orig := mustCreate(t, ctx, st, ttl.Entity{ID: "ws", Phase: "RUNNING", CreatedAt: now.Add(-time.Hour)})

	if _, err := st.Update(ctx, "ws", ttl.Update{ExpectOperation: "STOPPING", Phase: "STANDBY"}); !errors.Is(err, ttl.ErrConflict) {
		t.Errorf("Update with a wrong ExpectOperation: err = %v, want ErrConflict", err)
	}
	sameEntity(t, mustGet(t, ctx, st, "ws"), orig)

	got, err := st.Update(ctx, "ws", ttl.Update{Operation: "STOPPING"})
	if err != nil {
		t.Fatalf("Update(begin STOPPING): %v", err)
	}
	want := orig
	want.Operation = "STOPPING"
	sameEntity(t, got, want)
	sameEntity(t, mustGet(t, ctx, st, "ws"), want)

	// A second controller that still believes no operation runs loses.
	if _, err := st.Update(ctx, "ws", ttl.Update{Operation: "STARTING"}); !errors.Is(err, ttl.ErrConflict) {
		t.Errorf("second Update from operation \"\": err = %v, want ErrConflict", err)
	}
	sameEntity(t, mustGet(t, ctx, st, "ws"), want)

	// DesiredState "" keeps, a value sets.
	got, err = st.Update(ctx, "ws", ttl.Update{ExpectOperation: "STOPPING", Operation: "STOPPING", DesiredState: "STANDBY"})
	if err != nil {
		t.Fatalf("Update(DesiredState): %v", err)
	}
	want.DesiredState = "STANDBY"
	sameEntity(t, got, want)
	got, err = st.Update(ctx, "ws", ttl.Update{ExpectOperation: "STOPPING", Operation: "STOPPING"})
	if err != nil {
		t.Fatalf("Update(nothing): %v", err)
	}
	sameEntity(t, got, want)

	if _, err := st.Update(ctx, "missing", ttl.Update{}); !errors.Is(err, ttl.ErrNotFound) {
		t.Errorf("Update(missing): err = %v, want ErrNotFound", err)
	}
}

func (s *storeSuite) updatePhase(t *testing.T) {
	ctx, st, now := s.setup(t)
	orig := mustCreate(t, ctx, st, ttl.Entity{ID: "ws", Phase: "RUNNING", CreatedAt: now.Add(-time.Hour)})

	// Same phase: PhaseChangedAt is kept (SQL's CASE WHEN phase != :new_phase).
	got, err := st.Update(ctx, "ws", ttl.Update{Phase: "RUNNING"})
	if err != nil {
		t.Fatalf("Update(same phase): %v", err)
	}
	sameEntity(t, got, orig)

	before := s.h.Now(t)
	got, err = st.Update(ctx, "ws", ttl.Update{Phase: "STANDBY"})
	after := s.h.Now(t)
	if err != nil {
		t.Fatalf("Update(STANDBY): %v", err)
	}
	if got.Phase != "STANDBY" {
		t.Errorf("Phase = %q, want STANDBY", got.Phase)
	}
	nearNow(t, "PhaseChangedAt after a phase change", got.PhaseChangedAt, before, after)
	sameTime(t, "LastActivityAt", got.LastActivityAt, orig.LastActivityAt)
	sameTime(t, "CreatedAt", got.CreatedAt, orig.CreatedAt)
	sameEntity(t, mustGet(t, ctx, st, "ws"), got)

	// Entering STANDBY just now: the archive rule waits its 30 minutes.
	archive := ttl.Rule{Name: "archive", Phase: "STANDBY", Since: ttl.SincePhaseChanged, After: 30 * time.Minute, Then: "ARCHIVED"}
	sameIDs(t, "Apply(archive) right after the phase change", mustApply(t, ctx, st, archive))
}

func (s *storeSuite) updateDelete(t *testing.T) {
	ctx, st, now := s.setup(t)
	mustCreate(t, ctx, st, ttl.Entity{ID: "ws", Phase: "RUNNING", CreatedAt: now.Add(-time.Hour)})
	before := s.h.Now(t)
	got, err := st.Update(ctx, "ws", ttl.Update{Delete: true})
	after := s.h.Now(t)
	if err != nil {
		t.Fatalf("Update(Delete): %v", err)
	}
	nearNow(t, "DeletedAt", got.DeletedAt, before, after)
	again, err := st.Update(ctx, "ws", ttl.Update{Delete: true})
	if err != nil {
		t.Fatalf("second Update(Delete): %v", err)
	}
	sameTime(t, "DeletedAt after a second delete", again.DeletedAt, got.DeletedAt)
	sameEntity(t, mustGet(t, ctx, st, "ws"), got)
	sameIDs(t, "Apply(standby) on a deleted entity", mustApply(t, ctx, st, standby))
}
