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

// Sink receives activity flushed by a Tracker. A Buffer is a Sink; ToStore
// turns a Store into one for deployments without a middle stage.
//
// Add merges with "greater wins": for every id the receiver keeps the
// greatest time it has seen, so batches that arrive late or out of order
// never move an entity's activity backwards.
type Sink interface {
	// Add merges acts, greater wins. On error the Tracker keeps acts and
	// sends them again with its next flush.
	Add(ctx context.Context, acts []Activity) error
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(ctx context.Context, acts []Activity) error

// Add calls f(ctx, acts).
func (f SinkFunc) Add(ctx context.Context, acts []Activity) error { return f(ctx, acts) }

// ToStore returns a Sink that merges activity straight into s with
// Store.MergeActivity, for a Tracker that writes to the source of truth
// without a Buffer in between. A flush the store refuses stays in the
// Tracker, which the Runner cannot see: its idle rules then judge by the
// store's older activity, so prefer a Buffer when the store may be down.
func ToStore(s Store) Sink {
	return SinkFunc(s.MergeActivity)
}
