package pool

import (
	"context"
	"encoding/json"
	"time"
)

// Provisioner creates and destroys the items a Pool holds: containers,
// worker processes, connections. Both methods may be slow; the Pool calls
// them without holding any lock, under its own context bounded by
// Options.CreateTimeout and Options.DestroyTimeout, never under a caller's.
type Provisioner[T any] interface {
	// Create makes a new, ready item. An item returned with a nil error
	// belongs to the Pool, which will eventually pass it to Destroy.
	Create(ctx context.Context) (T, error)
	// Destroy releases an item for good. The Pool calls it once per item
	// it created or adopted (and once per orphan Reconcile finds). Destroy
	// should treat an item that is already gone as success.
	Destroy(ctx context.Context, item T) error
}

// Checker is implemented by a Provisioner that can health-check an item.
// CheckHealth calls it on idle items every Options.HealthCheckInterval; an
// item whose Check fails is destroyed with ReasonUnhealthy and replaced.
type Checker[T any] interface {
	Check(ctx context.Context, item T) error
}

// Watcher is implemented by a Provisioner that learns when an item dies: a
// worker process exits, a container stops. The Pool watches every item it
// holds and destroys a dead idle item at once (ReasonDied), and a dead item
// in use when it is released, so no item whose death the Provisioner has
// reported is ever handed out, without a Check per acquire.
type Watcher[T any] interface {
	// Watch returns a channel that is closed when item dies, and is
	// already closed if it has died. The Pool calls it once per item it
	// takes (created, or popped from a shared Inventory), outside its
	// locks, and cancels ctx once it no longer holds the item (destroyed,
	// detached, returned to a shared Inventory) or closes: Watch must then
	// let go of whatever it started for item. A nil channel means item
	// cannot be watched.
	Watch(ctx context.Context, item T) <-chan struct{}
}

// Lister is implemented by a Provisioner that can list what really exists
// at the provider (an agent's list of workers, the containers with a given
// label).
// Reconcile and the start-up cleanup use it to find orphans and lost items.
type Lister[T any] interface {
	// List returns every item the provider holds for this pool, including
	// items another pool instance or an earlier process created.
	List(ctx context.Context) ([]Listed[T], error)
	// ID returns the provider's stable identity of item; the same string
	// List reports for it.
	ID(item T) string
}

// Listed is one item as the provider lists it.
type Listed[T any] struct {
	// ID is the provider's identity of the item, equal to Lister.ID(Value).
	ID string
	// Value is enough of the item to pass to Destroy.
	Value T
	// Created is when the provider made it; zero if unknown, in which case
	// the orphan grace period counts from when the Pool first saw it.
	Created time.Time
}

// jsonCodec is the codec of a Provisioner that is no shared.Codec.
type jsonCodec[T any] struct{}

func (jsonCodec[T]) Encode(item T) ([]byte, error) { return json.Marshal(item) }

func (jsonCodec[T]) Decode(data []byte) (T, error) {
	var v T
	err := json.Unmarshal(data, &v)
	return v, err
}
