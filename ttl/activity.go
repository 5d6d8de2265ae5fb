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

// Sink receives the activity a Tracker flushes: a [Buffer], or a [Store]
// when there is no middle stage. A flush the Store refuses stays in the
// Tracker, unseen by the Runner, so prefer a Buffer when the Store may be
// down.
type Sink interface {
	// Add merges acts, keeping each id's greatest time, so late or
	// reordered batches never move activity backwards. On error the
	// Tracker keeps acts for its next flush.
	Add(ctx context.Context, acts []Activity) error
}
