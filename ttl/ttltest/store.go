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

// Entity is an entity as RunStore writes and reads it through a
// StoreHarness: the columns a Rule reads, and the two that make the rules
// leave an entity alone.
type Entity struct {
	ID           string
	Phase        string
	DesiredState string
	// Operation is the operation in progress, "" for none.
	Operation      string
	LastActivityAt time.Time
	PhaseChangedAt time.Time
	CreatedAt      time.Time
	// DeletedAt is when the entity was deleted; zero if it is not.
	DeletedAt time.Time
}

// StoreHarness tells RunStore how to get stores and how to reach the
// entities in them, which ttl.Store leaves to the system that owns them.
type StoreHarness struct {
	// New returns a new, empty store, isolated from every store New returned
	// before (a fresh table or schema for a SQL store). It registers its own
	// cleanup with t.Cleanup. Required.
	New func(t *testing.T) ttl.Store
	// Create inserts es into st exactly as given (the suite sets every
	// timestamp but DeletedAt), failing t if it cannot. Required.
	Create func(t *testing.T, st ttl.Store, es ...Entity)
	// Get returns the entity id of st, deleted or not, and false if there
	// is none, failing t if it cannot tell. Required.
	Get func(t *testing.T, st ttl.Store, id string) (Entity, bool)
	// Now returns the current time of the store's clock (the database
	// server's now()). Timestamps the suite creates are relative to it. Nil
	// means time.Now, which is fine when the store runs on this machine.
	Now func(t *testing.T) time.Time
}

