package redispool_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/redispool"
)

// container is what the instances pool: a pre-started container,
// described completely by its exported fields (the default JSON codec
// carries it from the instance that created it to the one that uses it).
type container struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
}

// docker starts and removes containers; every gateway instance has one.
type docker struct{}

func (docker) Create(ctx context.Context) (container, error) {
	return container{ID: "c1", Addr: "10.0.1.5:8080"}, nil // docker run ...
}

func (docker) Destroy(ctx context.Context, c container) error { return nil } // docker rm -f ...

// ID makes items shareable: the Inventory records them by ID.
func (docker) ID(c container) string { return c.ID }

// Three gateway instances (in real life three processes, each with its own
// Redis client) share one warm pool of two to ten containers:
// whichever instance takes a container, no other can, and the warm target
// counts the containers of all three.
func Example() {
	ctx := context.Background()
	var gateways []*pool.Pool[container]
	for _, name := range []string{"gw-a", "gw-b", "gw-c"} {
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
		defer rdb.Close()
		inv, err := redispool.New(rdb, redispool.Options{Prefix: "app:warm"})
		if err != nil {
			log.Fatal(err)
		}
		p, err := pool.New[container](docker{}, pool.Options{
			MinIdle: 2, MaxIdle: 10, // global: across the three instances
			Inventory: inv,
			Instance:  name, // this instance's in-use items are registered under it
		})
		if err != nil {
			log.Fatal(err)
		}
		defer p.Close(ctx)
		gateways = append(gateways, p)
	}

	h, err := gateways[1].Acquire(ctx) // pops a warm container made by any instance
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("serving from", h.Value().Addr)
	h.Release() // back to the shared warm pool
}

// New checks its options and does not contact the server; every key is in
// one Redis Cluster hash slot.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	if _, err := redispool.New(rdb, redispool.Options{}); err != nil {
		fmt.Println(err)
	}
	inv, _ := redispool.New(rdb, redispool.Options{Prefix: "app:warm"})
	fmt.Println(inv.Keys())
	// Output:
	// redispool: Prefix is empty
	// [{app:warm}:idle {app:warm}:items {app:warm}:res {app:warm}:records {app:warm}:replies {app:warm}:replied]
}
