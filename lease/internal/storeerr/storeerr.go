// Package storeerr holds what the lease stores outside package lease
// (lease/redislease, lease/sqllease) share about their failures and their
// releases.
package storeerr

import (
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/lease"
)

// ReleasedRetention is how long a store remembers a release, so that a
// call on the released lease matches lease.ErrReleased as well as
// lease.ErrNotFound (see lease.Store.Release).
const ReleasedRetention = time.Minute

// NotApplied returns err marked as a store failure that certainly changed
// nothing: the result matches lease.ErrNotApplied and everything err
// matches, and has err's message. A nil err stays nil.
func NotApplied(err error) error {
	return errs.Mark(err, lease.ErrNotApplied, lease.ErrNotApplied, lease.ErrUnknownOutcome)
}

// UnknownOutcome returns err marked as a store failure that may or may not
// have taken effect: the result matches lease.ErrUnknownOutcome and
// everything err matches, and has err's message. A nil err stays nil.
func UnknownOutcome(err error) error {
	return errs.Mark(err, lease.ErrUnknownOutcome, lease.ErrNotApplied, lease.ErrUnknownOutcome)
}
