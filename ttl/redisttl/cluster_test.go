package redisttl_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/redisttl"
	"github.com/ttlkit/ttlkit/ttl/ttltest"
)

// TestClusterConformance runs the Buffer conformance suite on a Redis
// Cluster through go-redis's ClusterClient, with the buffers spread over
// its masters and both prefix forms.
func TestClusterConformance(t *testing.T) {
	var n atomic.Int64
	ttltest.RunBuffer(t, ttltest.BufferHarness{New: func(t *testing.T) ttl.Buffer {
		r := redistest.OpenRedisCluster(t)
		b, err := redisttl.New(r.Client, redisttl.Options{Prefix: r.StorePrefix(int(n.Add(1)))})
		require.NoError(t, err)
		return b
	}})
}

// TestClusterConformanceKey runs the Buffer suite on a cluster with buffers
// named by Key, with and without a hash tag: the scripts' guard key must be
// in the set's slot, or the cluster refuses them with CROSSSLOT.
func TestClusterConformanceKey(t *testing.T) {
	var n atomic.Int64
	ttltest.RunBuffer(t, ttltest.BufferHarness{New: func(t *testing.T) ttl.Buffer {
		r := redistest.OpenRedisCluster(t)
		key := r.StorePrefix(int(n.Add(1))) + "codehub:activity"
		b, err := redisttl.New(r.Client, redisttl.Options{Key: key})
		require.NoError(t, err)
		return b
	}})
}
