package shared_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/shared"
)

// Worker is an item that a process other than its creator can use: its
// exported fields describe it completely, as JSON carries them.
type Worker struct{ Name string }

// workers makes numbered workers; a real provisioner starts containers.
type workers struct{ n atomic.Int64 }

func (w *workers) Create(context.Context) (Worker, error) {
	return Worker{Name: "worker-" + strconv.FormatInt(w.n.Add(1), 10)}, nil
}

func (w *workers) Destroy(context.Context, Worker) error { return nil }

// ID is the item's identity in the Inventory.
func (w *workers) ID(v Worker) string { return v.Name }

// Two pool instances, as two processes would run them, share one warm
// pool: an item the first releases is the one the second acquires.
func Example() {
	ctx := context.Background()
	inv := shared.NewMemoryInventory(nil) // redispool.New across processes
	prov := &workers{}
	a, _ := pool.New[Worker](prov, pool.Options{Inventory: inv, Instance: "a", JanitorInterval: -1})
	b, _ := pool.New[Worker](prov, pool.Options{Inventory: inv, Instance: "b", JanitorInterval: -1})
	defer a.Close(ctx)
	defer b.Close(ctx)

	h, _ := a.Acquire(ctx)
	fmt.Println("a uses", h.Value().Name)
	h.Release() // into the shared idle set

	c, _ := inv.Counts(ctx)
	fmt.Println("idle in the inventory:", c.Idle)
	h, _ = b.Acquire(ctx)
	fmt.Println("b uses", h.Value().Name)
	h.Release()
	// Output:
	// a uses worker-1
	// idle in the inventory: 1
	// b uses worker-1
}
