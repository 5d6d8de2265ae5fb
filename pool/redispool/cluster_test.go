package redispool_test

import (
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/pool/pooltest"
	"github.com/ttlkit/ttlkit/pool/shared"
)

// TestClusterConformance runs the conformance suite on a Redis Cluster
// through go-redis's ClusterClient, with the inventories spread over its
// masters and both prefix forms.
func TestClusterConformance(t *testing.T) {
	var n atomic.Int64
	pooltest.Run(t, pooltest.Harness{Open: func(t *testing.T, k int) []shared.Inventory {
		r := redistest.OpenRedisCluster(t)
		p := r.StorePrefix(int(n.Add(1)))
		out := make([]shared.Inventory, k)
		for i := range out {
			var c redis.UniversalClient = r.Client
			if i > 0 {
				c = r.NewClient(t)
			}
			out[i] = newInventory(t, c, p)
		}
		return out
	}})
}
