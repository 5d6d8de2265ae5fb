package ttl

import (
	"context"
	"time"
)

// Store is the source of truth that decides expiry: the user's table of
// entities (resources whose lifecycle activity and time drive), seen
// through the two things the Runner does to it. ttl/pgttl is a Store on a
// PostgreSQL table; a system keeps its entities' other columns, and writes
// them, itself. Every Store must pass ttltest.RunStore.
//
// An entity has an ID, a phase, a desired state ("" for none) and three
// timestamps a [Rule] measures from: its last activity, when its phase last
// changed, and when it was created. A store may also hold entities that
// the rules leave alone: one whose operation is in progress (a controller
// is working on it) and one that is deleted.
//
// "The store's now" is the store's own clock: now() of the database server
// for SQL stores. Client clocks never decide expiry. All methods are safe
// for concurrent use, also from several processes sharing one database.
type Store interface {
	// Add sets an entity's last activity to max(last activity, At) for
	// every activity whose ID exists (deleted or not); unknown ids are
	// ignored. acts may hold an id several times; the greatest time wins.
	// Times never move backwards, whatever the order of calls and batches.
	// The whole batch is one statement or transaction: on error, nothing
	// or only greater-wins merges were applied, so retrying the batch is
	// safe. A Store is a [Sink], so a Tracker can flush into it directly.
	Add(ctx context.Context, acts []Activity) error

	// Apply applies r as one conditional update: every entity matching r
	// (see Rule) at the store's now gets r.Then as its desired state. It
	// returns one Expiry per entity it changed, in any order, with the
	// entity's last activity and the store's now at the decision. An
	// entity is changed, and returned, by exactly one Apply even when
	// several processes apply the same rule concurrently. An invalid rule
	// fails with an error wrapping ErrInvalid (see Rule.Validate) and
	// changes nothing.
	Apply(ctx context.Context, r Rule) ([]Expiry, error)
}

// Expiry is one entity a rule changed: the decision and what it was based
// on. Store.Apply returns them, and the Runner hands them to
// RunnerOptions.Wake.
type Expiry struct {
	// ID is the entity.
	ID string
	// Rule is the name of the rule that fired (Rule.String).
	Rule string
	// Then is the desired state the rule set.
	Then string
	// LastActivityAt is the entity's last activity when the rule fired.
	// A controller that later finds a greater one has seen activity after
	// the decision.
	LastActivityAt time.Time
	// DecidedAt is the store's now when the rule fired.
	DecidedAt time.Time
}
