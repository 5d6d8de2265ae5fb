package redisentities_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/entities/entitiestest"
	"github.com/ttlkit/ttlkit/examples/entities/redisentities"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
)

// TestClusterStoreConformance runs the Store suites on a Redis Cluster
// through go-redis's ClusterClient, with the stores spread over its masters
// and both prefix forms.
func TestClusterStoreConformance(t *testing.T) {
	var n atomic.Int64
	var c redis.UniversalClient
	h := entitiestest.StoreHarness{
		New: func(t *testing.T) entities.Store {
			r := redistest.OpenRedisCluster(t)
			c = r.Client
			s, err := redisentities.New(r.Client, redisentities.Options{Prefix: r.StorePrefix(int(n.Add(1)))})
			require.NoError(t, err)
			return s
		},
		Now: func(t *testing.T) time.Time { return serverNow(t, c) },
	}
	entitiestest.RunStore(t, h)
}