// RunStore runs the Store conformance suite as subtests of t.
func RunStore(t *testing.T, h StoreHarness) {
	if h.New == nil || h.Create == nil || h.Get == nil {
		t.Fatal("ttltest: StoreHarness.New, Create and Get are required")
	}
	if h.Now == nil {
		h.Now = func(*testing.T) time.Time { return time.Now() }
	}
	s := &storeSuite{h: h}
	t.Run("MergeGreaterWins", s.mergeGreaterWins)
	t.Run("MergeConcurrent", s.mergeConcurrent)
	t.Run("ApplyLastActivity", s.applyLastActivity)
	t.Run("ApplyPhaseChanged", s.applyPhaseChanged)
	t.Run("ApplyCreated", s.applyCreated)
	t.Run("ApplyAfterActivity", s.applyAfterActivity)
	t.Run("ApplyInvalidRule", s.applyInvalidRule)
	t.Run("ApplyConcurrent", s.applyConcurrent)
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

// create inserts e through the harness, its zero LastActivityAt and
// PhaseChangedAt set to its CreatedAt, as a system creating an entity
// would.
func (s *storeSuite) create(t *testing.T, st ttl.Store, e Entity) {
	t.Helper()
	if e.LastActivityAt.IsZero() {
		e.LastActivityAt = e.CreatedAt
	}
	if e.PhaseChangedAt.IsZero() {
		e.PhaseChangedAt = e.CreatedAt
	}
	s.h.Create(t, st, e)
}

func (s *storeSuite) get(t *testing.T, st ttl.Store, id string) Entity {
	t.Helper()
	e, ok := s.h.Get(t, st, id)
	if !ok {
		t.Fatalf("entity %q not found", id)
	}
	return e
}

func mustMerge(t *testing.T, ctx context.Context, st ttl.Store, acts ...ttl.Activity) {
	t.Helper()
	if err := st.Add(ctx, acts); err != nil {
		t.Fatalf("Add(%d activities): %v", len(acts), err)
	}
}

// since returns the timestamp of e that r measures from.
func since(r ttl.Rule, e Entity) time.Time {
	switch r.Since {
	case ttl.SincePhaseChanged:
		return e.PhaseChangedAt
	case ttl.SinceCreated:
		return e.CreatedAt
	}
	return e.LastActivityAt
}

func (s *storeSuite) mustApply(t *testing.T, ctx context.Context, st ttl.Store, r ttl.Rule) []string {
	t.Helper()
	exps, err := st.Apply(ctx, r)
	if err != nil {
		t.Fatalf("Apply(%s): %v", r, err)
	}
	ids := make([]string, len(exps))
	for i, x := range exps {
		ids[i] = x.ID
		if x.Rule != r.String() || x.Then != r.Then {
			t.Errorf("Apply(%s) returned %q with Rule %q, Then %q; want %q, %q", r, x.ID, x.Rule, x.Then, r.String(), r.Then)
		}
		e := s.get(t, st, x.ID)
		sameTime(t, "Apply("+r.String()+") Expiry "+x.ID+".LastActivityAt", x.LastActivityAt, e.LastActivityAt)
		if x.DecidedAt.IsZero() || !x.DecidedAt.After(since(r, e).Add(r.After)) {
			t.Errorf("Apply(%s): %s.DecidedAt = %v, want the store's now, past Since(%d) + %v", r, x.ID, x.DecidedAt, int(r.Since), r.After)
		}
	}
	return ids
}

func sameTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
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

func (s *storeSuite) mergeGreaterWins(t *testing.T) {
	ctx, st, now := s.setup(t)
	base := now.Add(-time.Hour)
	for _, id := range []string{"a", "b", "c"} {
		s.create(t, st, Entity{ID: id, Phase: "RUNNING", CreatedAt: base})
	}
	s.create(t, st, Entity{ID: "gone", Phase: "RUNNING", CreatedAt: base, DeletedAt: now})

	mustMerge(t, ctx, st, ttl.Activity{ID: "a", At: base.Add(30 * time.Minute)})
	sameTime(t, "a after a newer merge", s.get(t, st, "a").LastActivityAt, base.Add(30*time.Minute))
	mustMerge(t, ctx, st, ttl.Activity{ID: "a", At: base.Add(20 * time.Minute)})
	sameTime(t, "a after an older merge", s.get(t, st, "a").LastActivityAt, base.Add(30*time.Minute))

	// One batch holding an id several times, out of order, plus an unknown id.
	mustMerge(t, ctx, st,
		ttl.Activity{ID: "b", At: base.Add(10 * time.Minute)},
		ttl.Activity{ID: "unknown", At: now},
		ttl.Activity{ID: "b", At: base.Add(40 * time.Minute)},
		ttl.Activity{ID: "c", At: base.Add(5 * time.Minute)},
		ttl.Activity{ID: "b", At: base.Add(25 * time.Minute)},
		ttl.Activity{ID: "gone", At: base.Add(15 * time.Minute)},
	)
	sameTime(t, "b", s.get(t, st, "b").LastActivityAt, base.Add(40*time.Minute))
	sameTime(t, "c", s.get(t, st, "c").LastActivityAt, base.Add(5*time.Minute))
	sameTime(t, "a untouched", s.get(t, st, "a").LastActivityAt, base.Add(30*time.Minute))
	sameTime(t, "deleted entity", s.get(t, st, "gone").LastActivityAt, base.Add(15*time.Minute))
	if _, ok := s.h.Get(t, st, "unknown"); ok {
		t.Errorf("Add created an unknown id")
	}

	// An older time than CreatedAt's default never moves time back either.
	mustMerge(t, ctx, st, ttl.Activity{ID: "c", At: base.Add(-time.Hour)})
	sameTime(t, "c after an ancient merge", s.get(t, st, "c").LastActivityAt, base.Add(5*time.Minute))
	mustMerge(t, ctx, st)
}

func (s *storeSuite) mergeConcurrent(t *testing.T) {
	ctx, st, now := s.setup(t)
	const ids, writers, rounds = 20, 4, 10
	base := now.Add(-time.Hour)
	for i := range ids {
		s.create(t, st, Entity{ID: fmt.Sprint("e", i), Phase: "RUNNING", CreatedAt: base})
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
				if err := st.Add(ctx, acts); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent Add: %v", err)
	}
	want := base.Add(time.Duration((rounds-1)*writers+writers-1) * time.Second)
	for i := range ids {
		sameTime(t, fmt.Sprint("e", i), s.get(t, st, fmt.Sprint("e", i)).LastActivityAt, want)
	}
}

// standby is an idle timeout.
var standby = ttl.Rule{Name: "standby", Phase: "RUNNING", Since: ttl.SinceLastActivity, After: 10 * time.Minute, Then: "STANDBY"}

func (s *storeSuite) applyLastActivity(t *testing.T) {
	ctx, st, now := s.setup(t)
	old := now.Add(-11 * time.Minute)
	created := now.Add(-time.Hour)
	ents := []Entity{
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
		s.create(t, st, e)
	}
	sameIDs(t, "Apply(standby)", s.mustApply(t, ctx, st, standby), "idle", "idle2")
	for _, e := range ents {
		want := e.DesiredState
		if e.ID == "idle" || e.ID == "idle2" {
			want = "STANDBY"
		}
		got := s.get(t, st, e.ID)
		if got.DesiredState != want || got.Phase != e.Phase || got.Operation != e.Operation {
			t.Errorf("%s after Apply: {Phase %q, DesiredState %q, Operation %q}, want {%q, %q, %q}",
				e.ID, got.Phase, got.DesiredState, got.Operation, e.Phase, want, e.Operation)
		}
		sameTime(t, e.ID+".LastActivityAt", got.LastActivityAt, e.LastActivityAt)
	}
	sameIDs(t, "second Apply(standby)", s.mustApply(t, ctx, st, standby))
}

func (s *storeSuite) applyPhaseChanged(t *testing.T) {
	ctx, st, now := s.setup(t)
	archive := ttl.Rule{Name: "archive", Phase: "STANDBY", Since: ttl.SincePhaseChanged, After: 30 * time.Minute, Then: "ARCHIVED"}
	created := now.Add(-2 * time.Hour)
	s.create(t, st, Entity{ID: "long", Phase: "STANDBY", CreatedAt: created,
		PhaseChangedAt: now.Add(-31 * time.Minute), LastActivityAt: now.Add(-time.Minute)})
	// Idle for long, but in STANDBY only recently: PhaseChangedAt decides.
	s.create(t, st, Entity{ID: "recent", Phase: "STANDBY", CreatedAt: created,
		PhaseChangedAt: now.Add(-29 * time.Minute), LastActivityAt: created})
	sameIDs(t, "Apply(archive)", s.mustApply(t, ctx, st, archive), "long")
	if got := s.get(t, st, "long").DesiredState; got != "ARCHIVED" {
		t.Errorf("long.DesiredState = %q, want ARCHIVED", got)
	}
	if got := s.get(t, st, "recent").DesiredState; got != "" {
		t.Errorf("recent.DesiredState = %q, want empty", got)
	}
}

func (s *storeSuite) applyCreated(t *testing.T) {
	ctx, st, now := s.setup(t)
	lifetime := ttl.Rule{Name: "lifetime", Phase: "RUNNING", Since: ttl.SinceCreated, After: 8 * time.Hour, Then: "DESTROYED"}
	s.create(t, st, Entity{ID: "ancient", Phase: "RUNNING", CreatedAt: now.Add(-8*time.Hour - time.Minute),
		LastActivityAt: now, PhaseChangedAt: now.Add(-time.Minute)})
	s.create(t, st, Entity{ID: "young", Phase: "RUNNING", CreatedAt: now.Add(-8*time.Hour + time.Minute),
		LastActivityAt: now.Add(-8*time.Hour + time.Minute)})
	sameIDs(t, "Apply(lifetime)", s.mustApply(t, ctx, st, lifetime), "ancient")
}

// applyAfterActivity is "activity lands before the tick's sync":
// merged activity keeps an entity that was about to expire.
func (s *storeSuite) applyAfterActivity(t *testing.T) {
	ctx, st, now := s.setup(t)
	for _, id := range []string{"active", "idle"} {
		s.create(t, st, Entity{ID: id, Phase: "RUNNING", CreatedAt: now.Add(-11 * time.Minute)})
	}
	mustMerge(t, ctx, st, ttl.Activity{ID: "active", At: now.Add(-time.Minute)})
	sameIDs(t, "Apply(standby)", s.mustApply(t, ctx, st, standby), "idle")
	if got := s.get(t, st, "active"); got.DesiredState != "" {
		t.Errorf("active.DesiredState = %q, want empty", got.DesiredState)
	}
}

func (s *storeSuite) applyInvalidRule(t *testing.T) {
	ctx, st, now := s.setup(t)
	s.create(t, st, Entity{ID: "idle", Phase: "RUNNING", CreatedAt: now.Add(-time.Hour)})
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
	if got := s.get(t, st, "idle").DesiredState; got != "" {
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
		s.create(t, st, Entity{ID: id, Phase: "RUNNING", CreatedAt: now.Add(-time.Hour)})
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
			exps, err := st.Apply(ctx, standby)
			if err != nil {
				t.Errorf("concurrent Apply: %v", err)
			}
			mu.Lock()
			for _, x := range exps {
				got = append(got, x.ID)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	sameIDs(t, "concurrent Apply (all appliers together)", got, want...)
}
