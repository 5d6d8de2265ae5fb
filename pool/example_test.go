package pool_test

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/ttlkit/ttlkit/pool"
)

// workers is a Provisioner of numbered workers; a real one starts a
// container or a process and waits until it is ready.
type workers struct{ n atomic.Int64 }

func (w *workers) Create(context.Context) (int64, error) { return w.n.Add(1), nil }

func (w *workers) Destroy(_ context.Context, id int64) error {
	fmt.Println("destroyed worker", id)
	return nil
}

func Example() {
	ctx := context.Background()
	p, err := pool.New[int64](&workers{}, pool.Options{MaxSize: 2})
	if err != nil {
		panic(err)
	}
	h, err := p.Acquire(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("running on worker", h.Value())
	h.Release() // back to the pool, ready for the next request

	h, _ = p.Acquire(ctx)
	fmt.Println("running on worker", h.Value(), "again")
	h.Release()

	fmt.Println("in use:", p.Stats().InUse, "idle:", p.Stats().Idle)
	if err := p.Close(ctx); err != nil {
		panic(err)
	}
	// Output:
	// running on worker 1
	// running on worker 1 again
	// in use: 0 idle: 1
	// destroyed worker 1
}

func ExampleGroup() {
	ctx := context.Background()
	// One pool per function; its capacity from the function's reserved
	// concurrency.
	reserved := map[string]int{"resize": 5, "thumbnail": 1}
	g, err := pool.NewGroup(func(fn string) (pool.Provisioner[int64], pool.Options, error) {
		return &workers{}, pool.Options{MaxSize: reserved[fn]}, nil
	})
	if err != nil {
		panic(err)
	}
	p, err := g.Pool("thumbnail") // created on first use
	if err != nil {
		panic(err)
	}
	h, err := p.Acquire(ctx)
	fmt.Println("thumbnail worker", h.Value(), err)
	fmt.Println("max size:", g.Stats()["thumbnail"].MaxSize)
	h.Release()
	if err := g.Close(ctx); err != nil {
		panic(err)
	}
	// Output:
	// thumbnail worker 1 <nil>
	// max size: 1
	// destroyed worker 1
}
