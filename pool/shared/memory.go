package shared

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// memoryInventory is an Inventory kept in process memory.
type memoryInventory struct {
	clock clock.Clock

	mu       sync.Mutex
	records  map[string]*memRecord
	idle     []string // FIFO order of idle IDs; may hold stale entries
	reserved map[string]time.Time
}

type memRecord struct {
	rec     Record
	expires time.Time // zero: never
}

var _ Inventory = (*memoryInventory)(nil)

// NewMemoryInventory returns an empty Inventory kept in process memory,
// whose record ttls run on clk (nil means real time). Several pools in one
// process can share it as if they were instances in several processes (in
// tests, say); it is also the reference implementation that pool/pooltest
// checks. A pool needs none: without an Inventory it keeps its idle set
// itself, which is faster.
func NewMemoryInventory(clk clock.Clock) Inventory {
	if clk == nil {
		clk = clock.New()
	}
	return &memoryInventory{
		clock:    clk,
		records:  make(map[string]*memRecord),
		reserved: make(map[string]time.Time),
	}
}

func deadline(now time.Time, ttl time.Duration) time.Time {
	if ttl <= 0 {
		return time.Time{}
	}
	return now.Add(ttl)
}

func expired(exp, now time.Time) bool { return !exp.IsZero() && !now.Before(exp) }

// purge drops expired records and reservations. Callers hold m.mu.
func (m *memoryInventory) purge(now time.Time) {
	for id, r := range m.records {
		if expired(r.expires, now) {
			delete(m.records, id)
		}
	}
	for tok, exp := range m.reserved {
		if expired(exp, now) {
			delete(m.reserved, tok)
		}
	}
	// Compact the idle queue: keep IDs that are still idle records.
	kept := m.idle[:0]
	for _, id := range m.idle {
		if r, ok := m.records[id]; ok && r.rec.Owner == "" {
			kept = append(kept, id)
		}
	}
	clear(m.idle[len(kept):])
	m.idle = kept
}

func cloneRecord(r Record) Record {
	r.Data = append([]byte(nil), r.Data...)
	return r
}

// Add implements Inventory.
func (m *memoryInventory) Add(_ context.Context, rec Record, ttl time.Duration) error {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.purge(now)
	if _, ok := m.records[rec.ID]; ok {
		return fmt.Errorf("%w: %q", ErrExists, rec.ID)
	}
	m.records[rec.ID] = &memRecord{rec: cloneRecord(rec), expires: deadline(now, ttl)}
	if rec.Owner == "" {
		m.idle = append(m.idle, rec.ID)
	}
	return nil
}

// Pop implements Inventory.
func (m *memoryInventory) Pop(_ context.Context, owner string, ttl time.Duration) (Record, bool, error) {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.purge(now)
	if len(m.idle) == 0 {
		return Record{}, false, nil
	}
	id := m.idle[0]
	m.idle[0] = ""
	m.idle = m.idle[1:]
	r := m.records[id]
	r.rec.Owner = owner
	r.expires = deadline(now, ttl)
	return cloneRecord(r.rec), true, nil
}

// Claim implements Inventory.
func (m *memoryInventory) Claim(_ context.Context, id, owner string, ttl time.Duration) (bool, error) {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.purge(now)
	r, ok := m.records[id]
	if !ok || r.rec.Owner != "" {
		return false, nil
	}
	r.rec.Owner = owner
	r.expires = deadline(now, ttl)
	m.purge(now) // drops id from the idle queue
	return true, nil
}

// Put implements Inventory.
func (m *memoryInventory) Put(_ context.Context, rec Record, maxIdle int, ttl time.Duration) (bool, error) {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.purge(now)
	r, ok := m.records[rec.ID]
	if !ok || r.rec.Owner == "" || r.rec.Owner != rec.Owner {
		return false, fmt.Errorf("%w: %q", ErrNotHeld, rec.ID)
	}
	if maxIdle > 0 && len(m.idle) >= maxIdle {
		return false, nil
	}
	r.rec.Owner = ""
	r.rec.Data = append([]byte(nil), rec.Data...)
	r.rec.LastUsed = rec.LastUsed
	r.expires = deadline(now, ttl)
	m.idle = append(m.idle, rec.ID)
	return true, nil
}

// Touch implements Inventory.
func (m *memoryInventory) Touch(_ context.Context, owner string, ids []string, ttl time.Duration) ([]string, error) {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.purge(now)
	var lost []string
	for _, id := range ids {
		r, ok := m.records[id]
		if !ok || r.rec.Owner == "" || r.rec.Owner != owner {
			lost = append(lost, id)
			continue
		}
		r.expires = deadline(now, ttl)
	}
	return lost, nil
}

// Remove implements Inventory.
func (m *memoryInventory) Remove(_ context.Context, id string) (bool, error) {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.purge(now)
	if _, ok := m.records[id]; !ok {
		return false, nil
	}
	delete(m.records, id)
	m.purge(now)
	return true, nil
}

// Records implements Inventory.
func (m *memoryInventory) Records(_ context.Context) ([]Record, error) {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.purge(now)
	out := make([]Record, 0, len(m.records))
	for _, r := range m.records {
		out = append(out, cloneRecord(r.rec))
	}
	return out, nil
}

// Counts implements Inventory.
func (m *memoryInventory) Counts(_ context.Context) (Counts, error) {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.purge(now)
	c := Counts{Idle: len(m.idle), InUse: len(m.records) - len(m.idle), Reserved: len(m.reserved)}
	return c, nil
}

// Reserve implements Inventory.
func (m *memoryInventory) Reserve(_ context.Context, token string, target int, ttl time.Duration) (bool, error) {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.purge(now)
	if _, ok := m.reserved[token]; !ok && len(m.idle)+len(m.reserved) >= target {
		return false, nil
	}
	exp := deadline(now, ttl)
	m.reserved[token] = exp
	return true, nil
}

// Unreserve implements Inventory.
func (m *memoryInventory) Unreserve(_ context.Context, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.reserved, token)
	return nil
}
