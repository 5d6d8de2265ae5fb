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
// Draining is Peek, then Store.MergeActivity, then Remove. Remove deletes an
// entry only if its time is still the one Peek returned, so an Add that lands
// between Peek and Remove survives to the next drain: no activity is ever
// lost, and activity merged twice is harmless because every stage merges
// with "greater wins".
//
// A Buffer must keep times to at least millisecond resolution; it may
// truncate finer ones, as long as Peek returns exactly the time that Remove
// then compares with. All methods are safe for concurrent use.
type Buffer interface {
	// Add merges acts into the buffer, keeping for every id the greatest
	// time (Redis ZADD GT). acts may hold an id several times. An empty
	// acts is a no-op.
	Add(ctx context.Context, acts []Activity) error

	// Peek returns up to max buffered entries, each id at most once, with
	// the times currently stored, without removing them. Which entries a
	// partial Peek returns is up to the buffer (a sorted set returns the
	// oldest first). It returns an empty slice when the buffer is empty
	// and an error wrapping ErrInvalid when max is not positive.
	Peek(ctx context.Context, max int) ([]Activity, error)

	// Remove deletes every entry of acts whose stored time equals its At,
	// in one atomic step per call, and reports how many it deleted. An
	// entry whose time has grown since Peek, or that is gone, is left
	// alone.
	Remove(ctx context.Context, acts []Activity) (int, error)
}

// MemoryBuffer is an in-process Buffer: a map behind a mutex. It suits a
// single process, or tests; use ttl/redisttl to share one buffer between
// instances. The zero value is not usable; call NewMemoryBuffer.
type MemoryBuffer struct {
	mu sync.Mutex
	m  map[string]time.Time
}

var _ Buffer = (*MemoryBuffer)(nil)

// NewMemoryBuffer returns an empty MemoryBuffer.
func NewMemoryBuffer() *MemoryBuffer {
	return &MemoryBuffer{m: make(map[string]time.Time)}
}

// Add merges acts into the buffer, greater wins. It never fails.
func (b *MemoryBuffer) Add(_ context.Context, acts []Activity) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range acts {
		if old, ok := b.m[a.ID]; !ok || a.At.After(old) {
			b.m[a.ID] = a.At
		}
	}
	return nil
}

// Peek returns up to max entries without removing them, sorted oldest
// first. When more than max are buffered, it returns an arbitrary max of
// them, so that draining n entries costs O(n), not O(n²).
func (b *MemoryBuffer) Peek(_ context.Context, max int) ([]Activity, error) {
	if max <= 0 {
		return nil, errs.Invalid(ErrInvalid, "ttl: peek max (%d) must be positive", max)
	}
	b.mu.Lock()
	out := make([]Activity, 0, min(max, len(b.m)))
	for id, at := range b.m {
		if len(out) == max {
			break
		}
		out = append(out, Activity{ID: id, At: at})
	}
	b.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
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

// Len returns the number of buffered ids.
func (b *MemoryBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.m)
}
