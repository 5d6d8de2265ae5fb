package entitiestest

import (
	"sync"
	"testing"
	"time"
)

// Wait bounds how long Collector.WaitFor waits for a notification.
const Wait = 10 * time.Second

// Collector gathers the ids a wake-up listener delivers, and how many
// times it was called with nil (a reconnection).
type Collector struct {
	mu    sync.Mutex
	ids   []string
	nils  int
	calls chan struct{}
}

// NewCollector returns an empty Collector.
func NewCollector() *Collector { return &Collector{calls: make(chan struct{}, 1000)} }

// Fn is the listener's callback.
func (c *Collector) Fn(ids []string) {
	c.mu.Lock()
	if ids == nil {
		c.nils++
	}
	c.ids = append(c.ids, ids...)
	c.mu.Unlock()
	c.calls <- struct{}{}
}

// IDs returns a copy of the ids collected so far, in order.
func (c *Collector) IDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.ids...)
}

// WaitFor waits until cond holds on what was collected, or fails the test
// after Wait.
func (c *Collector) WaitFor(t *testing.T, what string, cond func(ids []string, nils int) bool) {
	t.Helper()
	deadline := time.After(Wait)
	for {
		c.mu.Lock()
		ok := cond(c.ids, c.nils)
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-c.calls:
		case <-deadline:
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Fatalf("%s: not reached within %v; got %d ids, %d nil calls", what, Wait, len(c.ids), c.nils)
		}
	}
}
