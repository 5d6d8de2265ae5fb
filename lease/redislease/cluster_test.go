package redislease_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/leasetest"
	"github.com/ttlkit/ttlkit/lease/redislease"
)

// TestClusterConformance runs the conformance suite on a Redis Cluster
// through go-redis's ClusterClient, with the stores spread over its masters
// and both prefix forms.
func TestClusterConformance(t *testing.T) {
	var (
		mu      sync.Mutex
		n       atomic.Int64
		cluster = map[*redislease.Store]*redistest.RedisCluster{}
		prefix  = map[*redislease.Store]string{}
	)
	leasetest.Run(t, leasetest.Harness{
		New: func(t *testing.T) lease.Store {
			r := redistest.OpenRedisCluster(t)
			p := r.StorePrefix(int(n.Add(1)))
			s := newStore(t, r.Client, p)
			mu.Lock()
			cluster[s], prefix[s] = r, p
			mu.Unlock()
			return s
		},
		Peer: func(t *testing.T, s lease.Store) lease.Store {
			mu.Lock()
			r, p := cluster[s.(*redislease.Store)], prefix[s.(*redislease.Store)]
			mu.Unlock()
			return newStore(t, r.NewClient(t), p)
		},
		Unit:       250 * time.Millisecond,
		LocalClock: true, RemembersReleases: true,
	})
}
