package lease

import (
	"context"
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// Store keeps leases and makes every decision about them atomically. It is
// the unit of atomicity: several Managers, in several processes, may share
// one Store (one Redis prefix, one SQL table) and the rules below must hold
// across all of them. The in-memory store (NewMemoryStore) is the reference
// implementation; lease/redislease and lease/sqllease are others, and every
// implementation must pass lease/leasetest.
//
// # Time
//
// The store's clock decides: Redis TIME inside the script, SQL now() inside
// the transaction, the injected clock for the memory store. Never the
// caller's clock. Every time a store returns (CreatedAt, ExpiresAt,
// HeartbeatAt) comes from that clock, at microsecond precision or finer:
// CreatedAt and HeartbeatAt are the clock reading the decision was made at,
// never rounded down to a coarser unit, and the store's own deadline is
// never earlier than Lease.Deadline() of the lease it returned. A caller
// that counts Deadline − HeartbeatAt from the moment it sent the call (as
// KeepAlive does) therefore never trusts a lease longer than the store
// keeps it. (A stamp rounded down to whole milliseconds could lie up to
// 1 ms before the call was sent, and break that promise.)
//
// # Liveness
//
// A lease is live at time now while now < Lease.Deadline(), that is
// now < ExpiresAt and now < HeartbeatAt + Grace. From the first instant it is
// not live it is expired, forever. An expired lease counts as absent for Get,
// List, Usage, the holder rule and the budget, immediately, whether or not a
// Sweep has removed its record yet. The record of an expired lease is kept
// until a Sweep removes it (so the sweep can report it); while it exists,
// Get, Heartbeat and Release return ErrExpired, and after the sweep,
// ErrNotFound. Nothing ever makes an expired lease live again.
//
// # Errors
//
// Every error is of exactly one of these kinds:
//
//   - a rule outcome: ErrNotFound (with ErrReleased for a lease released
//     within the last minute), ErrExpired, ErrWrongHolder, ErrInvalid or a
//     *RejectedError. The call was decided and changed nothing.
//   - ErrNotApplied: the call failed and certainly changed nothing (it never
//     reached the server, or the server refused or rolled it back whole).
//     A context that had ended before the call matches it too.
//   - ErrUnknownOutcome: the call failed after it may have reached the
//     server; it may or may not have taken effect. A context that ended
//     while the call was in flight gives this kind.
//
// Store failures wrap the backend's error with %w and match exactly one of
// ErrNotApplied and ErrUnknownOutcome (fmt.Errorf("%w: %w", ErrNotApplied,
// err) will do);
// a cancelled context is also matched by the context's error. What a caller
// may conclude after ErrUnknownOutcome: a repeated Grant with the same ID
// returns the lease if the first took effect; a repeated Release returns
// the lease, or ErrNotFound with ErrReleased if the first took effect; a
// repeated Heartbeat is harmless.
type Store interface {
	// Grant decides and records a new lease in one atomic step, at the
	// store's current time now. Let used be the summed Cost of the leases
	// live at now and available = a.Budget − used. In this order:
	//
	//  1. a.Overloaded → *RejectedError{Err: ErrOverloaded}.
	//  2. a.OnePerHolder and a.Holder has a lease live at now →
	//     *RejectedError{Err: ErrHolderHasLease, Existing: that lease's ID}.
	//  3. The first cost in a.Costs with cost ≤ available is granted; if
	//     none fits → *RejectedError{Err: ErrOverCapacity}.
	//
	// A store that detected that it lost state (see ErrRecovering) may
	// refuse every grant first, with ErrRecovering and RetryAfter, until
	// every lease it granted before the loss must have lapsed.
	//
	// Every *RejectedError carries Available = available at now (never
	// negative). A granted lease has ID a.ID, Holder, Resource, the chosen
	// Cost, CreatedAt = HeartbeatAt = now, ExpiresAt = now + a.TTL,
	// Grace = a.Grace, and a Token strictly greater than every token this
	// store has issued before (tokens are never reused, even after release,
	// expiry or sweep; the first is ≥ 1).
	//
	// Grant first calls a.Validate and returns its error, matching
	// ErrInvalid, without storing anything.
	//
	// Grant is idempotent per ID. Every decision gets a fresh, unguessable
	// a.ID (a Manager's are 32 random hex digits; crypto/rand.Text will do),
	// so a Grant whose a.ID names a record the store still holds (live, or
	// expired and not yet swept) is a repeat of a grant that took effect,
	// typically a client retrying after a lost reply. With the same Holder
	// it returns that lease as stored, before and without any decision, and
	// changes nothing. With another Holder it returns an error matching
	// ErrInvalid and changes nothing. Once the record is released or swept,
	// the ID is unknown again.
	Grant(ctx context.Context, a GrantArgs) (Lease, error)

	// Heartbeat sets HeartbeatAt of the lease id to now if the lease is
	// live at now, and returns the updated lease. It changes nothing else:
	// ExpiresAt never moves, so Deadline never passes ExpiresAt. An expired
	// lease returns ErrExpired (record still present) or ErrNotFound, and is
	// not changed.
	//
	// With a holder other than "", the call is holder-checked in the same
	// atomic step: a record of id (live or expired) that belongs to another
	// holder returns ErrWrongHolder and is not changed.
	Heartbeat(ctx context.Context, id, holder string) (Lease, error)

	// Release removes the lease id if it is live at now and returns it as
	// it was. An expired lease returns ErrExpired and its record stays for
	// Sweep to report; an unknown id returns ErrNotFound. A store whose
	// Release can fail with ErrUnknownOutcome (one over a network)
	// remembers the release for at least one minute: until then,
	// Get, Heartbeat and Release of id return an error that matches both
	// ErrNotFound and ErrReleased. (The memory store never needs to.) A holder
	// other than "" is checked as for Heartbeat.
	Release(ctx context.Context, id, holder string) (Lease, error)

	// Get returns the lease id if it is live at now; else ErrExpired
	// (record still present) or ErrNotFound (with ErrReleased after a
	// recent release).
	Get(ctx context.Context, id string) (Lease, error)

	// List returns every lease live at now, ordered by Token ascending, as
	// one consistent snapshot (one script, one statement).
	List(ctx context.Context) ([]Lease, error)

	// Usage returns the summed Cost and the number of the leases live at
	// now.
	Usage(ctx context.Context) (units, leases int, err error)

	// Sweep removes the records of up to limit (> 0) leases expired at now
	// and returns them. Each expired lease is returned by exactly one Sweep
	// call, even when several sweepers in several processes run at the same
	// time. It returns fewer than limit when no more expired records exist.
	Sweep(ctx context.Context, limit int) ([]Lease, error)
}

// GrantArgs is one grant decision handed to Store.Grant. Managers build it
// from a Request and their Options.
type GrantArgs struct {
	// ID is the new lease's id: unique and unguessable.
	ID string
	// Holder and Resource are copied into the lease. Holder is required.
	Holder, Resource string
	// Costs are the acceptable costs, most preferred first (a main stream
	// of 2 units, then a sub stream of 1). Each must be in 1..Budget.
	// Grant reads Costs during the call only, and neither keeps nor
	// changes it: a Manager reuses it.
	Costs []int
	// TTL sets ExpiresAt = now + TTL; Grace is the heartbeat grace. Both > 0.
	TTL, Grace time.Duration
	// Budget is the total number of units that live leases may take. All
	// Managers sharing a store should use the same Budget; each decision is
	// made against the Budget of its own call.
	Budget int
	// OnePerHolder enables the holder rule (step 2 of Grant).
	OnePerHolder bool
	// Overloaded is the admission gate's verdict, sampled by the Manager
	// just before the call; if true the grant is rejected first.
	Overloaded bool
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
