package pool

import (
	"strconv"
	"time"
)

// Reason says why an item left the pool, in an [Event] and as a key of
// [Stats.Destroyed]. Besides the constants, the pool reports "idle" (beyond
// IdleTimeout or MaxIdle, or above a new MaxSize), "lifetime", "warm_ttl",
// "shutdown" (Close) and "evicted" (Handle.Destroy with an empty reason, or with one
// of the caller's, which its Event carries).
type Reason string

// The reasons of failures a user may act on.
const (
	ReasonUnhealthy Reason = "unhealthy" // Check or the fn of Do failed; Handle.Destroy(ReasonUnhealthy) for an item found broken
	ReasonDied      Reason = "died"      // reported dead by the Provisioner's Watcher
	ReasonOrphan    Reason = "orphan"    // listed by the provider, unknown to the pool
	ReasonLost      Reason = "lost"      // known to the pool, no longer listed by the provider: forgotten, not destroyed
)

const (
	reasonIdle     Reason = "idle"
	reasonLifetime Reason = "lifetime"
	reasonWarmTTL  Reason = "warm_ttl"
	reasonShutdown Reason = "shutdown"
	reasonEvicted  Reason = "evicted"
)

var reasons = [...]Reason{reasonIdle, reasonLifetime, reasonWarmTTL, ReasonUnhealthy, ReasonOrphan, reasonShutdown, reasonEvicted, ReasonLost, ReasonDied}

func reasonIndex(r Reason) int {
	for i, x := range reasons {
		if x == r {
			return i
		}
	}
	return 6 // evicted
}

// EventKind is the kind of a lifecycle Event.
type EventKind int

// Event kinds.
const (
	EventCreated   EventKind = iota + 1 // an item was created, or Create failed (Err)
	EventDestroyed                      // an item left the pool (Reason says why), or its Destroy failed (Err)
	EventDetached                       // an item was taken out of the pool for good (Handle.Detach)
)

// String returns "created", "destroyed" or "detached" (stable, for logs and
// metrics), or "EventKind(N)".
func (k EventKind) String() string {
	switch k {
	case EventCreated:
		return "created"
	case EventDestroyed:
		return "destroyed"
	case EventDetached:
		return "detached"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is a lifecycle event delivered to Options.OnEvent.
type Event struct {
	Kind   EventKind // what happened
	Time   time.Time // when, by the pool's clock
	Reason Reason    // why, for EventDestroyed
	ID     string    // the item's ID, when the Provisioner provides one
	Err    error     // the error of a failed Create or Destroy
}

// Stats is a snapshot of a Pool: gauges (int) are current, counters (uint64)
// cumulative since New.
type Stats struct {
	MaxSize    int // Options.MaxSize
	Size       int // items counted against MaxSize: idle + in use + creating + destroying (+ being checked)
	Idle       int // idle items held by this instance (shared idle items are in Inventory.Counts)
	InUse      int // items handed out
	Creating   int // creates (or shared pops) in flight, including Create calls past CreateTimeout
	Destroying int // destroys in flight
	Waiting    int // Acquire calls waiting now

	WaitCount      uint64            // acquires that had to wait for capacity (not merely for a create)
	WaitDuration   time.Duration     // total time those acquires waited, those that gave up included (exact for the first 1024 waits, then estimated from every 8th)
	CanceledWaits  uint64            // waits that ended with the caller's context
	Creates        uint64            // items created
	CreateFailures uint64            // creates that failed, panicked or timed out
	Destroyed      map[Reason]uint64 // items destroyed (or forgotten: lost), by Reason; every reason on Reason's list is a key
	DestroyErrors  uint64            // Destroy calls that failed
	Orphans        uint64            // orphans found by Reconcile (and start-up cleanup)
	Detached       uint64            // items taken out of the pool for good by Handle.Detach
	Spared         uint64            // would-be orphans spared because Options.Owned owns them
	EventsDropped  uint64            // events not delivered because OnEvent fell behind
}

// Stats returns a snapshot of the pool's state and counters.
func (p *Pool[T]) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	inUse := 0
	for _, h := range p.items {
		if h.state.Load() == stateInUse {
			inUse++
		}
	}
	s := Stats{
		MaxSize:        p.opts.MaxSize,
		Size:           p.totalLocked(),
		Idle:           len(p.idle),
		InUse:          inUse,
		Creating:       p.creating + p.late,
		Destroying:     p.destroying,
		Waiting:        int(p.waiting.Load()),
		CanceledWaits:  uint64(p.canceledWaits.Load()),
		Creates:        p.creates,
		CreateFailures: p.createFailures,
		DestroyErrors:  p.destroyErrors,
		Orphans:        p.orphans,
		Detached:       p.detached,
		Spared:         p.spared,
		WaitCount:      uint64(p.waitCount.Load()),
		WaitDuration:   time.Duration(p.waitNanos.Load()),
		EventsDropped:  p.events.Dropped(),
	}
	s.Destroyed = make(map[Reason]uint64, len(reasons))
	for i, r := range reasons {
		s.Destroyed[r] = p.destroyed[i]
	}
	return s
}

// emit queues an event for OnEvent without blocking; a full queue drops
// it (Stats.EventsDropped).
func (p *Pool[T]) emit(kind EventKind, reason Reason, id string, err error) {
	if !p.events.Enabled() {
		return
	}
	p.eventsSent.Add(1)
	p.events.Send(Event{Kind: kind, Time: p.clock.Now(), Reason: reason, ID: id, Err: err})
}
