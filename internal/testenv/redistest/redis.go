package redistest

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/ttlkit/ttlkit/internal/testenv"
)

// Redis is a test's view of the Redis server named by TTLKIT_TEST_REDIS_URL.
type Redis struct {
	// Client is connected to the server; it is closed when the test ends.
	Client *redis.Client
	// Prefix is unique to the test ("ttlkit_t_<hex>:"). Every key the test
	// writes must contain its name ("ttlkit_t_<hex>"), at the start or
	// inside a hash tag ("{ttlkit_t_<hex>:}:activity"): those keys are
	// deleted when the test ends.
	Prefix string

	opts *redis.Options
}

// OpenRedis connects to the Redis server named by TTLKIT_TEST_REDIS_URL and
// registers the deletion of every key that contains the returned Prefix's
// name when the test ends. It skips or fails t (see the package doc) when the server is not set
// or does not answer.
func OpenRedis(t testing.TB) *Redis {
	t.Helper()
	url := testenv.Lookup(t, testenv.EnvRedis)
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("testenv: %s: %v", testenv.EnvRedis, err)
	}
	r := &Redis{Prefix: testenv.UniqueName() + ":", opts: opts}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.ConnectTimeout)
	defer cancel()
	c := redis.NewClient(opts)
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		testenv.Unavailable(t, "redis at %s does not answer: %v", opts.Addr, err)
	}
	r.Client = c
	t.Cleanup(func() {
		ctx, cancel := testenv.CleanupContext()
		defer cancel()
		if err := deleteMatching(ctx, c, r.match()); err != nil {
			t.Errorf("testenv: deleting keys %s: %v", r.match(), err)
		}
		_ = c.Close()
	})
	return r
}

// NewClient returns another client with its own connections to the same
// server (as a second server instance would have), closed when the test ends.
func (r *Redis) NewClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(r.opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Keys returns the keys under the test's prefix, for tests that check what a
// store left behind.
func (r *Redis) Keys(ctx context.Context) ([]string, error) {
	var keys []string
	iter := r.Client.Scan(ctx, 0, r.Prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	return keys, iter.Err()
}

// match is the SCAN pattern of every key the test may have written: its
// name anywhere in the key, so that backends which wrap the prefix in a hash
// tag ("{" + Prefix + "}:...") or put it after their own ("app:{" + Prefix +
// "}:...") are cleaned up too. The name is random, so nothing else matches.
func (r *Redis) match() string {
	return "*" + strings.TrimSuffix(r.Prefix, ":") + "*"
}

func deleteMatching(ctx context.Context, c *redis.Client, match string) error {
	iter := c.Scan(ctx, 0, match, 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 1000 {
			if err := c.Del(ctx, batch...).Err(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		return c.Del(ctx, batch...).Err()
	}
	return nil
}
