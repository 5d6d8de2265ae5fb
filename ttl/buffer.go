package ttl

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/ttlkit/ttlkit/internal/errs"
)

// Buffer is the optional stage between Trackers and the Store, shared by
// many Trackers: [MemoryBuffer] in one process, ttl/redisttl (a Redis
// sorted set) across processes. Every Buffer must pass ttltest.RunBuffer,
// and its methods must be safe for concurrent use.
//
// A Runner drains it by walking it in (At, ID) order a page at a time:
// Peek, merge into the Store, Remove. An Add between Peek and Remove
// survives, and its newer time puts it further along the walk, so no
// activity is lost; merging twice is harmless, as every stage merges with
// greater wins. A Buffer keeps times to at least a millisecond; it may
// truncate finer ones, if Peek returns, and orders by, exactly the time
// Remove compares.
type Buffer interface {
	// Add merges acts, keeping each id's greatest time (Redis ZADD GT); an
	// id may repeat, and an empty acts is a no-op.
	Add(ctx context.Context, acts []Activity) error

	// Peek returns, without removing them, up to max entries after the
	// entry after (a zero after starts at the first), in ascending order
	// of At, then ID byte-wise, each id once with its current time; an
	// empty slice past the last entry. A max below 1 fails with an error
	// matching [ErrInvalid]. A walk passing each page's last entry as the
	// next after reads every entry present when it began, at that time or
	// a later one.
	Peek(ctx context.Context, after Activity, max int) ([]Activity, error)

	// Remove deletes, in one atomic step, each entry of acts whose stored
	// time still equals its At, and reports how many it deleted.
	Remove(ctx context.Context, acts []Activity) (int, error)
}

// Lossy is implemented by a Sink that can lose its contents silently: a
// Redis restarted without persistence comes back empty, and Adds succeed.
// Its generation changes when that happens, so the Runner holds its idle
// rules ([RunnerOptions.Hold]) and each Tracker resends what it retains
// ([TrackerOptions.Retain]).
type Lossy interface {
	// Generation returns a token that changes when the contents are lost,
	// making one if there is none.
	Generation(ctx context.Context) (string, error)
}

// Paced is implemented by a Sink that keeps the FlushInterval of the
// Trackers writing to it, so a Runner's hold fits them (see
// [RunnerOptions.Hold]).
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

// MemoryBuffer is a [Buffer] for one process or tests. It never loses
// what it holds, so it is neither Lossy nor Paced. The zero value is an
// empty buffer ready to use.
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
// removing them. It sorts on every call: a walk of n entries costs
// O(n²/max · log n).
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
