package ttl

import (
	"context"
	"time"
)

// Store is the user's table of entities, the source of truth; the system
// writes all but activity and desired state itself (ttl/pgttl is a Store on
// PostgreSQL). A Store passes ttltest.RunStore and is safe for concurrent
// use, also by several processes. An entity has an ID, a phase, a desired
// state ("" for none) and the timestamps a [Rule] measures from. "Now" is
// the Store's clock (the database's now()), never a client's.
type Store interface {
	// Add raises each known entity's last activity (deleted or not) to At
	// if later; unknown ids are ignored, and ids may repeat. A batch is one
	// statement or transaction, so retrying it after an error is safe.
	Add(ctx context.Context, acts []Activity) error

	// Apply sets r.Then on every entity r matches now, in one conditional
	// update, and returns an Expiry for each, in any order; concurrent
	// Applies change and return each entity once. An invalid rule changes
	// nothing and fails with an error matching [ErrInvalid].
	Apply(ctx context.Context, r Rule) ([]Expiry, error)
}

// Expiry is one entity a rule changed. A controller that finds activity
// after LastActivityAt keeps the entity and clears its desired state, so
// the rule can fire again.
type Expiry struct {
	ID             string    // the entity
	Rule           string    // the rule's name (Rule.String)
	Then           string    // the desired state the rule set
	LastActivityAt time.Time // the entity's last activity at the decision
	DecidedAt      time.Time // the Store's now at the decision
}
