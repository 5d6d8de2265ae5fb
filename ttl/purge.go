package ttl

import "context"

// Purger is implemented by a Store that can forget deleted entities for
// good. Deletion is soft (Update.Delete keeps the record, with DeletedAt),
// so a system that creates an entity per resource — one per sandbox, per
// lease — would keep every record forever; it purges an entity once it has
// no more use for its record. MemoryStore, ttl/redisttl and ttl/pgttl
// implement it; ttltest.RunStore checks it on stores that do.
type Purger interface {
	// Purge removes, in one atomic step, the entities among ids that are
	// deleted, and returns how many it removed. Entities that are not
	// deleted, and unknown ids, are left alone. A purged entity is unknown
	// afterwards: Get fails with ErrNotFound and its ID can be created
	// again.
	Purge(ctx context.Context, ids []string) (int, error)
}

var _ Purger = (*MemoryStore)(nil)

// Purge removes the deleted entities among ids; see Purger.
func (s *MemoryStore) Purge(ctx context.Context, ids []string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, context.Cause(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, id := range ids {
		if e, ok := s.m[id]; ok && !e.DeletedAt.IsZero() {
			delete(s.m, id)
			n++
		}
	}
	return n, nil
}
