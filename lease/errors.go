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
	// call on a lease that was released within the last minute or more, on
	// stores whose Release can end with ErrUnknownOutcome (see
	// Store.Release).
	// A caller whose Release failed with ErrUnknownOutcome and whose retry
	// gets ErrReleased knows that the lease was released (by that call or
	// another), not lost to expiry.
	ErrReleased = errors.New("lease: released")
	// ErrWrongHolder is returned by a holder-checked call (Manager.Heartbeat
	// or Release, or a Store call, with a holder) on a lease that belongs
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

	// ErrRecovering is matched by the *RejectedError of a grant refused
	// because the store detected that it lost state (a Redis that came back
	// empty or older than what clients saw): it refuses grants until every
	// lease granted before the loss must have lapsed, which
	// RejectedError.RetryAfter says.
	ErrRecovering = errors.New("lease: rejected: store recovering from lost state")
	// ErrOverloaded is matched by the *RejectedError of a grant refused
	// because the admission gate (Options.Gate) reported overload.
	ErrOverloaded = errors.New("lease: rejected: overloaded")
	// ErrHolderHasLease is matched by the *RejectedError of a grant refused
	// because one lease per holder is on and the holder already has a live
	// lease, which RejectedError.Existing names.
	ErrHolderHasLease = errors.New("lease: rejected: holder already has a lease")
	// ErrOverCapacity is matched by the *RejectedError of a grant refused
	// because no requested cost fits in the budget left.
	ErrOverCapacity = errors.New("lease: rejected: over capacity")
)

// RejectedError is returned when a grant is refused. It carries what the
// store saw when it decided, and errors.Is matches it against its Err, the
// condition: ErrRecovering, ErrOverloaded, ErrHolderHasLease or
// ErrOverCapacity, checked in that order.
type RejectedError struct {
	// Err is the condition that refused the grant: the first rule, in
	// decision order, that did.
	Err error
	// Available is the budget left (budget − units of live leases) at the
	// moment of the decision, whatever the condition.
	Available int
	// Existing is the id of the holder's live lease when Err is
	// ErrHolderHasLease, else empty.
	Existing string
	// RetryAfter is, for ErrRecovering, how long the store keeps refusing
	// grants; else 0.
	RetryAfter time.Duration
}

// Error implements error.
func (e *RejectedError) Error() string {
	switch e.Err {
	case ErrHolderHasLease:
		return fmt.Sprintf("%v %s", e.Err, e.Existing)
	case ErrOverCapacity:
		return fmt.Sprintf("%v (%d units available)", e.Err, e.Available)
	case ErrRecovering:
		return fmt.Sprintf("%v (retry after %v)", e.Err, e.RetryAfter)
	}
	return fmt.Sprint(e.Err)
}

// Unwrap returns Err, so that errors.Is matches the condition.
func (e *RejectedError) Unwrap() error { return e.Err }

// notApplied returns err marked as a store failure that certainly changed
// nothing: the result matches ErrNotApplied and everything err matches, and
// has err's message. A nil err stays nil.
func notApplied(err error) error { return classify(err, ErrNotApplied) }

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
