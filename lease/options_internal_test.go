package lease

import (
	"testing"

	"github.com/ttlkit/ttlkit/internal/event"
)

// TestEventQueueDefault: Options.EventQueue documents its default as a
// number (1024); it must be the size the queue uses for 0.
func TestEventQueueDefault(t *testing.T) {
	if defaultEventQueue != event.DefaultSize {
		t.Errorf("defaultEventQueue is %d, the queue's default %d", defaultEventQueue, event.DefaultSize)
	}
}
