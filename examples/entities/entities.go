// Package entities is the table of entities that the example systems keep
// their resources in: the columns a ttl.Rule reads, plus the operation a
// controller claims and the soft delete, with the creates, reads and
// compare-and-set writes a controller makes. A Store is a ttl.Store, so a
// ttl.Runner applies the rules to it. MemoryStore keeps it in memory;
// pgentities in PostgreSQL (through pgttl), redisentities in Redis.
package entities

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ttlkit/ttlkit/ttl"
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
		return Invalid("entities: update sets DesiredState (%q) and ClearDesiredState", u.DesiredState)
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

// Filter selects entities for Store.List. The zero value lists every
// entity that is not deleted, in pages of ListLimit.
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
	// Limit is the most entities returned. 0 means ListLimit
	// (1000); negative is an error.
	Limit int
}

// ListLimit is Filter.Limit's default.
const ListLimit = 1000

// Validate reports whether f can be used. The error wraps ErrInvalid.
func (f Filter) Validate() error {
	if f.Limit < 0 {
		return Invalid("entities: list Limit (%d) is negative", f.Limit)
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

// Errors of the writes. Bad input fails with an error matching
// ttl.ErrInvalid.
var (
	// ErrNotFound is returned by Store.Get and Store.Update for an unknown id.
	ErrNotFound = errors.New("entities: entity not found")
	// ErrExists is returned by Store.Create when the id is already taken.
	ErrExists = errors.New("entities: entity already exists")
	// ErrConflict is returned by Store.Update when the entity does not meet
	// the update's Expect fields: someone else changed it first.
	ErrConflict = errors.New("entities: operation conflict")
)

// Since returns the timestamp of e that s names.
func Since(s ttl.Since, e Entity) time.Time {
	switch s {
	case ttl.SincePhaseChanged:
		return e.PhaseChangedAt
	case ttl.SinceCreated:
		return e.CreatedAt
	}
	return e.LastActivityAt
}

// Matches reports whether r fires for e at now: e is in r.Phase, has no
// operation in progress, is not deleted, has another desired state than
// r.Then, and its Since timestamp is set and more than r.After before now.
func Matches(r ttl.Rule, e Entity, now time.Time) bool {
	if e.Phase != r.Phase || e.Operation != "" || !e.DeletedAt.IsZero() || e.DesiredState == r.Then {
		return false
	}
	since := Since(r.Since, e)
	return !since.IsZero() && now.Sub(since) > r.After
}

// Storable reports whether a database keeps the string v exactly: valid
// UTF-8 (PostgreSQL text, a JSON record) without NUL bytes (PostgreSQL
// text, the separator of redisentities' index members).
func Storable(v string) bool {
	return utf8.ValidString(v) && strings.IndexByte(v, 0) < 0
}

// CheckCreate validates e for Create and CreateMany of the store named
// pkg: an ID and a Phase, and every string Storable. The error matches
// ttl.ErrInvalid.
func CheckCreate(pkg string, e Entity) error {
	switch {
	case e.ID == "":
		return Invalid("%s: create: ID is empty", pkg)
	case e.Phase == "":
		return Invalid("%s: create %q: Phase is empty", pkg, e.ID)
	case !Storable(e.ID) || !Storable(e.Phase) || !Storable(e.DesiredState) || !Storable(e.Operation):
		return Invalid("%s: create %q: ID, Phase, DesiredState and Operation must be UTF-8 without NUL bytes", pkg, e.ID)
	}
	return nil
}

// Store is the table of entities: a ttl.Store, the source of truth that
// decides expiry, with a controller's reads and writes. MemoryStore,
// pgentities and redisentities implement it, and each passes
// entitiestest.RunStore and ttltest.RunStore.
//
// "The store's now" is the store's own clock: Options.Clock for MemoryStore,
// now() of the database server for SQL stores. Client clocks never decide
// expiry. All methods are safe for concurrent use, also from several
// processes sharing one database.
type Store interface {
	ttl.Store

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

	// Purge removes, in one atomic step, the entities among ids that are
	// deleted, and returns how many it removed. Entities that are not
	// deleted, and unknown ids, are left alone. A purged entity is unknown
	// afterwards: Get fails with ErrNotFound and its ID can be created
	// again. Deletion is soft (Update.Delete keeps the record), so a system
	// that creates an entity per resource purges an entity once it has no
	// more use for its record.
	Purge(ctx context.Context, ids []string) (int, error)
}
