package pool

import (
	"context"
	"encoding/json"
	"time"
)

// Provisioner creates and destroys the items a Pool holds. The Pool calls it
// outside its locks, under its own context bounded by [Options.CreateTimeout] and
// [Options.DestroyTimeout], never under a caller's.
type Provisioner[T any] interface {
	// Create makes a new, ready item; the Pool owns it and will pass it to Destroy.
	Create(ctx context.Context) (T, error)
	// Destroy releases item for good, called once per item; an item already gone is a success.
	Destroy(ctx context.Context, item T) error
}

// Checker is a Provisioner that health-checks items: see [Pool.CheckHealth] and
// [Options.CheckOnAcquire].
type Checker[T any] interface {
	Check(ctx context.Context, item T) error
}

// Watcher is implemented by a Provisioner that learns when an item dies (a process
// exits). A dead item is destroyed ([ReasonDied]) at once if idle, else on release,
// so none is handed out, without a Check per acquire.
type Watcher[T any] interface {
	// Watch returns a channel closed when item dies (already closed if dead), or nil if item
	// cannot be watched. It is called once per item the Pool takes, outside its locks; ctx ends
	// when the Pool lets go of the item or closes, and Watch must then release what it started.
	Watch(ctx context.Context, item T) <-chan struct{}
}

// Lister is a Provisioner that lists what exists, so that [Pool.Reconcile] and
// [Options.CleanupOnStart] find orphans.
type Lister[T any] interface {
	// List returns every item held for this pool, including other instances' and earlier processes'.
	List(ctx context.Context) ([]Listed[T], error)
	// ID returns the provider's stable identity of item, as List reports it.
	ID(item T) string
}

// Listed is one item as the provider lists it.
type Listed[T any] struct {
	ID      string    // equal to Lister.ID(Value)
	Value   T         // enough of the item to pass to Destroy
	Created time.Time // zero if unknown: the grace period then counts from when the Pool first saw it
}

// jsonCodec is the codec of a Provisioner that is no shared.Codec.
type jsonCodec[T any] struct{}

func (jsonCodec[T]) Encode(item T) ([]byte, error) { return json.Marshal(item) }

func (jsonCodec[T]) Decode(data []byte) (T, error) {
	var v T
	err := json.Unmarshal(data, &v)
	return v, err
}
