package backend

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ttlkit/ttlkit/examples/sandboxes/sandbox"
)

// Status values of an assignment record, as the design keeps them.
const (
	StatusRunning  = "running"  // a request is in flight
	StatusIdle     = "idle"     // assigned, nothing in flight
	StatusDraining = "draining" // being destroyed: new requests are refused
)

// Record is the assignment of a sandbox to a conversation: the design's
// workspace:container:{conversation_id} hash.
type Record struct {
	Conversation string
	Sandbox      sandbox.Sandbox // container_id, host, port, created_at
	LastActiveAt time.Time
	Status       string
	// InFlight counts the requests in flight on the sandbox, from every
	// instance (those of an instance that died count until their
	// deadline).
	InFlight int
}

// Errors of Assignments.
var (
	errNoRecord = errors.New("no assignment")
	errDraining = errors.New("draining")
)

// Assignments keeps the assignment records every backend instance shares:
// in Redis (RedisAssignments), or in this process's memory
// (MemoryAssignments) for the embedded default. Every method is atomic
// with respect to every other call on any instance.
type Assignments interface {
	// Get returns the record of conv; ok is false without one.
	Get(ctx context.Context, conv string) (rec Record, ok bool, err error)
	// Create stores rec (status idle, last active now) unless conv has a
	// record, which it then returns with created false. The record expires
	// after ttl unless a request ends meanwhile.
	Create(ctx context.Context, rec Record, ttl time.Duration) (created bool, existing Record, err error)
	// Begin registers the request token on conv's sandbox until it ends
	// or dur passes (a request of an instance that died), sets the status
	// running and returns the record. It fails with errNoRecord without a
	// record and with errDraining, registering nothing, while it drains.
	Begin(ctx context.Context, conv, token string, dur time.Duration) (Record, error)
	// End ends the request token: last active now, status idle when no
	// other request is in flight, the record's expiry reset to ttl.
	End(ctx context.Context, conv, token string, ttl time.Duration) error
	// Drain sets the status draining if conv's record names sandboxID and
	// returns it; ok is false (and nothing changes) if it does not.
	Drain(ctx context.Context, conv, sandboxID string) (rec Record, ok bool, err error)
	// Undrain ends a drain that was called off: the status goes back to
	// running or idle.
	Undrain(ctx context.Context, conv, sandboxID string) error
	// Delete removes conv's record and its requests if it names
	// sandboxID.
	Delete(ctx context.Context, conv, sandboxID string) error
}

// MemoryAssignments is Assignments in this process's memory, for a single
// instance.
type MemoryAssignments struct {
	mu   sync.Mutex
	now  func() time.Time
	recs map[string]*memRecord
}

type memRecord struct {
	rec      Record
	expires  time.Time
	requests map[string]time.Time // token → deadline
}

var _ Assignments = (*MemoryAssignments)(nil)

// NewMemoryAssignments returns an empty MemoryAssignments on now (nil
// means time.Now).
func NewMemoryAssignments(now func() time.Time) *MemoryAssignments {
	if now == nil {
		now = time.Now
	}
	return &MemoryAssignments{now: now, recs: map[string]*memRecord{}}
}

// live returns conv's record, with its expired requests dropped, or nil.
func (m *MemoryAssignments) live(conv string, now time.Time) *memRecord {
	r := m.recs[conv]
	if r == nil {
		return nil
	}
	if !now.Before(r.expires) {
		delete(m.recs, conv)
		return nil
	}
	for tok, dl := range r.requests {
		if !now.Before(dl) {
			delete(r.requests, tok)
		}
	}
	r.rec.InFlight = len(r.requests)
	if r.rec.Status != StatusDraining {
		r.rec.Status = StatusIdle
		if r.rec.InFlight > 0 {
			r.rec.Status = StatusRunning
		}
	}
	return r
}

// Get implements Assignments.
func (m *MemoryAssignments) Get(_ context.Context, conv string) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.live(conv, m.now()); r != nil {
		return r.rec, true, nil
	}
	return Record{}, false, nil
}

// Create implements Assignments.
func (m *MemoryAssignments) Create(_ context.Context, rec Record, ttl time.Duration) (bool, Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if r := m.live(rec.Conversation, now); r != nil {
		return false, r.rec, nil
	}
	rec.Status, rec.LastActiveAt, rec.InFlight = StatusIdle, now, 0
	m.recs[rec.Conversation] = &memRecord{rec: rec, expires: now.Add(ttl), requests: map[string]time.Time{}}
	return true, Record{}, nil
}

// Begin implements Assignments.
func (m *MemoryAssignments) Begin(_ context.Context, conv, token string, dur time.Duration) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	r := m.live(conv, now)
	switch {
	case r == nil:
		return Record{}, errNoRecord
	case r.rec.Status == StatusDraining:
		return r.rec, errDraining
	}
	r.requests[token] = now.Add(dur)
	r.rec.InFlight, r.rec.Status, r.rec.LastActiveAt = len(r.requests), StatusRunning, now
	return r.rec, nil
}

// End implements Assignments.
func (m *MemoryAssignments) End(_ context.Context, conv, token string, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	r := m.live(conv, now)
	if r == nil {
		return nil
	}
	delete(r.requests, token)
	r.rec.LastActiveAt = now
	r.expires = now.Add(ttl)
	m.live(conv, now) // recount
	return nil
}

// Drain implements Assignments.
func (m *MemoryAssignments) Drain(_ context.Context, conv, sandboxID string) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.live(conv, m.now())
	if r == nil || r.rec.Sandbox.ID != sandboxID {
		return Record{}, false, nil
	}
	r.rec.Status = StatusDraining
	return r.rec, true, nil
}

// Undrain implements Assignments.
func (m *MemoryAssignments) Undrain(_ context.Context, conv, sandboxID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if r := m.live(conv, now); r != nil && r.rec.Sandbox.ID == sandboxID && r.rec.Status == StatusDraining {
		r.rec.Status = StatusIdle
		m.live(conv, now)
	}
	return nil
}

// Delete implements Assignments.
func (m *MemoryAssignments) Delete(_ context.Context, conv, sandboxID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.recs[conv]; r != nil && r.rec.Sandbox.ID == sandboxID {
		delete(m.recs, conv)
	}
	return nil
}
