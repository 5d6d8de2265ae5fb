package lease_test

import (
	"testing"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/redislease"
)

// BenchmarkLeaseClusterInterleaved runs one grant+release per iteration on
// each of: lease/redislease on the Redis Cluster named by
// TTLKIT_TEST_REDIS_CLUSTER through a go-redis ClusterClient, the same
// with WaitReplicas 1 (each write waits for the master's replica), and on
// the standalone server named by TTLKIT_TEST_REDIS_URL through a Client;
// in turn, so that all see the same load. It reports each one's p50 and
// p10 latency and the ratios of the cluster's p50 to the others'. It needs
// both variables and skips without them.
func BenchmarkLeaseClusterInterleaved(b *testing.B) {
	b.Run("backend=redis-cluster/op=grantrelease", func(b *testing.B) {
		b.ReportAllocs()
		c := redistest.OpenRedisCluster(b)
		r := redistest.OpenRedis(b)
		req := lease.Request{Holder: "session-1", Resource: "cam_2f_19", Cost: 2, Fallback: []int{1}}
		grantRelease := func(s *redislease.Store, err error) func() error {
			if err != nil {
				b.Fatal(err)
			}
			m := newManager(b, s)
			return func() error {
				l, err := m.Grant(ctx, req)
				if err != nil {
					return err
				}
				_, err = m.Release(ctx, l.ID, "")
				return err
			}
		}
		interleave(b, []impl{
			{"cluster", grantRelease(redislease.New(c.Client, redislease.Options{Prefix: c.StorePrefix(0)}))},
			{"standalone", grantRelease(redislease.New(r.Client, redislease.Options{Prefix: r.Prefix + "{lease}:"}))},
			{"cluster-wait", grantRelease(redislease.New(c.Client, redislease.Options{Prefix: c.StorePrefix(0), WaitReplicas: 1}))},
		})
	})
}
