package pool

import (
	"strconv"
	"time"
)

// Reason says why an item was destroyed or dropped.
type Reason string

// Destroy reasons, as counted in Stats.Destroyed and reported in events.
const (
	ReasonIdle      Reason = "idle"      // idle beyond IdleTimeout, or beyond MaxIdle on release
	ReasonLifetime  Reason = "lifetime"  // MaxLifetime reached
	ReasonWarmTTL   Reason = "warm_ttl"  // never used within WarmTTL
	ReasonUnhealthy Reason = "unhealthy" // Check failed
	ReasonOrphan    Reason = "orphan"    // listed by the provider, unknown to the pool
	ReasonShutdown  Reason = "shutdown"  // destroyed by Close
	ReasonEvicted   Reason = "evicted"   // Handle.Destroy (any reason not listed here counts as evicted)
	ReasonLost      Reason = "lost"      // known to the pool, no longer listed by the provider
	ReasonDied      Reason = "died"      // reported dead by the Provisioner's Watcher
)

var reasons = [...]Reason{ReasonIdle, ReasonLifetime, ReasonWarmTTL, ReasonUnhealthy, ReasonOrphan, ReasonShutdown, ReasonEvicted, ReasonLost, ReasonDied}

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
	EventCreated       EventKind = iota + 1 // an item was created
	EventCreateFailed                       // Create returned an error, panicked or ran past CreateTimeout
	EventDestroyed                          // an item was destroyed (Reason says why)
	EventDestroyFailed                      // Destroy returned an error (Reason says why it was called)
	EventDropped                            // an item the provider no longer lists was forgotten
	EventDetached                           // an item was taken out of the pool for good (Handle.Detach)
)

// String returns the kind's stable lower_snake name ("destroy_failed"),
// usable as a log field or a metric label, or "EventKind(N)" for an
// unknown kind.
func (k EventKind) String() string {
	switch k {
	case EventCreated:
		return "created"
	case EventCreateFailed:
		return "create_failed"
	case EventDestroyed:
		return "destroyed"
	case EventDestroyFailed:
		return "destroy_failed"
	case EventDropped:
		return "dropped"
	case EventDetached:
		return "detached"
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is a lifecycle event delivered to Options.OnEvent.
type Event struct {
	Kind   EventKind // what happened
	Time   time.Time // when, by the pool's clock
	Reason Reason    // why, for destroy and drop events
	ID     string    // the item's ID, when the Provisioner provides one
	Err    error     // the error, for failures
}

// DestroyCounts counts destroyed items by reason.
type DestroyCounts struct {
	Idle, Lifetime, WarmTTL, Unhealthy, Orphan, Shutdown, Evicted, Lost, Died uint64
}

// Stats is a snapshot of a Pool's state and counters, in the spirit of
// sql.DBStats. Counters (uint64) are cumulative since New; gauges (int)
// are current amounts.
type Stats struct {
	MaxSize    int // Options.MaxSize
	Size       int // items counted against MaxSize: idle + in use + creating + destroying (+ being checked)
	Idle       int // idle items held by this instance (shared idle items are in Inventory.Counts)
	InUse      int // items handed out
	Creating   int // creates (or shared pops) in flight, including Create calls past CreateTimeout
	Destroying int // destroys in flight
	Waiting    int // Acquire calls waiting now

	WaitCount      uint64        // acquires that had to wait for capacity (not merely for a create)
	WaitDuration   time.Duration // total time those acquires waited, those that gave up included (exact for the first 1024 waits, then estimated from every 8th)
	CanceledWaits  uint64        // waits that ended with the caller's context
	Creates        uint64        // items created
	CreateFailures uint64        // creates that failed, panicked or timed out
	Destroyed      DestroyCounts // items destroyed, by reason
	DestroyErrors  uint64        // Destroy calls that failed
	Orphans        uint64        // orphans found by Reconcile (and start-up cleanup)
	Detached       uint64        // items taken out of the pool for good by Handle.Detach
	Spared         uint64        // would-be orphans spared because Options.Owned owns them
	EventsDropped  uint64        // events not delivered because OnEvent fell behind
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
	d := p.destroyed
	s.Destroyed = DestroyCounts{d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8]}
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
