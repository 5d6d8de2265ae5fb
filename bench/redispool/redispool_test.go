package redispool_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/redispool"
)

var ctx = context.Background()

// item is the pooled container; creating and destroying it is free, so the
// benchmark measures the shared bookkeeping only.
type item struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
}

type prov struct {
	mu  sync.Mutex
	seq int
}

func (p *prov) Create(context.Context) (item, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	return item{ID: "c" + strconv.Itoa(p.seq), Addr: "10.0.1.5:8080"}, nil
}

func (p *prov) Destroy(context.Context, item) error { return nil }
func (p *prov) ID(it item) string                   { return it.ID }

// worker acquires and releases ops times through one instance.
type worker func(ops int)

// impl sets up instances sharing one warm pool of size items, all idle,
// and returns one worker per instance.
type impl struct {
	name  string
	setup func(b *testing.B, r *redistest.Redis, instances, size int) []worker
}

var impls = []impl{
	{"ttlkit", setupTTLKit},
	{"seed", setupSeed},
	{"ping", setupPing},
}

// BenchmarkSharedPoolAcquireRelease: clients goroutines, spread over
// instances pool instances (each with its own Redis client) that share one
// warm pool of 16 items, each acquiring and at once releasing; b.N is the
// total number of acquire/release pairs.
func BenchmarkSharedPoolAcquireRelease(b *testing.B) {
	const size = 16
	for _, c := range []struct{ instances, clients int }{{1, 1}, {3, 3}, {3, 12}} {
		for _, im := range impls {
			b.Run(fmt.Sprintf("instances=%d/clients=%d/impl=%s", c.instances, c.clients, im.name), func(b *testing.B) {
				b.ReportAllocs()
				r := redistest.OpenRedis(b)
				workers := im.setup(b, r, c.instances, size)
				var wg sync.WaitGroup
				b.ResetTimer()
				for i := range c.clients {
					ops := b.N / c.clients
					if i < b.N%c.clients {
						ops++
					}
					w := workers[i%len(workers)]
					wg.Go(func() { w(ops) })
				}
				wg.Wait()
			})
		}
	}
}

func setupTTLKit(b *testing.B, r *redistest.Redis, instances, size int) []worker {
	p := &prov{}
	var workers []worker
	for i := range instances {
		c := r.NewClient(b)
		inv, err := redispool.New(c, redispool.Options{Prefix: r.Prefix + "{pool}:"})
		if err != nil {
			b.Fatal(err)
		}
		pl, err := pool.New[item](p, pool.Options{
			MaxSize: size, Inventory: inv, Instance: fmt.Sprintf("gw-%d", i),
			JanitorInterval: -1, HealthCheckInterval: -1, IdleTimeout: -1, MaxLifetime: -1,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = pl.Close(ctx) })
		if i == 0 { // warm the shared pool
			hs := make([]*pool.Handle[item], size)
			for j := range hs {
				if hs[j], err = pl.Acquire(ctx); err != nil {
					b.Fatal(err)
				}
			}
			for _, h := range hs {
				h.Release()
			}
		}
		workers = append(workers, func(ops int) {
			for range ops {
				h, err := pl.Acquire(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				h.Release()
			}
		})
	}
	return workers
}

// setupSeed is a hand-written WarmPoolManager made to return items: LPOP an ID
// from a list, HGETALL its record; on return HSET the record, EXPIRE it and
// RPUSH the ID in one pipeline. Not atomic, no owners, no global counts:
// the floor of a plain Redis warm pool.
func setupSeed(b *testing.B, r *redistest.Redis, instances, size int) []worker {
	list := r.Prefix + "warm_pool"
	for j := range size {
		id := "c" + strconv.Itoa(j)
		if err := r.Client.HSet(ctx, r.Prefix+"warm_pool:"+id, "host", "10.0.1.5", "port", 8080,
			"created_at", time.Now().Format(time.RFC3339)).Err(); err != nil {
			b.Fatal(err)
		}
		if err := r.Client.RPush(ctx, list, id).Err(); err != nil {
			b.Fatal(err)
		}
	}
	var workers []worker
	for range instances {
		c := r.NewClient(b)
		workers = append(workers, func(ops int) {
			for done := 0; done < ops; {
				id, err := c.LPop(ctx, list).Result()
				if err == redis.Nil {
					continue // all taken by other clients: poll, as the seed would create
				}
				if err != nil {
					b.Error(err)
					return
				}
				key := r.Prefix + "warm_pool:" + id
				if err := c.HGetAll(ctx, key).Err(); err != nil {
					b.Error(err)
					return
				}
				_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
					p.HSet(ctx, key, "last_active_at", time.Now().Format(time.RFC3339))
					p.Expire(ctx, key, 30*time.Minute)
					p.RPush(ctx, list, id)
					return nil
				})
				if err != nil {
					b.Error(err)
					return
				}
				done++
			}
		})
	}
	return workers
}

// setupPing: two PINGs per acquire/release, the round trips of any shared
// pool that takes and returns an item in one call each.
func setupPing(b *testing.B, r *redistest.Redis, instances, _ int) []worker {
	var workers []worker
	for range instances {
		c := r.NewClient(b)
		workers = append(workers, func(ops int) {
			for range ops {
				for range 2 {
					if err := c.Ping(ctx).Err(); err != nil {
						b.Error(err)
						return
					}
				}
			}
		})
	}
	return workers
}
