package ttl

import "time"

// DefaultEventQueue is the event queue's capacity when an EventQueue
// option is 0, for the tests.
const DefaultEventQueue = defaultEventQueue

// RecordAt notes that entity id was active at at.
func (t *Tracker) RecordAt(id string, at time.Time) { t.recordAt(id, at) }

// Len returns the number of ids b holds.
func (b *MemoryBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.m)
}
