// Package entitiestest is the suite that every entities.Store passes.
package entitiestest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/ttltest"
)

// StoreHarness tells RunStore how to get stores.
type StoreHarness struct {
	// New returns a new, empty store, isolated from every store New returned
	// before (a fresh table or schema for a SQL store). It registers its own
	// cleanup with t.Cleanup. Required.
	New func(t *testing.T) entities.Store
	// Now returns the current time of the store's clock (the database
	// server's now()). Timestamps the suite creates are relative to it. Nil
	// means time.Now, which is fine when the store runs on this machine.
	Now func(t *testing.T) time.Time
}

// tolerance bounds how far "the store's now" may be from the suite's
// reference time: clock skew plus the time the suite takes.
const tolerance = time.Minute

// RunStore runs the entities.Store suite as subtests of t: the creates,
// reads and compare-and-set writes, and ttltest's Store suite (the
// activity merges and the rules) through them.
func RunStore(t *testing.T, h StoreHarness) {
	if h.New == nil {
		t.Fatal("entitiestest: StoreHarness.New is nil")
	}
	if h.Now == nil {
		h.Now = func(*testing.T) time.Time { return time.Now() }
	}
	s := &storeSuite{h: h}
	t.Run("CreateGet", s.createGet)
	t.Run("CreateDefaults", s.createDefaults)
	t.Run("CreateInvalid", s.createInvalid)
	t.Run("TTL", func(t *testing.T) { ttltest.RunStore(t, TTLHarness(h.New, h.Now)) })
	t.Run("ApplyAfterOperation", s.applyAfterOperation)
	t.Run("UpdateCompareAndSet", s.updateCompareAndSet)
	t.Run("UpdatePhase", s.updatePhase)
	t.Run("UpdateDelete", s.updateDelete)
	t.Run("CreateMany", s.createMany)
	t.Run("UpdateExpect", s.updateExpect)
	t.Run("UpdateClearDesiredState", s.updateClearDesiredState)
	t.Run("List", s.list)
	t.Run("Purge", s.purge)
}

type storeSuite struct{ h StoreHarness }

// setup returns a fresh store and the reference time, truncated to the
// millisecond so that every store keeps it exactly.
func (s *storeSuite) setup(t *testing.T) (context.Context, entities.Store, time.Time) {
	t.Helper()
	st := s.h.New(t)
	if st == nil {
		t.Fatal("entitiestest: StoreHarness.New returned nil")
	}
	return context.Background(), st, s.h.Now(t).Truncate(time.Millisecond)
}

func mustCreate(t *testing.T, ctx context.Context, st entities.Store, e entities.Entity) entities.Entity {
	t.Helper()
	got, err := st.Create(ctx, e)
	if err != nil {
		t.Fatalf("Create(%q): %v", e.ID, err)
	}
	return got
}

func mustGet(t *testing.T, ctx context.Context, st entities.Store, id string) entities.Entity {
	t.Helper()
	e, err := st.Get(ctx, id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	return e
}

func mustMerge(t *testing.T, ctx context.Context, st entities.Store, acts ...ttl.Activity) {
	t.Helper()
	if err := st.Add(ctx, acts); err != nil {
		t.Fatalf("Add(%d activities): %v", len(acts), err)
	}
}

func mustApply(t *testing.T, ctx context.Context, st entities.Store, r ttl.Rule) []string {
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
		e := mustGet(t, ctx, st, x.ID)
		sameTime(t, "Apply("+r.String()+") Expiry "+x.ID+".LastActivityAt", x.LastActivityAt, e.LastActivityAt)
		if x.DecidedAt.IsZero() || !x.DecidedAt.After(entities.Since(r.Since, e).Add(r.After)) {
			t.Errorf("Apply(%s): %s.DecidedAt = %v, want the store's now, past Since(%d) + %v", r, x.ID, x.DecidedAt, int(r.Since), r.After)
		}
	}
	return ids
}

