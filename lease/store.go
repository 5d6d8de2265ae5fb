package lease

import (
	"context"
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// Store keeps leases and makes every decision about them in one atomic
// step, and its rules hold across all the Managers, in any processes, that
// share it (one Redis prefix, one SQL table). [NewMemoryStore] is the
// reference; every implementation must pass lease/leasetest.
//
// The store's clock decides (Redis TIME, SQL now()), never the caller's.
// Every time it returns is that clock's reading at the decision, in
// microseconds or finer, never rounded down, so a caller that counts
// Deadline − HeartbeatAt from when it sent the call (as KeepAlive does)
// never trusts a lease longer than the store keeps it.
//
// A lease is live at now while now < Deadline(); then it is expired
// forever, and absent at once for Get, List, Usage, the holder rule and the
// budget. Its record stays until a Sweep removes it: until then Get,
// Heartbeat and Release return [ErrExpired], after it [ErrNotFound].
//
// Grant decides at now, with available = a.Budget − the Cost of the live
// leases, in order: a.Overloaded gives ErrOverloaded; a.OnePerHolder and
// a live lease of a.Holder give ErrHolderHasLease with Existing its ID;
// else the first cost in a.Costs that fits is granted, or ErrOverCapacity.
// A store that detected lost state may first refuse every grant with
// ErrRecovering and RetryAfter. Every [RejectedError] carries Available
// (never negative). The lease has ID a.ID, Holder, Resource, the chosen
// Cost, CreatedAt = HeartbeatAt = now, ExpiresAt = now + a.TTL, Grace =
// a.Grace, and a Token ≥ 1 greater than every token the store issued before
// (never reused). An error of a.Validate is returned first. Grant is
// idempotent per ID: if a.ID names a record the store still holds (live or
// expired), it returns that lease unchanged, without a decision, for the
// same Holder, and an error matching ErrInvalid for another; a released or
// swept ID is unknown again.
//
// Heartbeat sets HeartbeatAt of the live lease to now; nothing else
// changes. Release removes the live lease and returns it as it was. With a
// holder other than "", both first check, in the same atomic step, that a
// record of id (live or expired) is the holder's, else ErrWrongHolder. A
// store whose Release can end with ErrUnknownOutcome remembers the release
// for at least a minute, during which Get, Heartbeat and Release of id
// match ErrNotFound and ErrReleased. List returns the live leases by Token
// ascending, as one snapshot. Sweep removes the records of up to limit
// (> 0) expired leases and returns them, fewer when no more are left; each
// is returned by exactly one Sweep call among all sweepers.
//
// A rule outcome changes nothing. A failure wraps the backend's error with
// %w and matches exactly one of [ErrNotApplied] (also for a context that
// had ended before the call) and [ErrUnknownOutcome] (for one that ends
// during it), and the context's error when it was cancelled:
// fmt.Errorf("%w: %w", ErrNotApplied, err) will do.
type Store interface {
	Grant(ctx context.Context, a GrantArgs) (Lease, error)
	Heartbeat(ctx context.Context, id, holder string) (Lease, error)
	Release(ctx context.Context, id, holder string) (Lease, error)
	Get(ctx context.Context, id string) (Lease, error) // the live lease id
	List(ctx context.Context) ([]Lease, error)
	Usage(ctx context.Context) (units, leases int, err error) // of the live leases
	Sweep(ctx context.Context, limit int) ([]Lease, error)
}

// GrantArgs is one grant decision handed to Store.Grant, built by a Manager
// from a Request and its Options.
// Budget is the units live leases may take; each decision uses its own
// call's, so Managers sharing a store should agree on it.
type GrantArgs struct {
	ID               string        // unique and unguessable; crypto/rand.Text will do
	Holder, Resource string        // copied into the lease; Holder is required
	Costs            []int         // most preferred first, each in 1..Budget; not kept or changed
	TTL, Grace       time.Duration // both > 0
	Budget           int
	OnePerHolder     bool // the holder rule
	Overloaded       bool // the gate's verdict just before the call
}

// Validate checks a for bad input and returns an error matching ErrInvalid
// that names the bad field and its value, or nil.
func (a GrantArgs) Validate() error {
	switch {
	case a.ID == "":
		return errs.Invalid(ErrInvalid, "lease: ID is empty")
	case a.Holder == "":
		return errs.Invalid(ErrInvalid, "lease: Holder is empty")
	case a.Budget <= 0:
		return errs.Invalid(ErrInvalid, "lease: Budget (%d) must be > 0", a.Budget)
	case len(a.Costs) == 0:
		return errs.Invalid(ErrInvalid, "lease: Costs is empty")
	case a.TTL <= 0:
		return errs.Invalid(ErrInvalid, "lease: TTL (%v) must be > 0", a.TTL)
	case a.Grace <= 0:
		return errs.Invalid(ErrInvalid, "lease: Grace (%v) must be > 0", a.Grace)
	}
	for _, c := range a.Costs {
		if c <= 0 || c > a.Budget {
			return errs.Invalid(ErrInvalid, "lease: Cost (%d) must be in 1..Budget (%d)", c, a.Budget)
		}
	}
	return nil
}
