package ttl

import (
	"context"
	"time"
)

// Activity is the latest known activity time of one entity.
type Activity struct {
	// ID identifies the entity.
	ID string
	// At is when the entity was last active.
	At time.Time
}

// Sink receives activity flushed by a Tracker. A Buffer is a Sink, and so
// is a Store, for deployments without a middle stage. A flush the store
// refuses then stays in the Tracker, which the Runner cannot see: its idle
// rules judge by the store's older activity, so prefer a Buffer when the
// store may be down.
//
// Add merges with "greater wins": for every id the receiver keeps the
// greatest time it has seen, so batches that arrive late or out of order
// never move an entity's activity backwards.
type Sink interface {
	// Add merges acts, greater wins. On error the Tracker keeps acts and
	// sends them again with its next flush.
	Add(ctx context.Context, acts []Activity) error
}
