package redislease

import (
	"errors"
	"time"

	"github.com/ttlkit/ttlkit/lease"
)

// releasedRetention is how long the store remembers a release, so that a
// call on the released lease matches lease.ErrReleased as well as
// lease.ErrNotFound (see lease.Store.Release).
const releasedRetention = time.Minute

// notApplied returns err marked as a store failure that certainly changed
// nothing: the result matches lease.ErrNotApplied and everything err
// matches, and has err's message. A nil err stays nil.
func notApplied(err error) error { return classify(err, lease.ErrNotApplied) }

// unknownOutcome returns err marked as a store failure that may or may not
// have taken effect: the result matches lease.ErrUnknownOutcome and
// everything err matches, and has err's message. A nil err stays nil.
func unknownOutcome(err error) error { return classify(err, lease.ErrUnknownOutcome) }

func classify(err, class error) error {
	if err == nil || errors.Is(err, lease.ErrNotApplied) || errors.Is(err, lease.ErrUnknownOutcome) {
		return err
	}
	return &classified{err: err, class: class}
}

// classified is a store failure with its class.
type classified struct{ err, class error }

func (e *classified) Error() string   { return e.err.Error() }
func (e *classified) Unwrap() []error { return []error{e.err, e.class} }
