package lease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrLost is matched by [KeepAlive.Err] when the store reported the lease
// expired or unknown, or no heartbeat succeeded in time; it wraps the cause.
var ErrLost = errors.New("lease: lost")

// KeepAlive heartbeats one lease on its own goroutine and reports, through
// Done and Err, when the lease can no longer be trusted: at its local
// deadline ([HeartbeatResult].LocalDeadline of the last success), never
// later than the store's, where a heartbeat still in flight is abandoned.
type KeepAlive struct {
	m        *Manager
	id       string
	holder   string // checked on every heartbeat: l.Holder
	grace    time.Duration
	interval time.Duration

	// stop ends when the KeepAlive is told to stop; it also cancels a
	// heartbeat in flight.
	stop    context.Context
	stopNow context.CancelFunc
	done    chan struct{}
	err     error // set before done is closed
}

// KeepAlive heartbeats l every interval (0 means l.Grace / 3), the first at
// once, until the lease is lost, released through m, m is closed, ctx ends
// or Close is called. Until the first returns, l is trusted for what it had
// left from when m sent its Grant, or, for a Lease from elsewhere, from this
// call: make it right after the call that returned l.
func (m *Manager) KeepAlive(ctx context.Context, l Lease, interval time.Duration) *KeepAlive {
	if interval <= 0 {
		interval = max(l.Grace/3, time.Millisecond)
	}
	k := &KeepAlive{m: m, id: l.ID, holder: l.Holder, grace: l.Grace, interval: interval, done: make(chan struct{})}
	k.stop, k.stopNow = context.WithCancel(context.Background())
	// Until the first heartbeat returns, trust the lease for what the grant
	// left, counted from when it was sent (the store granted it no earlier).
	start := l.sent
	if start.IsZero() {
		start = m.clock.Now()
	}
	deadline := start.Add(remaining(l, l.HeartbeatAt))
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		k.finish(ErrClosed)
		return k
	}
	m.keepAlives[k] = struct{}{}
	m.nKeep.Add(1)
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		k.finish(k.run(ctx, deadline))
		m.mu.Lock()
		delete(m.keepAlives, k)
		m.nKeep.Add(-1)
		m.mu.Unlock()
	}()
	return k
}

// Done is closed when the KeepAlive stops, for whatever reason.
func (k *KeepAlive) Done() <-chan struct{} { return k.done }

// Err returns nil while the KeepAlive runs and after Close or a Release
// through the Manager; an error matching [ErrLost] if the lease was lost;
// ErrClosed after the Manager's Close; ctx's error if ctx ended.
func (k *KeepAlive) Err() error {
	select {
	case <-k.done:
		return k.err
	default:
		return nil
	}
}

// Close stops heartbeating (Err stays nil unless it had stopped already),
// leaving the lease to expire unless released. It waits until ctx ends, then
// returns an error wrapping context.Cause(ctx); a later call waits the same
// way, and returns nil once the goroutine has stopped.
func (k *KeepAlive) Close(ctx context.Context) error {
	k.signal()
	select {
	case <-k.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("lease: close KeepAlive of %s: heartbeat still running: %w", k.id, context.Cause(ctx))
	}
}

func (k *KeepAlive) signal() { k.stopNow() }

func (k *KeepAlive) finish(err error) {
	k.stopNow() // release the stop context
	k.err = err
	close(k.done)
}

func (k *KeepAlive) run(ctx context.Context, deadline time.Time) error {
	c := k.m.clock
	lost := c.Timer(c.Until(deadline))
	defer lost.Stop()
	next := c.Timer(0)
	defer next.Stop()
	var (
		last   error
		capped bool // the deadline is the lease's ExpiresAt
	)
	for {
		select {
		case <-k.stop.Done():
			return nil
		case <-k.m.closing:
			return ErrClosed
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-lost.C:
			return k.lost(last, capped)
		case <-next.C:
		}
		sent := c.Now()
		if !sent.Before(deadline) {
			return k.lost(last, capped)
		}
		// The heartbeat ends at the local deadline, when the KeepAlive is
		// stopped or when the Manager closes, whatever the store does.
		hctx, cancel := c.WithDeadline(ctx, deadline)
		unhookManager := context.AfterFunc(k.m.ctx, cancel)
		unhookStop := context.AfterFunc(k.stop, cancel)
		hb, err := k.m.Heartbeat(hctx, k.id, k.holder)
		unhookStop()
		unhookManager()
		cancel()
		if err != nil && k.m.isClosed() {
			return ErrClosed
		}
		if err != nil && k.stop.Err() != nil {
			return nil // stopped or released meanwhile
		}
		switch {
		case err == nil:
			// The Manager's send time is read after sent, so this local
			// deadline is no later than the one the result carries.
			deadline, capped, last = sent.Add(hb.Remaining), hb.Remaining < k.grace, nil
			lost.Reset(c.Until(deadline))
			next.Reset(k.interval)
			continue
		case errors.Is(err, ErrExpired), errors.Is(err, ErrNotFound), errors.Is(err, ErrWrongHolder):
			return fmt.Errorf("%w: %w", ErrLost, err)
		case errors.Is(err, ErrClosed):
			return ErrClosed
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		// A store error: retry sooner than the interval while the local
		// deadline allows.
		last = err
		next.Reset(max(k.interval/3, time.Millisecond))
	}
}

func (k *KeepAlive) lost(last error, capped bool) error {
	if capped {
		return fmt.Errorf("%w: %w: reached ExpiresAt", ErrLost, ErrExpired)
	}
	if last != nil {
		return fmt.Errorf("%w: no heartbeat before the local deadline: %w", ErrLost, last)
	}
	return fmt.Errorf("%w: no heartbeat before the local deadline", ErrLost)
}

// releasedKeepAlives stops the KeepAlives of lease id (of holder, unless
// empty), which its owner is releasing.
func (m *Manager) releasedKeepAlives(id, holder string) {
	if m.nKeep.Load() == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.keepAlives {
		if k.id == id && (holder == "" || k.holder == holder) {
			k.signal()
		}
	}
}
