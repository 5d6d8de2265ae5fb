package shared

import (
	"context"
	"errors"
	"time"
)

// Inventory keeps the idle set and the item records of one logical pool,
// which several pool instances (several processes) share.
//
// A pool.Pool with an Inventory (pool.Options.Inventory) takes idle items
// from it and returns them to it, registers every item it holds in use, and
// counts warm items across all instances, so that:
//
//   - an idle item is handed to exactly one holder in the whole fleet (Pop
//     and Claim are atomic);
//   - the warm target (pool.Options.MinIdle) and the idle limit
//     (pool.Options.MaxIdle) are global: Counts, Reserve and Put see every
//     instance's items;
//   - Reconcile on any instance knows every instance's items (Records), so it
//     never destroys an item another instance is using, while the items of
//     a dead instance stop being known when their records expire and are then
//     cleaned up as orphans.
//
// Items are identified by a string ID (the Provisioner's ID(T) string
// method) and carried as bytes ([Record].Data, from the Provisioner's
// [Codec], or JSON). An Inventory never creates or destroys items; it only
// records them.
//
// Every method must be safe for concurrent use, and each method must be atomic
// with respect to every other call on any instance sharing the same store
// (a Redis Lua script or MULTI/EXEC, a SQL transaction, a mutex). Record
// expiry (ttl) is decided by the store's clock (Redis TIME, SQL now()). A ttl
// of zero means the record does not expire. A record that has expired is
// absent for every method, even if the store has not reclaimed it yet.
//
// [NewMemoryInventory] returns the in-process implementation;
// pool/redispool shares one inventory among processes. Every
// implementation must pass pool/pooltest.Run.
type Inventory interface {
	// Add records a new item. With rec.Owner == "" the item joins the idle
	// set (at the back, if the store keeps an order); otherwise it is
	// registered as in use by rec.Owner. Add fails with an error wrapping
	// ErrExists, and changes nothing, if a live record with rec.ID exists.
	// Add does not look at the idle limit: the Pool adds a new item as in
	// use by itself and then offers it to the idle set with Put.
	Add(ctx context.Context, rec Record, ttl time.Duration) error

	// Pop atomically takes one idle item out of the idle set, registers it
	// as in use by owner (Record.Owner = owner) with a fresh ttl, and returns
	// its record. ok is false, with a nil error, when the idle set is empty.
	// Two concurrent Pops, from any instances, never return the same item.
	// Implementations should pop the oldest idle item first (FIFO), so that
	// warm items cycle and none ages out unused.
	Pop(ctx context.Context, owner string, ttl time.Duration) (rec Record, ok bool, err error)

	// Claim atomically takes the idle item id out of the idle set and
	// registers it as in use by owner, with a fresh ttl. ok is false, and
	// nothing changes, unless the item is live and idle. The janitor claims
	// an expired idle item before destroying it, so no other instance can pop
	// it meanwhile.
	Claim(ctx context.Context, id, owner string, ttl time.Duration) (ok bool, err error)

	// Put returns an item owner holds to the idle set, storing rec.Data and
	// rec.LastUsed and refreshing the ttl. It is atomic: if the idle set
	// already holds maxIdle or more items (maxIdle > 0), nothing changes and
	// ok is false (the item stays in use by owner, and the Pool destroys it).
	// If no live record rec.ID is in use by owner (it expired, was removed or
	// claimed elsewhere), Put changes nothing and returns ErrNotHeld.
	Put(ctx context.Context, rec Record, maxIdle int, ttl time.Duration) (ok bool, err error)

	// Touch refreshes the ttl of the records in ids that are in use by owner,
	// the heartbeat that keeps an instance's busy items known while it is
	// alive. It returns the ids that are no longer in use by owner.
	Touch(ctx context.Context, owner string, ids []string, ttl time.Duration) (lost []string, err error)

	// Remove deletes the record id, idle or in use, and reports whether a
	// live record existed. Only the caller that gets true may destroy the
	// item when it was idle; the Pool removes an item it holds after
	// destroying it.
	Remove(ctx context.Context, id string) (existed bool, err error)

	// Records returns a snapshot of every live record, idle and in use, of
	// every instance. Reconcile treats exactly these IDs (plus its own items
	// in flight) as known.
	Records(ctx context.Context) ([]Record, error)

	// Counts returns the number of live idle records, in-use records and
	// reservations, across all instances, as one consistent snapshot.
	Counts(ctx context.Context) (Counts, error)

	// Reserve atomically registers a create in flight towards the warm
	// target: if idle records plus live reservations number fewer than
	// target, it records token with the ttl and returns true; otherwise it
	// changes nothing and returns false. Reserving a token that already
	// exists refreshes it and returns true. The reservation ends with
	// Unreserve or when its ttl expires (a creator that died).
	Reserve(ctx context.Context, token string, target int, ttl time.Duration) (ok bool, err error)

	// Unreserve ends the reservation token. A missing token is not an error.
	Unreserve(ctx context.Context, token string) error
}

// Record is what an Inventory keeps about one item. Times are stamped by the
// Pool's clock; stores keep them to at least millisecond precision.
type Record struct {
	// ID is the item's identity (the Provisioner's ID).
	ID string
	// Owner is the instance holding the item in use, or "" when idle.
	Owner string
	// Data is the item encoded by the Provisioner's Codec (or JSON).
	Data []byte
	// Created is when the item was created.
	Created time.Time
	// Deadline is the end of the item's lifetime (MaxLifetime less its
	// jitter), or zero for none.
	Deadline time.Time
	// LastUsed is when the item was last released; zero means it was never
	// used (a warm item, subject to pool.Options.WarmTTL).
	LastUsed time.Time
}

// Counts is a snapshot of an Inventory's sizes.
type Counts struct {
	Idle     int // live records in the idle set
	InUse    int // live records in use by some instance
	Reserved int // live create reservations
}

// Inventory errors.
var (
	// ErrExists is returned by Inventory.Add for an ID already recorded.
	ErrExists = errors.New("shared: item already in inventory")
	// ErrNotHeld is returned by Inventory.Put when the owner no longer
	// holds the record.
	ErrNotHeld = errors.New("shared: item not held by this instance")
)

// Codec turns an item into bytes and back, so that an Inventory can carry an
// item made by one process to another. A Provisioner that implements Codec
// is its own codec; otherwise items travel as JSON (encoding/json), and T's
// exported fields must describe the item completely (a container ID, host
// and port, say).
type Codec[T any] interface {
	Encode(item T) ([]byte, error)
	Decode(data []byte) (T, error)
}
