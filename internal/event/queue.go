// Package event is the asynchronous event queue behind every ttlkit
// Options.OnEvent: events are delivered in order, on one goroutine per owner,
// outside the owner's locks; a full queue drops the event and counts it, so
// the hot path that emits an event never waits for the callback.
package event

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// DefaultSize is the queue capacity used when an owner's Options.EventQueue
// is 0.
const DefaultSize = 1024

// MaxSize bounds Options.EventQueue: a larger queue is refused at New, so a
// typo cannot allocate gigabytes up front.
const MaxSize = 1 << 20

// Queue delivers events of type E to one callback. A nil *Queue is valid and
// discards everything, so owners without a callback pay one nil check.
type Queue[E any] struct {
	fn   func(E)
	ch   chan E
	stop chan struct{}
	done chan struct{}
	log  *slog.Logger
	name string

	closeOnce sync.Once
	dropped   atomic.Uint64
	delivered atomic.Uint64
	panics    atomic.Uint64
}

// New starts a queue of capacity size (0 means DefaultSize) that calls fn
// for each event. It returns nil when fn is nil. name prefixes the warning
// logged on the first drop ("pool", "lease", ...); log may be nil.
func New[E any](fn func(E), size int, log *slog.Logger, name string) *Queue[E] {
	if fn == nil {
		return nil
	}
	if size <= 0 {
		size = DefaultSize
	}
	q := &Queue[E]{
		fn:   fn,
		ch:   make(chan E, size),
		stop: make(chan struct{}),
		done: make(chan struct{}),
		log:  log,
		name: name,
	}
	go q.run()
	return q
}

// CheckSize returns an error naming field when size is out of range.
func CheckSize(pkg, field string, size int) error {
	if size < 0 || size > MaxSize {
		return fmt.Errorf("%s: %s (%d) must be between 0 and %d", pkg, field, size, MaxSize)
	}
	return nil
}

// Enabled reports whether events are delivered; owners build an event only
// then.
func (q *Queue[E]) Enabled() bool { return q != nil }

// Send queues e without blocking. When the queue is full, e is dropped and
// counted, and the first drop is logged at Warn. After Close, Send drops e
// without counting it.
func (q *Queue[E]) Send(e E) {
	if q == nil {
		return
	}
	select {
	case <-q.stop:
		return
	default:
	}
	select {
	case q.ch <- e:
	default:
		if q.dropped.Add(1) == 1 && q.log != nil {
			q.log.LogAttrs(context.Background(), slog.LevelWarn,
				q.name+": event queue full, dropping events",
				slog.Int("capacity", cap(q.ch)))
		}
	}
}

// Dropped returns the number of events dropped because the queue was full.
func (q *Queue[E]) Dropped() uint64 {
	if q == nil {
		return 0
	}
	return q.dropped.Load()
}

// Delivered returns the number of events the callback has returned from.
func (q *Queue[E]) Delivered() uint64 {
	if q == nil {
		return 0
	}
	return q.delivered.Load()
}

func (q *Queue[E]) run() {
	defer close(q.done)
	for {
		select {
		case e := <-q.ch:
			q.deliver(e)
		case <-q.stop:
			// Deliver what was queued before Close, then stop.
			for {
				select {
				case e := <-q.ch:
					q.deliver(e)
				default:
					return
				}
			}
		}
	}
}

// deliver calls the callback. A callback that panics is logged at Error
// with its stack and counted, and the next event is delivered as usual: as
// net/http does for a handler, one bad event never stops the owner's
// delivery, nor crashes the program from a goroutine the user did not start.
func (q *Queue[E]) deliver(e E) {
	defer func() {
		if v := recover(); v != nil {
			q.panics.Add(1)
			if q.log != nil {
				q.log.LogAttrs(context.Background(), slog.LevelError,
					q.name+": OnEvent panicked",
					slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
			}
		}
	}()
	q.fn(e)
	q.delivered.Add(1)
}

// Panics returns the number of events whose callback panicked.
func (q *Queue[E]) Panics() uint64 {
	if q == nil {
		return 0
	}
	return q.panics.Load()
}

// Close stops accepting events, lets the worker deliver what was queued and
// waits for it until ctx ends; then it returns an error wrapping
// context.Cause(ctx). Close is idempotent: a later call waits the same way.
func (q *Queue[E]) Close(ctx context.Context) error {
	if q == nil {
		return nil
	}
	q.closeOnce.Do(func() { close(q.stop) })
	select {
	case <-q.done:
		return nil
	default:
	}
	select {
	case <-q.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: event callback still running (%d queued): %w",
			q.name, len(q.ch), context.Cause(ctx))
	}
}
