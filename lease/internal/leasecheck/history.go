package leasecheck

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/ttlkit/ttlkit/lease"
)

// History collects operations from any number of recording stores.
type History struct {
	// Dir is where Verify writes the visualization of a failed check;
	// empty means os.TempDir().
	Dir string

	now func() time.Time
	seq atomic.Int64

	mu  sync.Mutex
	ops []porcupine.Operation
}

// New returns an empty history. now, if not nil, gives the store's time at
// which an operation runs (time.Now in a synctest bubble); nil means time is
// not modelled.
func New(now func() time.Time) *History { return &History{now: now} }

// Len returns the number of recorded operations.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Store returns s wrapped so that every call is recorded under client id
// client. Use one wrapper per Manager or goroutine.
func (h *History) Store(client int, s lease.Store) lease.Store {
	return &recorder{h: h, client: client, s: s}
}

// ErrInconclusive is returned by Verify when the check timed out.
var ErrInconclusive = errors.New("leasecheck: check timed out: inconclusive")

// Verify checks that the history recorded so far is linearizable. It
// returns nil if it is, ErrInconclusive if the check ran out of time, and
// otherwise an error naming a temporary HTML file that visualizes the
// history.
func (h *History) Verify(timeout time.Duration) error {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	h.mu.Unlock()
	model := Model()
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return ErrInconclusive
	}
	f, err := os.CreateTemp(h.Dir, "leasecheck-*.html")
	where := "(no visualization)"
	if err == nil {
		where = f.Name()
		if err := porcupine.Visualize(model, info, f); err != nil {
			where += " (incomplete: " + err.Error() + ")"
		}
		_ = f.Close()
	}
	return fmt.Errorf("leasecheck: history of %d operations is not linearizable; visualization: %s", len(ops), where)
}

// Check runs Verify and fails t if the history is not linearizable. A check
// that times out is inconclusive and only logged.
func (h *History) Check(t testing.TB, timeout time.Duration) {
	t.Helper()
	switch err := h.Verify(timeout); {
	case err == nil:
		t.Logf("leasecheck: %d operations linearizable", h.Len())
	case errors.Is(err, ErrInconclusive):
		t.Logf("%v (%d operations)", err, h.Len())
	default:
		t.Error(err)
	}
}
