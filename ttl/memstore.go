package ttl

import (
	"context"
	"fmt"
	"sync"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// MemoryStoreOptions configures a MemoryStore. The zero value is ready to use.
type MemoryStoreOptions struct {
	// Clock is the store's clock, its "now" for Apply, Create and Update.
	// Nil means real time.
	Clock clock.Clock
}

// MemoryStore is an in-process Store: entities in a map behind a mutex.
// Every method is one critical section, which gives Apply the atomicity a
// SQL store gets from one UPDATE statement. The zero value is not usable;
// call NewMemoryStore.
type MemoryStore struct {
	clock clock.Clock

	mu sync.Mutex
	m  map[string]*Entity
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore(opts MemoryStoreOptions) *MemoryStore {
	c := opts.Clock
	if c == nil {
		c = clock.New()
	}
	return &MemoryStore{clock: c, m: make(map[string]*Entity)}
}

// Create inserts e; see Store.Create.
func (s *MemoryStore) Create(ctx context.Context, e Entity) (Entity, error) {
	if err := ctx.Err(); err != nil {
		return Entity{}, context.Cause(ctx)
	}
	if e.ID == "" {
		return Entity{}, errs.Invalid(ErrInvalid, "ttl: entity ID is empty")
	}
	if e.Phase == "" {
		return Entity{}, errs.Invalid(ErrInvalid, "ttl: entity %q: Phase is empty", e.ID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[e.ID]; ok {
		return Entity{}, fmt.Errorf("ttl: entity %q: %w", e.ID, ErrExists)
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = s.clock.Now()
	}
	if e.LastActivityAt.IsZero() {
		e.LastActivityAt = e.CreatedAt
	}
	if e.PhaseChangedAt.IsZero() {
		e.PhaseChangedAt = e.CreatedAt
	}
	stored := e
	s.m[e.ID] = &stored
	return e, nil
}

// Get returns the entity with the given id; see Store.Get.
func (s *MemoryStore) Get(ctx context.Context, id string) (Entity, error) {
	if err := ctx.Err(); err != nil {
		return Entity{}, context.Cause(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[id]
	if !ok {
		return Entity{}, fmt.Errorf("ttl: entity %q: %w", id, ErrNotFound)
	}
	return *e, nil
}

// Update applies u to one entity; see Store.Update.
func (s *MemoryStore) Update(ctx context.Context, id string, u Update) (Entity, error) {
	if err := ctx.Err(); err != nil {
		return Entity{}, context.Cause(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[id]
	if !ok {
		return Entity{}, fmt.Errorf("ttl: entity %q: %w", id, ErrNotFound)
	}
	if e.Operation != u.ExpectOperation {
		return Entity{}, fmt.Errorf("ttl: entity %q: operation is %q, expected %q: %w",
			id, e.Operation, u.ExpectOperation, ErrConflict)
	}
	now := s.clock.Now()
	e.Operation = u.Operation
	if u.Phase != "" && u.Phase != e.Phase {
		e.Phase = u.Phase
		e.PhaseChangedAt = now
	}
	if u.DesiredState != "" {
		e.DesiredState = u.DesiredState
	}
	if u.Delete && e.DeletedAt.IsZero() {
		e.DeletedAt = now
	}
	return *e, nil
}

// MergeActivity merges acts, greatest wins; see Store.MergeActivity.
func (s *MemoryStore) MergeActivity(ctx context.Context, acts []Activity) error {
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range acts {
		if e, ok := s.m[a.ID]; ok && a.At.After(e.LastActivityAt) {
			e.LastActivityAt = a.At
		}
	}
	return nil
}

// Apply applies r at the store's now; see Store.Apply.
func (s *MemoryStore) Apply(ctx context.Context, r Rule) ([]string, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	var ids []string
	for id, e := range s.m {
		if r.Matches(*e, now) {
			e.DesiredState = r.Then
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Len returns the number of entities, deleted ones included.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
