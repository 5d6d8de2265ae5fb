// Package memstore is an in-memory ttl.Store with the create, read and
// compare-and-set writes a controller makes, for ttl's tests and the
// conformance suites' own tests.
package memstore

import (
	"errors"
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/ttl"
)

// Errors of the writes.
var (
	// ErrNotFound is returned by Get and Update for an unknown id.
	ErrNotFound = errors.New("memstore: entity not found")
	// ErrExists is returned by Create when the id is already taken.
	ErrExists = errors.New("memstore: entity already exists")
	// ErrConflict is returned by Update when the entity does not meet the
	// update's Expect fields.
	ErrConflict = errors.New("memstore: conflict")
)

// Entity is one record: a resource whose lifecycle is driven by activity
// and time. Its fields are ttltest.Entity's, in the same order, so that
// one converts to the other.
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

// Update is a compare-and-set write to one entity. Every Expect field that
// is set must hold, else the update fails with ErrConflict and changes
// nothing.
type Update struct {
	// ExpectOperation must equal the entity's current Operation.
	ExpectOperation string
	// ExpectPhase, if not empty, must equal the entity's Phase.
	ExpectPhase string
	// ExpectDesiredState, if not empty, must equal the entity's
	// DesiredState.
	ExpectDesiredState string
	// ExpectLastActivityAt, if not zero, must not be before the entity's
	// LastActivityAt.
	ExpectLastActivityAt time.Time

	// Operation is the new Operation, always written.
	Operation string
	// Phase is the new phase; "" keeps the current one. PhaseChangedAt is
	// set to the store's now only when the phase actually changes.
	Phase string
	// DesiredState is the new desired state; "" keeps the current one.
	DesiredState string
	// ClearDesiredState sets DesiredState to "".
	ClearDesiredState bool
	// Delete soft-deletes the entity.
	Delete bool
}

// Validate reports whether u is consistent. The error wraps ttl.ErrInvalid.
func (u Update) Validate() error {
	if u.ClearDesiredState && u.DesiredState != "" {
		return errs.Invalid(ttl.ErrInvalid, "memstore: update sets DesiredState (%q) and ClearDesiredState", u.DesiredState)
	}
	return nil
}

// Matches reports whether the entity e meets u's Expect fields.
func (u Update) Matches(e Entity) bool {
	return e.Operation == u.ExpectOperation &&
		(u.ExpectPhase == "" || e.Phase == u.ExpectPhase) &&
		(u.ExpectDesiredState == "" || e.DesiredState == u.ExpectDesiredState) &&
		(u.ExpectLastActivityAt.IsZero() || !e.LastActivityAt.After(u.ExpectLastActivityAt))
}

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

// Matches reports whether r fires for e at now, following the conditions
// of ttl.Rule.
func Matches(r ttl.Rule, e Entity, now time.Time) bool {
	if e.Phase != r.Phase || e.Operation != "" || !e.DeletedAt.IsZero() || e.DesiredState == r.Then {
		return false
	}
	since := Since(r.Since, e)
	return !since.IsZero() && now.Sub(since) > r.After
}
