package expiry_test

import (
	"context"
	"time"

	"github.com/jellydator/ttlcache/v3"
	"github.com/maypok86/otter/v2"
	gocache "github.com/patrickmn/go-cache"

	"github.com/ttlkit/ttlkit/expiry"
)

// cache is the common surface of the implementations. Values are indexes
// into the pre-generated tables, so that otter, whose expiry comes from a
// function of the entry, finds each key's TTL.
type cache interface {
	Set(k string, v int, ttl time.Duration)
	Get(k string) (int, bool)
	// Stored counts the entries held, expired or not.
	Stored() int
	Close()
}

// interval is the active expiry / cleanup period every implementation that
// has one is given: a mini Redis's 1 s.
const interval = time.Second

type impl struct {
	name string
	// new returns an empty cache; ttls[v] is the TTL of value v (otter).
	new func(ttls []time.Duration) cache
}

var impls = []impl{
	{"ttlkit", newTTLKit},
	{"ttlkitredis7", newTTLKitRedis7},
	{"ttlcache", newTTLCache},
	{"otter", newOtter},
	{"gocache", newGoCache},
}

type ttlkitCache struct{ m *expiry.Map[string, int] }

// newTTLKit is ttlkit with a mini Redis's tuning (1 s, 20 keys, 25 %).
func newTTLKit([]time.Duration) cache {
	m, err := expiry.NewMap(expiry.MapOptions[string, int]{Options: expiry.Options{Interval: interval, Threshold: 0.25}})
	if err != nil {
		panic(err)
	}
	return ttlkitCache{m}
}

// newTTLKitRedis7 is ttlkit with its defaults, Redis 7's tuning (100 ms,
// 20 keys, 10 %): more, shorter cycles and a lower stale bound.
func newTTLKitRedis7([]time.Duration) cache {
	m, err := expiry.NewMap(expiry.MapOptions[string, int]{})
	if err != nil {
		panic(err)
	}
	return ttlkitCache{m}
}

func (c ttlkitCache) Set(k string, v int, ttl time.Duration) {
	if err := c.m.SetWithTTL(k, v, ttl); err != nil {
		panic(err)
	}
}
func (c ttlkitCache) Get(k string) (int, bool) { return c.m.Get(k) }
func (c ttlkitCache) Stored() int              { return c.m.Len() }
func (c ttlkitCache) Close()                   { _ = c.m.Close(context.Background()) }

// ttlcache: touch-on-hit off (a Get does not extend the TTL, as in the
// others), cleanup goroutine started.
type ttlcacheCache struct{ c *ttlcache.Cache[string, int] }

func newTTLCache([]time.Duration) cache {
	c := ttlcache.New[string, int](ttlcache.WithDisableTouchOnHit[string, int]())
	go c.Start()
	return ttlcacheCache{c}
}

func (c ttlcacheCache) Set(k string, v int, ttl time.Duration) { c.c.Set(k, v, ttl) }
func (c ttlcacheCache) Get(k string) (int, bool) {
	if it := c.c.Get(k); it != nil {
		return it.Value(), true
	}
	return 0, false
}

// Stored: Len counts only unexpired items, so count insertions minus
// evictions (expired items are evicted by the cleanup).
func (c ttlcacheCache) Stored() int {
	m := c.c.Metrics()
	return int(m.Insertions - m.Evictions)
}
func (c ttlcacheCache) Close() { c.c.Stop() }

// otter: expiry after write, no size bound.
type otterCache struct{ c *otter.Cache[string, int] }

func newOtter(ttls []time.Duration) cache {
	c := otter.Must(&otter.Options[string, int]{
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[string, int]) time.Duration {
			return ttls[e.Value]
		}),
	})
	return otterCache{c}
}

func (c otterCache) Set(k string, v int, _ time.Duration) { c.c.Set(k, v) }
func (c otterCache) Get(k string) (int, bool)             { return c.c.GetIfPresent(k) }
func (c otterCache) Stored() int                          { return c.c.EstimatedSize() }
func (c otterCache) Close()                               { c.c.StopAllGoroutines() }

// go-cache: janitor at the same interval as ttlkit's active expiry.
type goCache struct{ c *gocache.Cache }

func newGoCache([]time.Duration) cache {
	return goCache{gocache.New(gocache.NoExpiration, interval)}
}

func (c goCache) Set(k string, v int, ttl time.Duration) { c.c.Set(k, v, ttl) }
func (c goCache) Get(k string) (int, bool) {
	if v, ok := c.c.Get(k); ok {
		return v.(int), true
	}
	return 0, false
}
func (c goCache) Stored() int { return c.c.ItemCount() }

// Close: go-cache stops its janitor only through a finalizer; the
// benchmark drops the cache and the janitor stops at the next GC.
func (c goCache) Close() { c.c.Flush() }
