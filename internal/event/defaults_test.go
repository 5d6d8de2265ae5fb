package event_test

import (
	"testing"

	"github.com/ttlkit/ttlkit/internal/event"
	"github.com/ttlkit/ttlkit/lease"
)

// TestDefaultsAgree: each package documents its event queue's default as a
// number of its own; it must be the size the queue uses for 0.
func TestDefaultsAgree(t *testing.T) {
	for name, n := range map[string]int{
		"lease": lease.DefaultEventQueue,
	} {
		if n != event.DefaultSize {
			t.Errorf("%s.DefaultEventQueue is %d, the queue's default %d", name, n, event.DefaultSize)
		}
	}
}
