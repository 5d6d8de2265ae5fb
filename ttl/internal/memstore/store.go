package memstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/benbjohnson/clock"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/ttl"
)

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// Clock is the store's clock, its "now" for Apply, Create and Update.
	// Nil means real time.
	Clock clock.Clock
}

// Store is an in-process ttl.Store: entities in a map behind a mutex.
// Every method is one critical section, which gives Apply the atomicity a
// SQL store gets from one UPDATE statement. The zero value is not usable;
// call New.
type Store struct {
	clock clock.Clock

	mu sync.Mutex
	m  map[string]*Entity
}

var _ ttl.Store = (*Store)(nil)

// New returns an empty Store.
func New(opts Options) *Store {
	c := opts.Clock
	if c == nil {
		c = clock.New()
	}
	return &Store{clock: c, m: make(map[string]*Entity)}
}

// Create inserts e.
func (s *Store) Create(ctx context.Context, e Entity) (Entity, error) {
	got, err := s.CreateMany(ctx, []Entity{e})
	if err != nil {
		return Entity{}, err
	}
	return got[0], nil
}

// CreateMany inserts es, all or none.
func (s *Store) CreateMany(ctx context.Context, es []Entity) ([]Entity, error) {
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	seen := make(map[string]bool, len(es))
	for _, e := range es {
		switch {
		case e.ID == "":
			return nil, errs.Invalid(ttl.ErrInvalid, "memstore: entity ID is empty")
		case e.Phase == "":
			return nil, errs.Invalid(ttl.ErrInvalid, "memstore: entity %q: Phase is empty", e.ID)
		case seen[e.ID]:
			return nil, errs.Invalid(ttl.ErrInvalid, "memstore: entity %q: ID given twice", e.ID)
		}
		seen[e.ID] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range es {
		if _, ok := s.m[e.ID]; ok {
			return nil, fmt.Errorf("memstore: entity %q: %w", e.ID, ErrExists)
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

// Get returns the entity with the given id.
func (s *Store) Get(ctx context.Context, id string) (Entity, error) {
	if err := ctx.Err(); err != nil {
		return Entity{}, context.Cause(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[id]
	if !ok {
		return Entity{}, fmt.Errorf("memstore: entity %q: %w", id, ErrNotFound)
	}
	return *e, nil
}

// Update applies u to one entity.
func (s *Store) Update(ctx context.Context, id string, u Update) (Entity, error) {
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
		return Entity{}, fmt.Errorf("memstore: entity %q: %w", id, ErrNotFound)
	}
	if !u.Matches(*e) {
		return Entity{}, fmt.Errorf("memstore: entity %q: {Operation %q, Phase %q, DesiredState %q, LastActivityAt %v} is not as expected: %w",
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
func (s *Store) Add(ctx context.Context, acts []ttl.Activity) error {
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

// Apply applies r at the store's now; see ttl.Store.Apply.
func (s *Store) Apply(ctx context.Context, r ttl.Rule) ([]ttl.Expiry, error) {
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
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
