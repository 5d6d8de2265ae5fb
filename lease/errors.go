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
	// ErrClosed is returned by the calls of a Manager that would start new
	// work after Close.
	ErrClosed = errors.New("lease: closed")
	// ErrInvalid is matched by every error about a bad option or argument
	// (a budget ≤ 0, an empty holder, a cost ≤ 0 or above the whole budget,
	// a TTL or grace ≤ 0): the error names the field or argument and its
	// value. Nothing is stored when it is returned.
	ErrInvalid = errors.New("lease: invalid argument")

	// ErrOverloaded matches a *RejectedError whose Reason is
	// ReasonOverloaded.
	ErrOverloaded = errors.New("lease: rejected: overloaded")
	// ErrHolderHasLease matches a *RejectedError whose Reason is
	// ReasonHolderHasLease.
	ErrHolderHasLease = errors.New("lease: rejected: holder already has a lease")
	// ErrOverCapacity matches a *RejectedError whose Reason is
	// ReasonOverCapacity.
	ErrOverCapacity = errors.New("lease: rejected: over capacity")
)

// Reason says why a grant was refused. The values are stable lower_snake
// strings, usable as an API error code or a metric label.
type Reason string

// The rejection reasons, in the order a grant checks them.
const (
	// ReasonOverloaded: the admission gate reported overload (a camera
	// admission server's SYSTEM_OVERLOAD).
	ReasonOverloaded Reason = "overloaded"
	// ReasonHolderHasLease: one lease per holder is on and the holder
	// already has a live lease (USER_ALREADY_HAS_MODAL).
	ReasonHolderHasLease Reason = "holder_has_lease"
	// ReasonOverCapacity: no requested cost fits in the budget left
	// (OVER_CAPACITY).
	ReasonOverCapacity Reason = "over_capacity"
)

// sentinel returns the sentinel error the reason matches.
func (r Reason) sentinel() error {
	switch r {
	case ReasonOverloaded:
		return ErrOverloaded
	case ReasonHolderHasLease:
		return ErrHolderHasLease
	case ReasonOverCapacity:
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
	// ReasonHolderHasLease, else empty.
	Existing string
}

// Error implements error.
func (e *RejectedError) Error() string {
	switch e.Reason {
	case ReasonHolderHasLease:
		return fmt.Sprintf("lease: rejected: holder already has lease %s", e.Existing)
	case ReasonOverCapacity:
		return fmt.Sprintf("lease: rejected: over capacity (%d units available)", e.Available)
	case ReasonOverloaded:
		return "lease: rejected: overloaded"
	}
	return fmt.Sprintf("lease: rejected: %s", string(e.Reason))
}

// Is reports whether target is the sentinel error of e's Reason.
func (e *RejectedError) Is(target error) bool {
	s := e.Reason.sentinel()
	return s != nil && target == s
}
