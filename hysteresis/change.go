package hysteresis

import (
	"context"
	"log/slog"
	"time"
)

// Reason says why a Gate changed state.
type Reason string

// Reasons carried by Change.
const (
	// ReasonTrip: a signal reached its Trip threshold.
	ReasonTrip Reason = "trip"
	// ReasonWarn: a signal reached its Warn threshold.
	ReasonWarn Reason = "warn"
	// ReasonCalm: every signal fell back below Warn (Warning to Normal).
	ReasonCalm Reason = "calm"
	// ReasonRecovered: every signal stayed below Recover for the whole hold.
	ReasonRecovered Reason = "recovered"
	// ReasonStale: a signal went stale (see StalePolicy).
	ReasonStale Reason = "stale"
)

// Change is one state transition of a Gate.
type Change struct {
	// From and To are the states before and after.
	From, To State
	// At is when the gate changed state.
	At time.Time
	// Reason says why.
	Reason Reason
	// Signal names the signal that caused the change; "" for ReasonCalm and
	// ReasonRecovered, which every signal causes together.
	Signal string
	// Value is that signal's last sample and Threshold the threshold it
	// crossed (Trip or Warn); both 0 when Signal is "" or the signal is stale.
	Value, Threshold float64
}

// maxPending bounds the transitions waiting for delivery, so a callback that
// never returns cannot make the gate grow without bound. Transitions are rare
// by design; past the bound the oldest are dropped and counted.
const maxPending = 256

// enqueue records c for delivery. Called with g.mu held.
func (g *Gate) enqueue(c Change) {
	if g.onChange == nil && g.logger == nil {
		return
	}
	if len(g.pending)-g.head >= maxPending {
		g.pending[g.head] = Change{}
		g.head++
		g.dropped++
	}
	if g.head >= maxPending {
		// Reuse the room of delivered and dropped changes; appending past
		// them forever would grow the queue without bound while a callback
		// is stuck.
		n := copy(g.pending, g.pending[g.head:])
		clear(g.pending[n:])
		g.pending, g.head = g.pending[:n], 0
	}
	g.pending = append(g.pending, c)
}

// claimDelivery reports whether the caller must deliver pending changes,
// marking it as the one goroutine that does. Called with g.mu held.
func (g *Gate) claimDelivery() bool {
	if g.delivering || g.head == len(g.pending) {
		return false
	}
	g.delivering = true
	return true
}

// deliver hands pending changes to the logger and the callback, one at a
// time, without holding g.mu. Only one goroutine delivers at a time, so
// changes arrive in order; a change queued meanwhile by another goroutine (or
// by the callback itself) is delivered by this loop.
func (g *Gate) deliver() {
	done := false
	defer func() {
		if !done { // the callback panicked: let the next caller deliver
			g.mu.Lock()
			g.delivering = false
			g.mu.Unlock()
		}
	}()
	for {
		g.mu.Lock()
		if g.head == len(g.pending) {
			g.pending, g.head = g.pending[:0], 0
			g.delivering = false
			g.mu.Unlock()
			done = true
			return
		}
		c := g.pending[g.head]
		g.pending[g.head] = Change{}
		g.head++
		g.mu.Unlock()
		if g.logger != nil {
			g.logger.LogAttrs(context.Background(), slog.LevelInfo, "hysteresis: state changed",
				slog.String("from", c.From.String()), slog.String("to", c.To.String()),
				slog.String("reason", string(c.Reason)), slog.String("signal", c.Signal),
				slog.Float64("value", c.Value), slog.Float64("threshold", c.Threshold))
		}
		if g.onChange != nil {
			g.onChange(c)
		}
	}
}
