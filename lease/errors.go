package lease

import (
	"errors"
	"fmt"
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// The errors of this package; the package documentation says what each
// kind tells a caller.
var (
	ErrNotFound    = errors.New("lease: not found")              // never granted, released, or swept
	ErrReleased    = errors.New("lease: released")               // with ErrNotFound, after a release
	ErrWrongHolder = errors.New("lease: held by another holder") // the lease is another holder's
	ErrExpired     = errors.New("lease: expired")                // expired, not yet swept
	ErrClosed      = errors.New("lease: closed")                 // the Manager is closed
	ErrInvalid     = errors.New("lease: invalid argument")       // a bad option or argument

	ErrNotApplied     = errors.New("lease: not applied")     // a store failure that changed nothing
	ErrUnknownOutcome = errors.New("lease: outcome unknown") // a store failure that may have taken effect

	// A *RejectedError matches one of these.
	ErrRecovering     = errors.New("lease: rejected: store recovering from lost state")
	ErrOverloaded     = errors.New("lease: rejected: overloaded")                 // Options.Gate said so
	ErrHolderHasLease = errors.New("lease: rejected: holder already has a lease") // see Existing
	ErrOverCapacity   = errors.New("lease: rejected: over capacity")              // no cost fits
)

// RejectedError is a refused grant; errors.Is matches it to Err, the first
// of ErrRecovering, ErrOverloaded, ErrHolderHasLease, ErrOverCapacity that
// applies.
type RejectedError struct {
	Err        error         // the first rule that refused
	Available  int           // budget left at the decision, whatever Err
	Existing   string        // the holder's live lease, for ErrHolderHasLease
	RetryAfter time.Duration // how long refusals last, for ErrRecovering
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
func notApplied(err error) error {
	return errs.Mark(err, ErrNotApplied, ErrNotApplied, ErrUnknownOutcome)
}
