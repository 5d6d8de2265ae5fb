package ttl

import (
	"context"
	"time"
)

// Activity is the latest known activity time of one entity.
type Activity struct {
	ID string    // the entity
	At time.Time // when it was last active
}

// Sink receives a Tracker's flushes: a [Buffer], or a [Store] (then a
// refused flush stays in the Tracker, unseen by the Runner).
type Sink interface {
	// Add merges acts, keeping each id's greatest time. On error the
	// Tracker keeps acts for its next flush.
	Add(ctx context.Context, acts []Activity) error
}
