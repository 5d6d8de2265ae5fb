package lease

import (
	"errors"
	"fmt"
)

var (
	// ErrNotFound is returned for a lease id the store does not know: never
	// granted, released, or expired and already swept.
	ErrNotFound = errors.New("lease: not found")
	// ErrExpired is returned for a lease that is expired but not yet swept.
	// Once a sweep has removed it, the same call returns ErrNotFound.
	ErrExpired = errors.New("lease: expired")
	// ErrClosed is returned by a Manager after Close.
	ErrClosed = errors.New("lease: closed")
	// ErrInvalid is wrapped by every error about bad input (empty holder,
	// cost ≤ 0 or above the whole budget, TTL ≤ 0, grace ≤ 0). Nothing is
	// stored when it is returned.
	ErrInvalid = errors.New("lease: invalid request")

	// ErrOverloaded matches a *RejectedError whose Reason is Overloaded.
	ErrOverloaded = errors.New("lease: rejected: overloaded")
	// ErrHolderHasLease matches a *RejectedError whose Reason is
	// HolderHasLease.
	ErrHolderHasLease = errors.New("lease: rejected: holder already has a lease")
	// ErrOverCapacity matches a *RejectedError whose Reason is OverCapacity.
	ErrOverCapacity = errors.New("lease: rejected: over capacity")
)

// Reason says why a grant was rejected. The values are stable strings,
// suitable for an API error code.
type Reason string

// The rejection reasons, in the order a grant checks them.
const (
	// Overloaded: the admission gate reported overload (seed 003's
	// SYSTEM_OVERLOAD).
	Overloaded Reason = "overloaded"
	// HolderHasLease: one lease per holder is on and the holder already has
	// a live lease (USER_ALREADY_HAS_MODAL).
	HolderHasLease Reason = "holder_has_lease"
	// OverCapacity: no requested cost fits in the budget left
	// (OVER_CAPACITY).
	OverCapacity Reason = "over_capacity"
)

// sentinel returns the sentinel error the reason matches.
func (r Reason) sentinel() error {
	switch r {
	case Overloaded:
		return ErrOverloaded
	case HolderHasLease:
		return ErrHolderHasLease
	case OverCapacity:
		return ErrOverCapacity
	}
	return nil
}

// RejectedError is returned when a grant is refused. errors.Is matches it
// against ErrOverloaded, ErrHolderHasLease or ErrOverCapacity according to
// Reason.
type RejectedError struct {
	// Reason is the first rule, in decision order, that refused the grant.
	Reason Reason
	// Available is the budget left (budget − units of live leases) at the
	// moment of the decision, whatever the reason.
	Available int
	// Existing is the id of the holder's live lease when Reason is
	// HolderHasLease, else empty.
	Existing string
}

// Error implements error.
func (e *RejectedError) Error() string {
	switch e.Reason {
	case HolderHasLease:
		return fmt.Sprintf("lease: rejected: holder already has lease %s", e.Existing)
	case OverCapacity:
		return fmt.Sprintf("lease: rejected: over capacity (%d units available)", e.Available)
	case Overloaded:
		return "lease: rejected: overloaded"
	}
	return fmt.Sprintf("lease: rejected: %s", string(e.Reason))
}

// Is reports whether target is the sentinel error of e's Reason.
func (e *RejectedError) Is(target error) bool {
	s := e.Reason.sentinel()
	return s != nil && target == s
}