// sameEntity reports the fields where got differs from want.
func sameEntity(t *testing.T, got, want entities.Entity) {
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
	want := entities.Entity{
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

	deleted := entities.Entity{ID: "ws-2", Phase: "ARCHIVED", CreatedAt: now.Add(-time.Hour),
		LastActivityAt: now.Add(-time.Hour), PhaseChangedAt: now.Add(-time.Hour), DeletedAt: now.Add(-time.Minute)}
	mustCreate(t, ctx, st, deleted)
	sameEntity(t, mustGet(t, ctx, st, "ws-2"), deleted)

	if _, err := st.Create(ctx, entities.Entity{ID: "ws-1", Phase: "STANDBY"}); !errors.Is(err, entities.ErrExists) {
		t.Errorf("Create of an existing id: err = %v, want ErrExists", err)
	}
	if _, err := st.Create(ctx, entities.Entity{ID: "ws-2", Phase: "RUNNING"}); !errors.Is(err, entities.ErrExists) {
		t.Errorf("Create of a deleted id: err = %v, want ErrExists", err)
	}
	sameEntity(t, mustGet(t, ctx, st, "ws-1"), want)
	if _, err := st.Get(ctx, "missing"); !errors.Is(err, entities.ErrNotFound) {
		t.Errorf("Get(missing): err = %v, want ErrNotFound", err)
	}
}

func (s *storeSuite) createDefaults(t *testing.T) {
	ctx, st, _ := s.setup(t)
	before := s.h.Now(t)
	got := mustCreate(t, ctx, st, entities.Entity{ID: "new", Phase: "RUNNING"})
	after := s.h.Now(t)
	nearNow(t, "CreatedAt", got.CreatedAt, before, after)
	sameTime(t, "LastActivityAt", got.LastActivityAt, got.CreatedAt)
	sameTime(t, "PhaseChangedAt", got.PhaseChangedAt, got.CreatedAt)
	if !got.DeletedAt.IsZero() {
		t.Errorf("DeletedAt = %v, want zero", got.DeletedAt)
	}
	sameEntity(t, mustGet(t, ctx, st, "new"), got)

	created := before.Add(-time.Hour).Truncate(time.Millisecond)
	got = mustCreate(t, ctx, st, entities.Entity{ID: "old", Phase: "RUNNING", CreatedAt: created})
	sameTime(t, "LastActivityAt", got.LastActivityAt, created)
	sameTime(t, "PhaseChangedAt", got.PhaseChangedAt, created)
}

func (s *storeSuite) createInvalid(t *testing.T) {
	ctx, st, _ := s.setup(t)
	if _, err := st.Create(ctx, entities.Entity{Phase: "RUNNING"}); !errors.Is(err, ttl.ErrInvalid) {
		t.Errorf("Create without ID: err = %v, want ErrInvalid", err)
	}
	if _, err := st.Create(ctx, entities.Entity{ID: "x"}); !errors.Is(err, ttl.ErrInvalid) {
		t.Errorf("Create without Phase: err = %v, want ErrInvalid", err)
	}
	if _, err := st.Get(ctx, "x"); !errors.Is(err, entities.ErrNotFound) {
		t.Errorf("Get after invalid Create: err = %v, want ErrNotFound", err)
	}
}

// standby is an idle timeout.
var standby = ttl.Rule{Name: "standby", Phase: "RUNNING", Since: ttl.SinceLastActivity, After: 10 * time.Minute, Then: "STANDBY"}

// applyAfterOperation: an entity in an operation is left alone by the
// rules (ttltest's ApplyLastActivity) until the operation ends, then it
// expires like any other.
func (s *storeSuite) applyAfterOperation(t *testing.T) {
	ctx, st, now := s.setup(t)
	created := now.Add(-time.Hour)
	mustCreate(t, ctx, st, entities.Entity{ID: "busy", Phase: "RUNNING", Operation: "STARTING",
		CreatedAt: created, PhaseChangedAt: created, LastActivityAt: now.Add(-11 * time.Minute)})
	sameIDs(t, "Apply(standby) during the operation", mustApply(t, ctx, st, standby))
	if _, err := st.Update(ctx, "busy", entities.Update{ExpectOperation: "STARTING"}); err != nil {
		t.Fatalf("Update(busy): %v", err)
	}
	sameIDs(t, "Apply(standby) after the operation ended", mustApply(t, ctx, st, standby), "busy")
}

func (s *storeSuite) updateCompareAndSet(t *testing.T) {
	ctx, st, now := s.setup(t)
	orig := mustCreate(t, ctx, st, entities.Entity{ID: "ws", Phase: "RUNNING", CreatedAt: now.Add(-time.Hour)})

	if _, err := st.Update(ctx, "ws", entities.Update{ExpectOperation: "STOPPING", Phase: "STANDBY"}); !errors.Is(err, entities.ErrConflict) {
		t.Errorf("Update with a wrong ExpectOperation: err = %v, want ErrConflict", err)
	}
	sameEntity(t, mustGet(t, ctx, st, "ws"), orig)

	got, err := st.Update(ctx, "ws", entities.Update{Operation: "STOPPING"})
	if err != nil {
		t.Fatalf("Update(begin STOPPING): %v", err)
	}
	want := orig
	want.Operation = "STOPPING"
	sameEntity(t, got, want)
	sameEntity(t, mustGet(t, ctx, st, "ws"), want)

	// A second controller that still believes no operation runs loses.
	if _, err := st.Update(ctx, "ws", entities.Update{Operation: "STARTING"}); !errors.Is(err, entities.ErrConflict) {
		t.Errorf("second Update from operation \"\": err = %v, want ErrConflict", err)
	}
	sameEntity(t, mustGet(t, ctx, st, "ws"), want)

	// DesiredState "" keeps, a value sets.
	got, err = st.Update(ctx, "ws", entities.Update{ExpectOperation: "STOPPING", Operation: "STOPPING", DesiredState: "STANDBY"})
	if err != nil {
		t.Fatalf("Update(DesiredState): %v", err)
	}
	want.DesiredState = "STANDBY"
	sameEntity(t, got, want)
	got, err = st.Update(ctx, "ws", entities.Update{ExpectOperation: "STOPPING", Operation: "STOPPING"})
	if err != nil {
		t.Fatalf("Update(nothing): %v", err)
	}
	sameEntity(t, got, want)

	if _, err := st.Update(ctx, "missing", entities.Update{}); !errors.Is(err, entities.ErrNotFound) {
		t.Errorf("Update(missing): err = %v, want ErrNotFound", err)
	}
}

func (s *storeSuite) updatePhase(t *testing.T) {
	ctx, st, now := s.setup(t)
	orig := mustCreate(t, ctx, st, entities.Entity{ID: "ws", Phase: "RUNNING", CreatedAt: now.Add(-time.Hour)})

	// Same phase: PhaseChangedAt is kept (SQL's CASE WHEN phase != :new_phase).
	got, err := st.Update(ctx, "ws", entities.Update{Phase: "RUNNING"})
	if err != nil {
		t.Fatalf("Update(same phase): %v", err)
	}
	sameEntity(t, got, orig)

	before := s.h.Now(t)
	got, err = st.Update(ctx, "ws", entities.Update{Phase: "STANDBY"})
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
	mustCreate(t, ctx, st, entities.Entity{ID: "ws", Phase: "RUNNING", CreatedAt: now.Add(-time.Hour)})
	before := s.h.Now(t)
	got, err := st.Update(ctx, "ws", entities.Update{Delete: true})
	after := s.h.Now(t)
	if err != nil {
		t.Fatalf("Update(Delete): %v", err)
	}
	nearNow(t, "DeletedAt", got.DeletedAt, before, after)
	again, err := st.Update(ctx, "ws", entities.Update{Delete: true})
	if err != nil {
		t.Fatalf("second Update(Delete): %v", err)
	}
	sameTime(t, "DeletedAt after a second delete", again.DeletedAt, got.DeletedAt)
	sameEntity(t, mustGet(t, ctx, st, "ws"), got)
	sameIDs(t, "Apply(standby) on a deleted entity", mustApply(t, ctx, st, standby))
}

func (s *storeSuite) createMany(t *testing.T) {
	ctx, st, now := s.setup(t)
	if got, err := st.CreateMany(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("CreateMany(nil) = %v, %v; want nothing", got, err)
	}
	want := []entities.Entity{
		{ID: "b", Phase: "RUNNING", CreatedAt: now.Add(-time.Hour)},
		{ID: "a", Phase: "STANDBY", DesiredState: "ARCHIVED", Operation: "STOPPING", CreatedAt: now.Add(-2 * time.Hour),
			LastActivityAt: now.Add(-time.Minute), PhaseChangedAt: now.Add(-30 * time.Minute)},
		{ID: "c", Phase: "RUNNING"},
	}
	before := s.h.Now(t)
	got, err := st.CreateMany(ctx, want)
	after := s.h.Now(t)
	if err != nil {
		t.Fatalf("CreateMany: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("CreateMany returned %d entities, want %d", len(got), len(want))
	}
	want[0].LastActivityAt, want[0].PhaseChangedAt = want[0].CreatedAt, want[0].CreatedAt
	nearNow(t, "c.CreatedAt", got[2].CreatedAt, before, after)
	want[2].CreatedAt, want[2].LastActivityAt, want[2].PhaseChangedAt = got[2].CreatedAt, got[2].CreatedAt, got[2].CreatedAt
	for i := range want {
		sameEntity(t, got[i], want[i])
		sameEntity(t, mustGet(t, ctx, st, want[i].ID), want[i])
	}

	// All or nothing.
	for _, c := range []struct {
		what string
		es   []entities.Entity
		want error
	}{
		{"an existing id", []entities.Entity{{ID: "d", Phase: "RUNNING"}, {ID: "a", Phase: "RUNNING"}}, entities.ErrExists},
		{"an id twice", []entities.Entity{{ID: "d", Phase: "RUNNING"}, {ID: "d", Phase: "STANDBY"}}, ttl.ErrInvalid},
		{"no Phase", []entities.Entity{{ID: "d", Phase: "RUNNING"}, {ID: "e"}}, ttl.ErrInvalid},
		{"no ID", []entities.Entity{{ID: "d", Phase: "RUNNING"}, {Phase: "RUNNING"}}, ttl.ErrInvalid},
	} {
		if _, err := st.CreateMany(ctx, c.es); !errors.Is(err, c.want) {
			t.Errorf("CreateMany with %s: err = %v, want %v", c.what, err, c.want)
		}
		if _, err := st.Get(ctx, "d"); !errors.Is(err, entities.ErrNotFound) {
			t.Errorf("CreateMany with %s created d: Get err = %v", c.what, err)
		}
	}
	sameEntity(t, mustGet(t, ctx, st, "a"), want[1])

	// Many at once.
	many := make([]entities.Entity, 2500)
	for i := range many {
		many[i] = entities.Entity{ID: fmt.Sprintf("m%04d", i), Phase: "RUNNING", CreatedAt: now.Add(-time.Duration(i) * time.Second)}
	}
	got, err = st.CreateMany(ctx, many)
	if err != nil {
		t.Fatalf("CreateMany(2500): %v", err)
	}
	for _, i := range []int{0, 1234, 2499} {
		if got[i].ID != many[i].ID {
			t.Errorf("CreateMany(2500)[%d].ID = %q, want %q", i, got[i].ID, many[i].ID)
		}
		sameTime(t, many[i].ID+".LastActivityAt", mustGet(t, ctx, st, many[i].ID).LastActivityAt, many[i].CreatedAt)
	}
}

func (s *storeSuite) updateExpect(t *testing.T) {
	ctx, st, now := s.setup(t)
	last := now.Add(-11 * time.Minute)
	orig := mustCreate(t, ctx, st, entities.Entity{ID: "ws", Phase: "RUNNING", CreatedAt: now.Add(-time.Hour), LastActivityAt: last})
	exps := mustApply(t, ctx, st, standby)
	sameIDs(t, "Apply(standby)", exps, "ws")
	orig.DesiredState = "STANDBY"

	for _, c := range []struct {
		what string
		u    entities.Update
	}{
		{"ExpectPhase", entities.Update{ExpectPhase: "STANDBY", Operation: "STOPPING"}},
		{"ExpectDesiredState", entities.Update{ExpectDesiredState: "ARCHIVED", Operation: "STOPPING"}},
		{"ExpectLastActivityAt", entities.Update{ExpectLastActivityAt: last.Add(-time.Millisecond), Operation: "STOPPING"}},
		{"ExpectOperation", entities.Update{ExpectOperation: "STARTING", ExpectPhase: "RUNNING", Operation: "STOPPING"}},
	} {
		if _, err := st.Update(ctx, "ws", c.u); !errors.Is(err, entities.ErrConflict) {
			t.Errorf("Update with a wrong %s: err = %v, want ErrConflict", c.what, err)
		}
		sameEntity(t, mustGet(t, ctx, st, "ws"), orig)
	}

	// Activity merged after the decision: a controller that acts on the
	// decision's LastActivityAt loses, and keeps the workspace instead.
	decided := entities.Update{ExpectPhase: "RUNNING", ExpectDesiredState: "STANDBY", ExpectLastActivityAt: last, Operation: "STOPPING"}
	mustMerge(t, ctx, st, ttl.Activity{ID: "ws", At: now.Add(-time.Second)})
	if _, err := st.Update(ctx, "ws", decided); !errors.Is(err, entities.ErrConflict) {
		t.Errorf("Update expecting the decision's LastActivityAt after newer activity: err = %v, want ErrConflict", err)
	}
	// Without newer activity it goes through.
	decided.ExpectLastActivityAt = now.Add(-time.Second)
	got, err := st.Update(ctx, "ws", decided)
	if err != nil {
		t.Fatalf("Update with every expectation met: %v", err)
	}
	want := orig
	want.Operation = "STOPPING"
	want.LastActivityAt = now.Add(-time.Second)
	sameEntity(t, got, want)
}

func (s *storeSuite) updateClearDesiredState(t *testing.T) {
	ctx, st, now := s.setup(t)
	mustCreate(t, ctx, st, entities.Entity{ID: "ws", Phase: "RUNNING", CreatedAt: now.Add(-time.Hour)})
	sameIDs(t, "Apply(standby)", mustApply(t, ctx, st, standby), "ws")
	if _, err := st.Update(ctx, "ws", entities.Update{ClearDesiredState: true, DesiredState: "RUNNING"}); !errors.Is(err, ttl.ErrInvalid) {
		t.Errorf("Update with DesiredState and ClearDesiredState: err = %v, want ErrInvalid", err)
	}
	if got := mustGet(t, ctx, st, "ws").DesiredState; got != "STANDBY" {
		t.Errorf("DesiredState after an invalid update = %q, want STANDBY", got)
	}
	// The controller keeps the workspace: it clears the decision, and the
	// rule may decide again later.
	got, err := st.Update(ctx, "ws", entities.Update{ExpectDesiredState: "STANDBY", ClearDesiredState: true})
	if err != nil {
		t.Fatalf("Update(ClearDesiredState): %v", err)
	}
	if got.DesiredState != "" {
		t.Errorf("DesiredState after ClearDesiredState = %q, want empty", got.DesiredState)
	}
	sameIDs(t, "Apply(standby) after the decision was cleared", mustApply(t, ctx, st, standby), "ws")
}

func (s *storeSuite) list(t *testing.T) {
	ctx, st, now := s.setup(t)
	if _, err := st.List(ctx, entities.Filter{Limit: -1}); !errors.Is(err, ttl.ErrInvalid) {
		t.Errorf("List(Limit -1): err = %v, want ErrInvalid", err)
	}
	if got, err := st.List(ctx, entities.Filter{}); err != nil || len(got) != 0 {
		t.Errorf("List of an empty store = %v, %v", got, err)
	}
	created := now.Add(-time.Hour)
	var es []entities.Entity
	for i := range 30 {
		e := entities.Entity{ID: fmt.Sprintf("ws-%02d", (i*7)%30), Phase: "RUNNING", CreatedAt: created}
		switch i % 3 {
		case 1:
			e.Phase, e.DesiredState = "RUNNING", "STANDBY"
		case 2:
			e.Phase, e.DesiredState = "STANDBY", "ARCHIVED"
		}
		if i%10 == 9 {
			e.DeletedAt = now.Add(-time.Minute)
		}
		es = append(es, e)
	}
	if _, err := st.CreateMany(ctx, es); err != nil {
		t.Fatalf("CreateMany: %v", err)
	}
	ids := func(f entities.Filter) []string {
		t.Helper()
		var out []string
		for _, e := range es {
			if f.Matches(e) {
				out = append(out, e.ID)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, f := range []entities.Filter{
		{},
		{Deleted: true},
		{Phase: "RUNNING"},
		{DesiredState: "STANDBY"},
		{HasDesiredState: true},
		{Phase: "RUNNING", HasDesiredState: true, Deleted: true},
		{Phase: "STANDBY", DesiredState: "ARCHIVED"},
		{Phase: "NONE"},
	} {
		want := ids(f)
		// One page, then pages of 4.
		got, err := st.List(ctx, f)
		if err != nil {
			t.Fatalf("List(%+v): %v", f, err)
		}
		var gotIDs []string
		for _, e := range got {
			gotIDs = append(gotIDs, e.ID)
		}
		if !slices.Equal(gotIDs, want) {
			t.Errorf("List(%+v) = %q, want %q (in ID order)", f, gotIDs, want)
		}
		var paged []string
		page := f
		page.Limit = 4
		for round := 0; ; round++ {
			if round > 10 {
				t.Fatalf("List(%+v) paging does not end", f)
			}
			got, err := st.List(ctx, page)
			if err != nil {
				t.Fatalf("List(%+v): %v", page, err)
			}
			if len(got) > 4 {
				t.Fatalf("List(%+v) returned %d entities", page, len(got))
			}
			for _, e := range got {
				paged = append(paged, e.ID)
			}
			if len(got) < 4 {
				break
			}
			page.After = got[len(got)-1].ID
		}
		if !slices.Equal(paged, want) {
			t.Errorf("List(%+v) in pages of 4 = %q, want %q", f, paged, want)
		}
	}
	got, err := st.List(ctx, entities.Filter{DesiredState: "ARCHIVED", Deleted: true, Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("List(ARCHIVED, Limit 1) = %v, %v", got, err)
	}
	for _, e := range es {
		if e.ID == got[0].ID {
			sameEntity(t, got[0], entities.Entity{ID: e.ID, Phase: e.Phase, DesiredState: e.DesiredState,
				LastActivityAt: created, PhaseChangedAt: created, CreatedAt: created, DeletedAt: e.DeletedAt})
		}
	}
}
