package entities

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/ttl"
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
	got, err := s.CreateMany(ctx, []Entity{e})
	if err != nil {
		return Entity{}, err
	}
	return got[0], nil
}

// CreateMany inserts es, all or none; see Store.CreateMany.
func (s *MemoryStore) CreateMany(ctx context.Context, es []Entity) ([]Entity, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	seen := make(map[string]bool, len(es))
	for _, e := range es {
		switch {
		case e.ID == "":
			return nil, Invalid("entities: entity ID is empty")
		case e.Phase == "":
			return nil, Invalid("entities: entity %q: Phase is empty", e.ID)
		case seen[e.ID]:
			return nil, Invalid("entities: entity %q: ID given twice", e.ID)
		}
		seen[e.ID] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range es {
		if _, ok := s.m[e.ID]; ok {
			return nil, fmt.Errorf("entities: entity %q: %w", e.ID, ErrExists)
		}
	}
	now := s.clock.Now()
	out := make([]Entity, len(es))
	for i, e := range es {
		if e.CreatedAt.IsZero() {
			e.CreatedAt = now
		}
		if e.LastActivityAt.IsZero() {
			e.LastActivityAt = e.CreatedAt
		}
		if e.PhaseChangedAt.IsZero() {
			e.PhaseChangedAt = e.CreatedAt
		}
		stored := e
		s.m[e.ID] = &stored
		out[i] = e
	}
	return out, nil
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
		return Entity{}, fmt.Errorf("entities: entity %q: %w", id, ErrNotFound)
	}
	return *e, nil
}

// Update applies u to one entity; see Store.Update.
func (s *MemoryStore) Update(ctx context.Context, id string, u Update) (Entity, error) {
	if err := ctx.Err(); err != nil {
		return Entity{}, context.Cause(ctx)
	}
	if err := u.Validate(); err != nil {
		return Entity{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[id]
	if !ok {
		return Entity{}, fmt.Errorf("entities: entity %q: %w", id, ErrNotFound)
	}
	if !u.Matches(*e) {
		return Entity{}, fmt.Errorf("entities: entity %q: {Operation %q, Phase %q, DesiredState %q, LastActivityAt %v} is not as expected: %w",
			id, e.Operation, e.Phase, e.DesiredState, e.LastActivityAt, ErrConflict)
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
	if u.ClearDesiredState {
		e.DesiredState = ""
	}
	if u.Delete && e.DeletedAt.IsZero() {
		e.DeletedAt = now
	}
	return *e, nil
}

// Add merges acts, greatest wins; see ttl.Store.Add.
func (s *MemoryStore) Add(ctx context.Context, acts []ttl.Activity) error {
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

// List returns the entities f selects, by ID; see Store.List.
func (s *MemoryStore) List(ctx context.Context, f Filter) ([]Entity, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	if f.Limit == 0 {
		f.Limit = ListLimit
	}
	s.mu.Lock()
	var out []Entity
	for id, e := range s.m {
		if (f.After == "" || id > f.After) && f.Matches(*e) {
			out = append(out, *e)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Entity) int { return strings.Compare(a.ID, b.ID) })
	return out[:min(len(out), f.Limit)], nil
}

// Apply applies r at the store's now; see ttl.Store.Apply.
func (s *MemoryStore) Apply(ctx context.Context, r ttl.Rule) ([]ttl.Expiry, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	var out []ttl.Expiry
	for id, e := range s.m {
		if Matches(r, *e, now) {
			e.DesiredState = r.Then
			out = append(out, ttl.Expiry{ID: id, Rule: r.String(), Then: r.Then, LastActivityAt: e.LastActivityAt, DecidedAt: now})
		}
	}
	return out, nil
}

// Len returns the number of entities, deleted ones included.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

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
