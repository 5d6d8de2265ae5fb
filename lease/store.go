package lease

import (
	"context"
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// Store keeps leases and makes each decision in one atomic step, for all
// the Managers, in any processes, that share it. [NewMemoryStore] is the
// reference; every implementation must pass lease/leasetest. The store's
// clock decides (Redis TIME, SQL now()), never the caller's, and every time
// it returns is that clock's reading at the decision, in microseconds or
// finer, never rounded down. A lease is live while now < Deadline(); then
// it is expired forever and absent at once for Get, List, Usage, the holder
// rule and the budget, and until a Sweep removes its record Get, Heartbeat
// and Release return [ErrExpired], after it [ErrNotFound].
//
// Grant decides, with available = a.Budget − the Cost of the live leases:
// a.Overloaded gives ErrOverloaded; else a.OnePerHolder and a live lease of
// a.Holder give ErrHolderHasLease with Existing its ID; else the first cost
// in a.Costs that fits is granted, or ErrOverCapacity. A store that
// detected lost state may refuse every grant first with ErrRecovering and
// RetryAfter. Every [RejectedError] carries Available (never negative). The
// lease has a's fields, the chosen Cost, CreatedAt = HeartbeatAt = now,
// ExpiresAt = now + a.TTL, and a Token ≥ 1 above every token the store
// issued before. An error of a.Validate comes first. Grant is idempotent per
// ID: for a record the store still holds (live or expired) it returns that
// lease unchanged for the same Holder, else an error matching ErrInvalid.
// Heartbeat sets HeartbeatAt of the live lease to now, nothing else; Release
// removes it and returns it as it was. With a holder other than "", both
// first check that a record of id (live or expired) is the holder's, else
// ErrWrongHolder. A store whose Release can end with ErrUnknownOutcome then
// matches ErrNotFound and ErrReleased for id for at least a minute. List
// returns the live leases by Token, as one snapshot. Sweep removes and
// returns up to limit (> 0) expired records, fewer when no more are left,
// each to exactly one Sweep call among all sweepers.
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
