package redisttl_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv"
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
		r := testenv.OpenRedisCluster(t)
		b, err := redisttl.New(r.Client, redisttl.Options{Prefix: r.StorePrefix(int(n.Add(1)))})
		require.NoError(t, err)
		return b
	}})
}
