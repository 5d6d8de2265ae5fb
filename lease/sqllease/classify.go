package sqllease

import (
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/lease"
)

// releasedRetention is how long the store remembers a release, so that a
// call on the released lease matches lease.ErrReleased as well as
// lease.ErrNotFound (see lease.Store.Release).
const releasedRetention = time.Minute

// notApplied returns err marked as a store failure that certainly changed
// nothing: the result matches lease.ErrNotApplied and everything err
// matches, and has err's message. A nil err stays nil.
func notApplied(err error) error {
	return errs.Mark(err, lease.ErrNotApplied, lease.ErrNotApplied, lease.ErrUnknownOutcome)
}

// unknownOutcome returns err marked as a store failure that may or may not
// have taken effect: the result matches lease.ErrUnknownOutcome and
// everything err matches, and has err's message. A nil err stays nil.
func unknownOutcome(err error) error {
	return errs.Mark(err, lease.ErrUnknownOutcome, lease.ErrNotApplied, lease.ErrUnknownOutcome)
}
