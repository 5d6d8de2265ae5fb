package entitiestest

import (
	"errors"
	"testing"

	"github.com/ttlkit/ttlkit/examples/entities"
)

// purge checks Store.Purge: only deleted
// entities go, unknown ids are ignored, a purged entity is unknown and its
// ID can be created again.
func (s *storeSuite) purge(t *testing.T) {
	ctx, st, now := s.setup(t)
	p := st
	for _, id := range []string{"live", "gone1", "gone2"} {
		mustCreate(t, ctx, st, entities.Entity{ID: id, Phase: "RUNNING", CreatedAt: now})
	}
	for _, id := range []string{"gone1", "gone2"} {
		if _, err := st.Update(ctx, id, entities.Update{Delete: true}); err != nil {
			t.Fatalf("Update(%s, Delete): %v", id, err)
		}
	}
	n, err := p.Purge(ctx, []string{"live", "gone1", "gone2", "unknown"})
	if err != nil {
		t.Fatalf("Purge: %v", err)
	}
	if n != 2 {
		t.Errorf("Purge removed %d entities, want 2 (the deleted ones)", n)
	}
	mustGet(t, ctx, st, "live")
	if _, err := st.Get(ctx, "gone1"); !errors.Is(err, entities.ErrNotFound) {
		t.Errorf("Get of a purged entity: %v, want ErrNotFound", err)
	}
	all, err := st.List(ctx, entities.Filter{Deleted: true})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var ids []string
	for _, e := range all {
		ids = append(ids, e.ID)
	}
	sameIDs(t, "List(Deleted) after Purge", ids, "live")
	mustCreate(t, ctx, st, entities.Entity{ID: "gone1", Phase: "RUNNING", CreatedAt: now})
	if n, err := p.Purge(ctx, []string{"gone1"}); err != nil || n != 0 {
		t.Errorf("Purge of a live entity: %d, %v; want 0, nil", n, err)
	}
	if n, err := p.Purge(ctx, nil); err != nil || n != 0 {
		t.Errorf("Purge(nil): %d, %v; want 0, nil", n, err)
	}
}
