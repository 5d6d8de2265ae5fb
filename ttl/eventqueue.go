package ttl

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/ttlkit/ttlkit/internal/event"
)

// eventQueue carries a Tracker's or a Runner's events to OnEvent, in
// order, on one goroutine (see Event). No kind may fill more than its share
// of the queue, seven eighths of it: a burst of one kind, thousands of
// expire events when many entities expire on one tick, then leaves room for
// the rare ones an operator needs (buffer_lost, rule_error,
// rule_skipped), which would otherwise be dropped behind it.
//
// A nil *eventQueue discards everything. Send is called by one goroutine
// at a time (under Tracker.flushMu or Runner.tickMu).
type eventQueue struct {
	q      *event.Queue[Event]
	share  int64
	queued [EventBufferLost + 1]atomic.Int64 // per kind; 0 for unknown kinds
	// dropped counts the events dropped over their kind's share.
	dropped atomic.Uint64
	log     *slog.Logger
	name    string
}

// newEventQueue returns a queue of capacity size (0 means
// defaultEventQueue) calling fn, or nil if fn is nil. name prefixes the
// warning logged on the first drop.
func newEventQueue(fn func(Event), size int, log *slog.Logger, name string) *eventQueue {
	if fn == nil {
		return nil
	}
	if size <= 0 {
		size = defaultEventQueue
	}
	eq := &eventQueue{share: int64(size - size/8), log: log, name: name}
	eq.q = event.New(func(e Event) {
		eq.queued[kindIndex(e.Kind)].Add(-1)
		fn(e)
	}, size, log, name)
	return eq
}

// kindIndex returns k's index in eventQueue.queued.
func kindIndex(k EventKind) int {
	if k < EventFlush || k > EventBufferLost {
		return 0
	}
	return int(k)
}

// Enabled reports whether events are delivered; owners build an event only
// then.
func (eq *eventQueue) Enabled() bool { return eq != nil }

// Send queues e without blocking, unless its kind already fills its share
// of the queue, or the queue is full: then e is dropped and counted.
func (eq *eventQueue) Send(e Event) {
	if eq == nil {
		return
	}
	n := &eq.queued[kindIndex(e.Kind)]
	if n.Add(1) > eq.share {
		n.Add(-1)
		if eq.dropped.Add(1) == 1 {
			eq.log.LogAttrs(context.Background(), slog.LevelWarn,
				eq.name+": events of one kind fill their share of the event queue, dropping them",
				slog.String("kind", e.Kind.String()), slog.Int64("share", eq.share))
		}
		return
	}
	before := eq.q.Dropped()
	eq.q.Send(e)
	if eq.q.Dropped() != before {
		n.Add(-1)
	}
}

// Dropped returns the number of events dropped, over their kind's share or
// because the queue was full.
func (eq *eventQueue) Dropped() uint64 {
	if eq == nil {
		return 0
	}
	return eq.dropped.Load() + eq.q.Dropped()
}

// Close delivers what was queued and waits for the callback until ctx
// ends (see event.Queue.Close).
func (eq *eventQueue) Close(ctx context.Context) error {
	if eq == nil {
		return nil
	}
	return eq.q.Close(ctx)
}
