package ttl

import (
	"context"
	"time"
)

// Store is the user's table of entities, the source of truth that decides
// expiry, seen through the two things the Runner does to it; the system
// creates entities and writes their other columns itself. ttl/pgttl is a
// Store on a PostgreSQL table. Every Store must pass ttltest.RunStore, and
// its methods must be safe for concurrent use, also from several processes
// sharing one database.
//
// An entity has an ID, a phase, a desired state ("" for none) and the three
// timestamps a [Rule] measures from; rules leave alone an entity that is
// deleted or has an operation in progress. "Now" is the Store's own clock
// (the database server's now()): client clocks never decide expiry.
type Store interface {
	// Add sets the last activity of each known entity (deleted or not) to
	// the greater of it and At; unknown ids are ignored and an id may
	// repeat. The batch is one statement or transaction, and on error at
	// most greater-wins merges were applied, so a retry is safe.
	Add(ctx context.Context, acts []Activity) error

	// Apply sets r.Then as the desired state of every entity r matches at
	// the Store's now, in one conditional update, and returns an Expiry for
	// each, in any order. Each entity is changed and returned by exactly
	// one Apply, even under concurrent Applies. An invalid rule (see
	// [Rule.Validate]) changes nothing and fails with an error matching
	// [ErrInvalid].
	Apply(ctx context.Context, r Rule) ([]Expiry, error)
}

// Expiry is one entity a rule changed, as [Store.Apply] returns it and
// [RunnerOptions.Wake] receives it. A last activity later than
// LastActivityAt is activity after the decision.
type Expiry struct {
	ID             string    // the entity
	Rule           string    // the rule's name (Rule.String)
	Then           string    // the desired state the rule set
	LastActivityAt time.Time // the entity's last activity at the decision
	DecidedAt      time.Time // the Store's now at the decision
}
