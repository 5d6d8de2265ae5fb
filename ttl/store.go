package ttl

import (
	"context"
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// Entity is one record of the source of truth: a workspace, a container, any
// resource whose lifecycle is driven by activity and time.
//
// Phase, DesiredState and Operation are free-form strings chosen by the
// application ("RUNNING", "STANDBY", ...). Operation "" means no operation is
// in progress ('NONE' in a workspace table).
type Entity struct {
	// ID identifies the entity. Required, unique in the store.
	ID string
	// Phase is the state the entity is in. Required.
	Phase string
	// DesiredState is the state the controller should move the entity to;
	// rules set it. Empty means none.
	DesiredState string
	// Operation is the operation in progress ("" = none). Rules never fire
	// while an operation is in progress.
	Operation string
	// LastActivityAt is the greatest activity time merged so far.
	LastActivityAt time.Time
	// PhaseChangedAt is when Phase last changed to a different value.
	PhaseChangedAt time.Time
	// CreatedAt is when the entity was created.
	CreatedAt time.Time
	// DeletedAt is when the entity was deleted (soft delete); zero if not.
	DeletedAt time.Time
}

// Update is a controller's compare-and-set write to one entity (SQL's
// UPDATE ... WHERE id = :id AND operation = :expected_op AND ...). Every
// Expect field that is set must hold, else the update fails with
// ErrConflict and changes nothing.
type Update struct {
	// ExpectOperation must equal the entity's current Operation.
	ExpectOperation string
	// ExpectPhase, if not empty, must equal the entity's Phase.
	ExpectPhase string
	// ExpectDesiredState, if not empty, must equal the entity's
	// DesiredState (an entity without one never matches).
	ExpectDesiredState string
	// ExpectLastActivityAt, if not zero, must not be before the entity's
	// LastActivityAt: the update fails if activity newer than it has been
	// merged since. A controller acting on an Expiry passes
	// Expiry.LastActivityAt, so that it never stops an entity that became
	// active after the rule decided.
	ExpectLastActivityAt time.Time

	// Operation is the new Operation. It is always written: set it to
	// ExpectOperation to leave the operation as it is, "" to end one.
	Operation string
	// Phase is the new phase; "" keeps the current one. PhaseChangedAt is set
	// to the store's now only when the phase actually changes.
	Phase string
	// DesiredState is the new desired state; "" keeps the current one.
	DesiredState string
	// ClearDesiredState sets DesiredState to "" (none), so that the rules
	// whose Then it held can fire again: a controller that keeps an entity
	// RUNNING after activity arrived clears a STANDBY decision this way.
	// DesiredState must then be empty, else the update fails with
	// ErrInvalid.
	ClearDesiredState bool
	// Delete soft-deletes the entity: DeletedAt is set to the store's now,
	// or kept if the entity was already deleted.
	Delete bool
}

// Validate reports whether u is consistent: ClearDesiredState with a
// DesiredState is not. The error wraps ErrInvalid.
func (u Update) Validate() error {
	if u.ClearDesiredState && u.DesiredState != "" {
		return errs.Invalid(ErrInvalid, "ttl: update sets DesiredState (%q) and ClearDesiredState", u.DesiredState)
	}
	return nil
}

// Matches reports whether the entity e meets u's Expect fields. Memory
// stores use it; SQL stores express the same conditions in their WHERE.
func (u Update) Matches(e Entity) bool {
	return e.Operation == u.ExpectOperation &&
		(u.ExpectPhase == "" || e.Phase == u.ExpectPhase) &&
		(u.ExpectDesiredState == "" || e.DesiredState == u.ExpectDesiredState) &&
		(u.ExpectLastActivityAt.IsZero() || !e.LastActivityAt.After(u.ExpectLastActivityAt))
}

// Expiry is one entity a rule changed: the decision and what it was based
// on. Store.Apply returns them, and the Runner hands them to Wake.
type Expiry struct {
	// ID is the entity.
	ID string
	// Rule is the name of the rule that fired (Rule.String).
	Rule string
	// Then is the desired state the rule set.
	Then string
	// LastActivityAt is the entity's LastActivityAt when the rule fired.
	// A controller that later finds a greater one has seen activity after
	// the decision.
	LastActivityAt time.Time
	// DecidedAt is the store's now when the rule fired.
	DecidedAt time.Time
}

// Filter selects entities for Store.List. The zero value lists every
// entity that is not deleted, in pages of DefaultListLimit.
type Filter struct {
	// Phase, if not empty, selects the entities in that phase.
	Phase string
	// DesiredState, if not empty, selects the entities with that desired
	// state.
	DesiredState string
	// HasDesiredState selects the entities with any desired state (not
	// ""): the ones a controller still has to act on.
	HasDesiredState bool
	// Deleted includes deleted entities.
	Deleted bool
	// After, if not empty, selects the entities whose ID sorts after it
	// in the store's order (byte-wise, unless a backend documents
	// otherwise): pass the last ID of a page to get the next one.
	After string
	// Limit is the most entities returned. 0 means DefaultListLimit
	// (1000); negative is an error.
	Limit int
}

// DefaultListLimit is Filter.Limit's default.
const DefaultListLimit = 1000

// Validate reports whether f can be used. The error wraps ErrInvalid.
func (f Filter) Validate() error {
	if f.Limit < 0 {
		return errs.Invalid(ErrInvalid, "ttl: list Limit (%d) is negative", f.Limit)
	}
	return nil
}

// Matches reports whether e is selected by f, ignoring After and Limit.
func (f Filter) Matches(e Entity) bool {
	return (f.Phase == "" || e.Phase == f.Phase) &&
		(f.DesiredState == "" || e.DesiredState == f.DesiredState) &&
		(!f.HasDesiredState || e.DesiredState != "") &&
		(f.Deleted || e.DeletedAt.IsZero())
}

// Store is the source of truth that decides expiry. ttl provides
// MemoryStore; ttl/pgttl keeps entities in PostgreSQL. Every Store must pass
// ttltest.RunStore.
//
// "The store's now" is the store's own clock: Options.Clock for MemoryStore,
// now() of the database server for SQL stores. Client clocks never decide
// expiry. All methods are safe for concurrent use, also from several
// processes sharing one database.
type Store interface {
	// Create inserts e and returns it as stored. ID and Phase are required
	// (else ErrInvalid); an ID already present, deleted or not, fails with
	// ErrExists. Defaults: a zero CreatedAt becomes the store's now, a zero
	// LastActivityAt or PhaseChangedAt becomes CreatedAt. Other fields,
	// including past timestamps and DeletedAt, are stored as given, so
	// tests and migrations can create entities "11 minutes ago".
	Create(ctx context.Context, e Entity) (Entity, error)

	// CreateMany inserts every entity of es, as Create would, in one
	// atomic step: all of them or, on any error, none. It returns them as
	// stored, in the order of es. An invalid entity, or an ID that es
	// holds twice, fails with ErrInvalid; an ID already present with
	// ErrExists. An empty es is a no-op.
	CreateMany(ctx context.Context, es []Entity) ([]Entity, error)

	// Get returns the entity with the given id, deleted or not, or
	// ErrNotFound.
	Get(ctx context.Context, id string) (Entity, error)

	// Update applies u to the entity with the given id in one atomic step
	// and returns the entity as stored afterwards. It fails with ErrNotFound
	// for an unknown id, with ErrInvalid for an inconsistent u
	// (Update.Validate), and with ErrConflict, changing nothing, when the
	// entity does not meet u's Expect fields (Update.Matches).
	Update(ctx context.Context, id string, u Update) (Entity, error)

	// List returns up to f.Limit entities selected by f, in ascending
	// order of ID (see Filter.After), for a controller's full reconcile: page through with
	// f.After set to the last ID returned, until a page comes back short.
	List(ctx context.Context, f Filter) ([]Entity, error)

	// MergeActivity sets LastActivityAt = max(LastActivityAt, At) for every
	// activity whose ID exists (deleted or not); unknown ids are ignored.
	// acts may hold an id several times; the greatest time wins. Times
	// never move backwards, whatever the order of calls and batches. The
	// whole batch is one statement or transaction: on error, nothing or
	// only greater-wins merges were applied, so retrying the batch is safe.
	MergeActivity(ctx context.Context, acts []Activity) error

	// Apply applies r as one conditional update: every entity matching r
	// (see Rule) at the store's now gets DesiredState = r.Then. It returns
	// one Expiry per entity it changed, in any order, with the entity's
	// LastActivityAt and the store's now at the decision. An entity is
	// changed, and returned, by exactly one Apply even when several
	// processes apply the same rule concurrently. An invalid rule fails
	// with an error wrapping ErrInvalid (see Rule.Validate) and changes
	// nothing.
	Apply(ctx context.Context, r Rule) ([]Expiry, error)
}
