package ttl

import (
	"context"
	"time"
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
// UPDATE ... WHERE id = :id AND operation = :expected_op).
type Update struct {
	// ExpectOperation must equal the entity's current Operation, else the
	// update fails with ErrConflict and changes nothing.
	ExpectOperation string
	// Operation is the new Operation. It is always written: set it to
	// ExpectOperation to leave the operation as it is, "" to end one.
	Operation string
	// Phase is the new phase; "" keeps the current one. PhaseChangedAt is set
	// to the store's now only when the phase actually changes.
	Phase string
	// DesiredState is the new desired state; "" keeps the current one.
	DesiredState string
	// Delete soft-deletes the entity: DeletedAt is set to the store's now,
	// or kept if the entity was already deleted.
	Delete bool
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

	// Get returns the entity with the given id, deleted or not, or
	// ErrNotFound.
	Get(ctx context.Context, id string) (Entity, error)

	// Update applies u to the entity with the given id in one atomic step
	// and returns the entity as stored afterwards. It fails with ErrNotFound
	// for an unknown id and with ErrConflict, changing nothing, when the
	// entity's Operation is not u.ExpectOperation.
	Update(ctx context.Context, id string, u Update) (Entity, error)

	// MergeActivity sets LastActivityAt = max(LastActivityAt, At) for every
	// activity whose ID exists (deleted or not); unknown ids are ignored.
	// acts may hold an id several times; the greatest time wins. Times
	// never move backwards, whatever the order of calls and batches. The
	// whole batch is one statement or transaction: on error, nothing or
	// only greater-wins merges were applied, so retrying the batch is safe.
	MergeActivity(ctx context.Context, acts []Activity) error

	// Apply applies r as one conditional update: every entity matching r
	// (see Rule) at the store's now gets DesiredState = r.Then. It returns
	// the ids it changed, in any order. An entity is changed, and its id
	// returned, by exactly one Apply even when several processes apply
	// the same rule concurrently. An invalid rule fails with an error
	// wrapping ErrInvalid (see Rule.Validate) and changes nothing.
	Apply(ctx context.Context, r Rule) ([]string, error)
}
