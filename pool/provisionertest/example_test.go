package provisionertest_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/provisionertest"
)

// registry is a provider in memory: the items one label holds, seen by
// every provisioner of that label.
type registry struct {
	mu    sync.Mutex
	next  int
	items map[string]time.Time // created, by ID
}

// memory provisions items (plain IDs) in a registry.
type memory struct{ r *registry }

func (m memory) Create(ctx context.Context) (string, error) {
	if ctx.Err() != nil {
		return "", fmt.Errorf("create: %w", context.Cause(ctx))
	}
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	m.r.next++
	id := fmt.Sprintf("item-%d", m.r.next)
	m.r.items[id] = time.Now()
	return id, nil
}

func (m memory) Destroy(_ context.Context, id string) error {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	delete(m.r.items, id) // gone already is success
	return nil
}

func (m memory) List(context.Context) ([]pool.Listed[string], error) {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	var out []pool.Listed[string]
	for id, created := range m.r.items {
		out = append(out, pool.Listed[string]{ID: id, Value: id, Created: created})
	}
	slices.SortFunc(out, func(a, b pool.Listed[string]) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func (m memory) ID(id string) string { return id }

// TestMemory runs the suite on the in-memory provisioner, so the suite
// itself is checked wherever it changes.
func TestMemory(t *testing.T) {
	r := &registry{items: map[string]time.Time{}}
	provisionertest.Run(t, provisionertest.Harness[string]{
		New: func(*testing.T) provisionertest.Provisioner[string] { return memory{r} },
	})
}

// A provisioner that lists what exists runs the whole suite from one test:
//
//	func TestContract(t *testing.T) {
//		provisionertest.Run(t, provisionertest.Harness[string]{New: newProvisioner})
//	}
//
// where the provisioners New returns share one label. What the suite
// checks, shown on the in-memory provisioner: an item created is listed
// until it is destroyed, by any provisioner of the label.
func Example() {
	ctx := context.Background()
	r := &registry{items: map[string]time.Time{}}
	a, b := memory{r}, memory{r}
	id, _ := a.Create(ctx)
	listed, _ := b.List(ctx)
	fmt.Println(len(listed), listed[0].ID == id)
	_ = b.Destroy(ctx, id)
	listed, _ = a.List(ctx)
	fmt.Println(len(listed))
	// Output:
	// 1 true
	// 0
}
