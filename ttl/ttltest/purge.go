package ttltest

import (
	"errors"
	"testing"

	"github.com/ttlkit/ttlkit/ttl"
)

// purge checks ttl.Purger on stores that implement it: only deleted
// entities go, unknown ids are ignored, a purged entity is unknown and its
// ID can be created again.
func (s *storeSuite) purge(t *testing.T) {
	ctx, st, now := s.setup(t)
	p, ok := st.(ttl.Purger)
	if !ok {
		t.Skip("ttltest: the store does not implement ttl.Purger")
	}
	for _, id := range []string{"live", "gone1", "gone2"} {
		mustCreate(t, ctx, st, ttl.Entity{ID: id, Phase: "RUNNING", CreatedAt: now})
	}
	for _, id := range []string{"gone1", "gone2"} {
		if _, err := st.Update(ctx, id, ttl.Update{Delete: true}); err != nil {
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
	if _, err := st.Get(ctx, "gone1"); !errors.Is(err, ttl.ErrNotFound) {
		t.Errorf("Get of a purged entity: %v, want ErrNotFound", err)
	}
	all, err := st.List(ctx, ttl.Filter{Deleted: true})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var ids []string
	for _, e := range all {
		ids = append(ids, e.ID)
	}
	sameIDs(t, "List(Deleted) after Purge", ids, "live")
	mustCreate(t, ctx, st, ttl.Entity{ID: "gone1", Phase: "RUNNING", CreatedAt: now})
	if n, err := p.Purge(ctx, []string{"gone1"}); err != nil || n != 0 {
		t.Errorf("Purge of a live entity: %d, %v; want 0, nil", n, err)
	}
	if n, err := p.Purge(ctx, nil); err != nil || n != 0 {
		t.Errorf("Purge(nil): %d, %v; want 0, nil", n, err)
	}
}
