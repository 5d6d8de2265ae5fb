package lease

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrNotFound is returned for a lease id the store does not know: never
	// granted, released, or expired and already swept.
	ErrNotFound = errors.New("lease: not found")
	// ErrReleased is matched, together with ErrNotFound, by the error of a
	// call on a lease that was released within the last ReleasedRetention,
	// on stores whose Release can end with ErrUnknownOutcome.
	// A caller whose Release failed with ErrUnknownOutcome and whose retry
	// gets ErrReleased knows that the lease was released (by that call or
	// another), not lost to expiry.
	ErrReleased = errors.New("lease: released")
	// ErrWrongHolder is returned by a holder-checked call (Manager.HeartbeatAs,
	// Manager.ReleaseAs, a Store call with a holder) on a lease that belongs
	// to another holder, live or expired. The call changed nothing.
	ErrWrongHolder = errors.New("lease: held by another holder")
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

	// ErrNotApplied is matched by a store failure that certainly changed
	// nothing: the request never reached the server (the context had ended,
	// no connection could be made), or the server refused it or rolled it
	// back as a whole. Retrying is safe.
	ErrNotApplied = errors.New("lease: not applied")
	// ErrUnknownOutcome is matched by a store failure after the request may
	// have reached the server: the connection broke or the context ended
	// while waiting for the reply. The operation may or may not have taken
	// effect. A Grant is safe to repeat with the same GrantArgs.ID (the
	// store answers a repeat with the lease it granted); a Release may be
	// repeated and answers ErrReleased if the first one took effect; a
	// Heartbeat may be repeated.
	ErrUnknownOutcome = errors.New("lease: outcome unknown")

	// ErrOverloaded matches a *RejectedError whose Reason is
	// ReasonOverloaded.
	ErrOverloaded = errors.New("lease: rejected: overloaded")
	// ErrHolderHasLease matches a *RejectedError whose Reason is
	// ReasonHolderHasLease.
	ErrHolderHasLease = errors.New("lease: rejected: holder already has a lease")
	// ErrOverCapacity matches a *RejectedError whose Reason is
	// ReasonOverCapacity.
	ErrOverCapacity = errors.New("lease: rejected: over capacity")
	// ErrRecovering matches a *RejectedError whose Reason is
	// ReasonRecovering.
	ErrRecovering = errors.New("lease: rejected: store recovering from lost state")
)

// ReleasedRetention is how long a network store remembers a release, so
// that a call on the released lease matches ErrReleased as well as
// ErrNotFound (see Store.Release).
const ReleasedRetention = time.Minute

// Reason says why a grant was refused. The values are stable lower_snake
// strings, usable as an API error code or a metric label.
type Reason string

// The rejection reasons, in the order a grant checks them.
const (
	// ReasonRecovering: the store detected that it lost state (a Redis that
	// came back empty or older than what clients saw) and refuses grants
	// until every lease granted before the loss must have lapsed;
	// RejectedError.RetryAfter says how long that is.
	ReasonRecovering Reason = "recovering"
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
	case ReasonRecovering:
		return ErrRecovering
	}
	return nil
}

// RejectedError is returned when a grant is refused. errors.Is matches it
// against ErrRecovering, ErrOverloaded, ErrHolderHasLease or ErrOverCapacity
// according to Reason.
type RejectedError struct {
	// Reason is the first rule, in decision order, that refused the grant.
	Reason Reason
	// Available is the budget left (budget − units of live leases) at the
	// moment of the decision, whatever the reason.
	Available int
	// Existing is the id of the holder's live lease when Reason is
	// ReasonHolderHasLease, else empty.
	Existing string
	// RetryAfter is, for ReasonRecovering, how long the store keeps
	// refusing grants; else 0.
	RetryAfter time.Duration
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
	case ReasonRecovering:
		return fmt.Sprintf("lease: rejected: store recovering from lost state (retry after %v)", e.RetryAfter)
	}
	return fmt.Sprintf("lease: rejected: %s", string(e.Reason))
}

// Is reports whether target is the sentinel error of e's Reason.
func (e *RejectedError) Is(target error) bool {
	s := e.Reason.sentinel()
	return s != nil && target == s
}

// NotApplied returns err marked as a store failure that certainly changed
// nothing: the result matches ErrNotApplied and everything err matches, and
// has err's message. Stores use it; a nil err stays nil.
func NotApplied(err error) error { return classify(err, ErrNotApplied) }

// UnknownOutcome returns err marked as a store failure that may or may not
// have taken effect: the result matches ErrUnknownOutcome and everything
// err matches, and has err's message. Stores use it; a nil err stays nil.
func UnknownOutcome(err error) error { return classify(err, ErrUnknownOutcome) }

func classify(err, class error) error {
	if err == nil || errors.Is(err, ErrNotApplied) || errors.Is(err, ErrUnknownOutcome) {
		return err
	}
	return &classified{err: err, class: class}
}

// classified is a store failure with its class.
type classified struct{ err, class error }

func (e *classified) Error() string   { return e.err.Error() }
func (e *classified) Unwrap() []error { return []error{e.err, e.class} }
