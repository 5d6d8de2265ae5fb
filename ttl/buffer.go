package ttl

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// Buffer is the optional middle stage between Trackers and the Store: many
// Trackers (one per proxy instance) Add to it every flush interval, and the
// Runner drains it into the Store every tick. ttl provides MemoryBuffer;
// ttl/redisttl keeps the buffer in a Redis sorted set shared by every
// instance. Every Buffer must pass ttltest.RunBuffer.
//
// Draining is a walk through the buffer in (At, ID) order, one page at a
// time: Peek the page after the last entry of the previous one, merge it
// into the Store with Store.Add, then Remove it. Remove deletes an
// entry only if its time is still the one Peek returned, so an Add that
// lands between Peek and Remove survives: its newer time puts it further
// along the walk, where the same drain reads it again, or the next drain
// does. No activity is ever lost, and activity merged twice is harmless
// because every stage merges with "greater wins".
//
// A Buffer must keep times to at least millisecond resolution; it may
// truncate finer ones, as long as Peek returns exactly the time that Remove
// then compares with, and orders entries by that returned time. All methods
// are safe for concurrent use.
type Buffer interface {
	// Add merges acts into the buffer, keeping for every id the greatest
	// time (Redis ZADD GT). acts may hold an id several times. An empty
	// acts is a no-op.
	Add(ctx context.Context, acts []Activity) error

	// Peek returns, without removing them, up to max buffered entries
	// that come after the entry after, in ascending order of (At, ID):
	// by time, and by id (byte-wise) among equal times. A zero after
	// (Activity{}, or any with an empty ID and a zero At) starts at the
	// first entry. Each id appears at most
	// once, with the time currently stored. It returns an empty slice
	// past the last entry and an error wrapping ErrInvalid when max is not
	// positive.
	//
	// Because Add only ever makes an entry's time greater, a walk that
	// passes each page's last entry as the next after reads every entry
	// present when the walk began, each with its time then or a later one.
	Peek(ctx context.Context, after Activity, max int) ([]Activity, error)

	// Remove deletes every entry of acts whose stored time equals its At,
	// in one atomic step per call, and reports how many it deleted. An
	// entry whose time has grown since Peek, or that is gone, is left
	// alone.
	Remove(ctx context.Context, acts []Activity) (int, error)
}

// Lossy is implemented by a Buffer, or any Sink, that can lose what it
// holds without anyone being told: a Redis server restarted without
// persistence comes back empty, and the Adds that follow succeed. Its
// generation changes whenever that happens, so a Runner and the Trackers
// that compare it with the one they saw before know that activity was lost:
// the Runner holds its idle rules (RunnerOptions.Hold) and every Tracker
// sends again what it flushed within TrackerOptions.Retain.
type Lossy interface {
	// Generation returns the current generation: a token that stays the
	// same as long as the buffer keeps its contents, and changes when it
	// loses them. If there is none (a new or lost buffer), it makes one.
	Generation(ctx context.Context) (string, error)
}

// Paced is implemented by a Buffer, or any Sink, that keeps the
// FlushInterval of the Trackers that write to it. A Tracker notes its
// interval before every flush that sends something; a Runner reads the
// longest after every tick's drain and, when it holds its idle rules after
// a loss or an outage, holds them for that plus its own Interval: what the
// Trackers it serves actually need to send their activity again, rather
// than a default that assumes the Trackers flush every 30 s (see
// RunnerOptions.Hold).
type Paced interface {
	// NoteFlushInterval records that a Tracker flushes every d.
	NoteFlushInterval(ctx context.Context, d time.Duration) error
	// FlushInterval returns the longest interval noted, or 0 if none was.
	FlushInterval(ctx context.Context) (time.Duration, error)
}

// less reports whether a comes before b in the order Buffer.Peek walks:
// by At, then by ID.
func less(a, b Activity) bool {
	if !a.At.Equal(b.At) {
		return a.At.Before(b.At)
	}
	return a.ID < b.ID
}

// MemoryBuffer is an in-process Buffer: a map behind a mutex. It suits a
// single process, or tests; use ttl/redisttl to share one buffer between
// instances. It never loses what it holds, so it is neither Lossy nor
// Paced. The zero value is an empty buffer ready to use.
type MemoryBuffer struct {
	mu sync.Mutex
	m  map[string]time.Time
}

var _ Buffer = (*MemoryBuffer)(nil)

// Add merges acts into the buffer, greater wins. It never fails.
func (b *MemoryBuffer) Add(_ context.Context, acts []Activity) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = make(map[string]time.Time)
	}
	for _, a := range acts {
		if old, ok := b.m[a.ID]; !ok || a.At.After(old) {
			b.m[a.ID] = a.At
		}
	}
	return nil
}

// Peek returns up to max entries after after, in (At, ID) order, without
// removing them. It sorts the entries past after, so walking a buffer of n
// entries in pages of max costs O(n²/max · log n): fine for one process
// and for tests, which is what MemoryBuffer is for.
func (b *MemoryBuffer) Peek(_ context.Context, after Activity, max int) ([]Activity, error) {
	if max <= 0 {
		return nil, errs.Invalid(ErrInvalid, "ttl: peek max (%d) must be positive", max)
	}
	start := after.ID == "" && after.At.IsZero()
	b.mu.Lock()
	out := make([]Activity, 0, min(max, len(b.m)))
	for id, at := range b.m {
		if a := (Activity{ID: id, At: at}); start || less(after, a) {
			out = append(out, a)
		}
	}
	b.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return less(out[i], out[j]) })
	return out[:min(max, len(out))], nil
}

// Remove deletes the entries of acts whose time is unchanged.
func (b *MemoryBuffer) Remove(_ context.Context, acts []Activity) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, a := range acts {
		if at, ok := b.m[a.ID]; ok && at.Equal(a.At) {
			delete(b.m, a.ID)
			n++
		}
	}
	return n, nil
}
