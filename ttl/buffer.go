package ttl

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// Buffer is the optional stage between the Trackers and the Store
// (ttl/redisttl keeps one in Redis). A Buffer passes ttltest.RunBuffer, is
// safe for concurrent use, and keeps times to at least a millisecond, Peek
// returning exactly the time Remove compares. A Runner drains it a page at
// a time: Peek, merge into the Store, Remove. An Add in between survives
// and moves further along the walk, so no activity is lost.
type Buffer interface {
	// Add merges acts, keeping each id's greatest time (Redis ZADD GT); ids
	// may repeat, and empty acts is a no-op.
	Add(ctx context.Context, acts []Activity) error

	// Peek returns, without removing them, up to max entries after after
	// (zero: from the start) in (At, ID) order, IDs byte-wise, each id once
	// with its current time; none past the end. A max below 1 fails with
	// an error matching [ErrInvalid]. Walking page by page reads every
	// entry present at the start, at that time or later.
	Peek(ctx context.Context, after Activity, max int) ([]Activity, error)

	// Remove deletes atomically each entry of acts whose time still equals
	// its At, and reports how many.
	Remove(ctx context.Context, acts []Activity) (int, error)
}

// Lossy is implemented by a Sink that can lose its contents silently, as a
// Redis restarted without persistence. On a new generation the Runner holds
// its idle rules ([RunnerOptions.Hold]) and the Trackers resend what they
// retain ([TrackerOptions.Retain]).
type Lossy interface {
	// Generation returns a token that changes when the contents are lost,
	// making one if there is none.
	Generation(ctx context.Context) (string, error)
}

// Paced is implemented by a Sink that keeps its Trackers' FlushInterval
// for the Runner's hold ([RunnerOptions.Hold]).
type Paced interface {
	NoteFlushInterval(ctx context.Context, d time.Duration) error // a Tracker flushes every d
	// FlushInterval returns the longest interval noted, or 0.
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

// MemoryBuffer is a [Buffer] for one process or tests; it is neither Lossy
// nor Paced. The zero value is ready to use.
type MemoryBuffer struct {
	mu sync.Mutex
	m  map[string]time.Time
}

var _ Buffer = (*MemoryBuffer)(nil)

// Add implements [Buffer.Add]; it never fails.
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

// Peek implements [Buffer.Peek], sorting on every call: a walk of n
// entries costs O(n²/max · log n).
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

// Remove implements [Buffer.Remove].
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
