package ttl

import "errors"

// Sentinel errors. Backends return them (wrapped or not) so callers can test
// with errors.Is.
var (
	// ErrNotFound is returned by Store.Get and Store.Update for an unknown id.
	ErrNotFound = errors.New("ttl: entity not found")
	// ErrExists is returned by Store.Create when the id is already taken.
	ErrExists = errors.New("ttl: entity already exists")
	// ErrConflict is returned by Store.Update when the entity's Operation is
	// not the one the caller expected: someone else changed it first.
	ErrConflict = errors.New("ttl: operation conflict")
	// ErrInvalid marks bad input: an invalid Rule, Entity, option or
	// argument. Nothing is changed.
	ErrInvalid = errors.New("ttl: invalid argument")
)
