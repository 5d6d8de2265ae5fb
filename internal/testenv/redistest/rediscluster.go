package redistest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ttlkit/ttlkit/internal/testenv"
)

// RedisCluster is a test's view of the Redis Cluster named by
// TTLKIT_TEST_REDIS_CLUSTER.
type RedisCluster struct {
	// Client is a cluster client of it; it is closed when the test ends.
	Client *redis.ClusterClient
	// Prefix is unique to the test ("ttlkit_t_<hex>:"), with the same rule
	// as Redis.Prefix: the keys that contain its name are deleted, on
	// every master, when the test ends.
	Prefix string

	addrs []string
}

// OpenRedisCluster connects to the cluster named by TTLKIT_TEST_REDIS_CLUSTER
// (the addresses of some of its nodes, comma-separated) and registers the
// deletion of every key that contains the returned Prefix's name when the
// test ends. It skips or fails t (see the package doc) when the variable is
// unset or the cluster does not answer with every slot served.
func OpenRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	addrs := splitAddrs(testenv.Lookup(t, testenv.EnvRedisCluster))
	r := &RedisCluster{Prefix: testenv.UniqueName() + ":", addrs: addrs}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.ConnectTimeout)
	defer cancel()
	c := r.newClient()
	if err := clusterOK(ctx, c); err != nil {
		_ = c.Close()
		testenv.Unavailable(t, "redis cluster at %s does not answer: %v", strings.Join(addrs, ","), err)
	}
	r.Client = c
	t.Cleanup(func() {
		ctx, cancel := testenv.CleanupContext()
		defer cancel()
		if err := deleteMatchingCluster(ctx, c, matchName(r.Prefix)); err != nil {
			t.Errorf("testenv: deleting keys %s: %v", matchName(r.Prefix), err)
		}
		_ = c.Close()
	})
	return r
}

func splitAddrs(s string) []string {
	var addrs []string
	for a := range strings.SplitSeq(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// ClusterOptions returns the options the test helpers give a cluster
// client of addrs: go-redis's defaults but those the Redis backends
// recommend for a cluster (see "Redis Cluster" in their package
// documentation): a dial timeout of one second and one dial attempt per
// connection, so that a master that died costs a call one refused dial, not
// five with pauses.
//
// Each call gets its own copy of addrs: go-redis appends the nodes it
// finds to Addrs, and two clients appending to one array race.
func ClusterOptions(addrs []string) *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: slices.Clip(slices.Clone(addrs)), DialTimeout: time.Second, DialerRetries: 1}
}

func (r *RedisCluster) newClient() *redis.ClusterClient {
	return redis.NewClusterClient(ClusterOptions(r.addrs))
}

// NewClient returns another cluster client with its own connections (as a
// second server instance would have), closed when the test ends.
func (r *RedisCluster) NewClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	c := r.newClient()
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Keys returns the keys under the test's prefix on every master, for tests
// that check what a store left behind.
func (r *RedisCluster) Keys(ctx context.Context) ([]string, error) {
	return scanCluster(ctx, r.Client, matchName(r.Prefix))
}

// matchName is the SCAN pattern of every key that contains the name of
// prefix (see Redis.match).
func matchName(prefix string) string { return "*" + strings.TrimSuffix(prefix, ":") + "*" }

// clusterOK reports an error unless c reaches the cluster and it serves
// every slot.
func clusterOK(ctx context.Context, c *redis.ClusterClient) error {
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return fmt.Errorf("cluster_state is not ok")
	}
	return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
}

// scanCluster returns the keys matching match on every master of c.
func scanCluster(ctx context.Context, c *redis.ClusterClient, match string) ([]string, error) {
	var (
		mu  sync.Mutex
		all []string
	)
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		iter := m.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			all = append(all, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	})
	return all, err
}

// deleteMatchingCluster deletes the keys matching match on every master of
// c, one key per DEL (the keys of one node may lie in many slots).
func deleteMatchingCluster(ctx context.Context, c *redis.ClusterClient, match string) error {
	return c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		iter := m.Scan(ctx, 0, match, 1000).Iterator()
		p := m.Pipeline()
		for iter.Next(ctx) {
			p.Del(ctx, iter.Val())
			if p.Len() == 1000 {
				if _, err := p.Exec(ctx); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		if p.Len() > 0 {
			_, err := p.Exec(ctx)
			return err
		}
		return nil
	})
}

// StorePrefix returns a fresh store prefix under the test's, each in its
// own hash slot, so that a test's stores spread over the masters; i
// chooses the form: even gives a prefix without a hash tag (the store adds
// one around it), odd one with a tag of its own ("<Prefix>{<name>}:").
func (r *RedisCluster) StorePrefix(i int) string {
	if i%2 == 0 {
		return r.Prefix + testenv.UniqueName()
	}
	return r.Prefix + "{" + testenv.UniqueName() + "}:"
}
