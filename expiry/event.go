package expiry

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Reason tells how a key expired.
type Reason int

const (
	// Passive: an access (Get, TTL, Set, ...) found the key expired and
	// deleted it.
	Passive Reason = iota + 1
	// Active: the Expirer's sampling found the key expired and deleted it.
	Active
)

// String returns "passive" or "active".
func (r Reason) String() string {
	switch r {
	case Passive:
		return "passive"
	case Active:
		return "active"
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// Event describes one expired key, as delivered to an OnExpire callback.
type Event[K comparable, V any] struct {
	Key      K         // the expired key
	Value    V         // its value when it was deleted
	Reason   Reason    // how it was found expired
	Deadline time.Time // the deadline that passed
}

// events carries expiry events to one worker goroutine through a bounded
// queue. A full queue drops the event (counted): expiry, and so Get, never
// waits for a slow callback.
type events[K comparable, V any] struct {
	fn atomic.Pointer[func(Event[K, V])]
	ch chan Event[K, V]

	mu      sync.Mutex
	started bool
	closed  bool
	stop    chan struct{}
	done    chan struct{}
	log     *slog.Logger

	delivered, dropped atomic.Uint64
}

func newEvents[K comparable, V any](size int, log *slog.Logger) *events[K, V] {
	return &events[K, V]{
		ch:   make(chan Event[K, V], size),
		stop: make(chan struct{}),
		done: make(chan struct{}),
		log:  log,
	}
}

// enabled reports whether a callback is set; callers build an Event only
// then.
func (q *events[K, V]) enabled() bool { return q.fn.Load() != nil }

// send queues ev without blocking.
func (q *events[K, V]) send(ev Event[K, V]) {
	select {
	case q.ch <- ev:
	default:
		if q.dropped.Add(1) == 1 && q.log != nil {
			q.log.LogAttrs(context.Background(), slog.LevelWarn,
				"expiry: event queue full, dropping expiry events",
				slog.Int("capacity", cap(q.ch)))
		}
	}
}

func (q *events[K, V]) set(f func(Event[K, V])) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if f == nil || q.closed {
		q.fn.Store(nil)
		return
	}
	q.fn.Store(&f)
	if !q.started {
		q.started = true
		go q.run()
	}
}

func (q *events[K, V]) run() {
	defer close(q.done)
	for {
		select {
		case ev := <-q.ch:
			q.deliver(ev)
		case <-q.stop:
			// Deliver what was queued before Close, then stop.
			for {
				select {
				case ev := <-q.ch:
					q.deliver(ev)
				default:
					return
				}
			}
		}
	}
}

func (q *events[K, V]) deliver(ev Event[K, V]) {
	if f := q.fn.Load(); f != nil {
		(*f)(ev)
		q.delivered.Add(1)
	}
}

// close stops the worker after it delivered the queued events, and waits;
// so does every later call.
func (q *events[K, V]) close() {
	q.mu.Lock()
	if q.closed {
		started := q.started
		q.mu.Unlock()
		if started {
			<-q.done
		}
		return
	}
	q.closed = true
	started := q.started
	close(q.stop)
	q.mu.Unlock()
	if started {
		<-q.done
	}
	q.fn.Store(nil)
}
