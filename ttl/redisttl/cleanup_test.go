package redisttl_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/redisttl"
)

// TestRedisCleanupFindsHashTaggedKeys checks that a backend test leaves no
// key behind, whichever form its keys take: a backend that wraps the prefix
// in a hash tag ("{ttlkit_t_<hex>:}:activity", as redisttl does) puts the
// name after a "{", so a scan of "<prefix>*" alone would miss it.
func TestRedisCleanupFindsHashTaggedKeys(t *testing.T) {
	ctx := context.Background()
	var name string
	t.Run("use", func(t *testing.T) {
		r := redistest.OpenRedis(t)
		name = strings.TrimSuffix(r.Prefix, ":")
		b, err := redisttl.New(r.Client, redisttl.Options{Prefix: r.Prefix})
		require.NoError(t, err)
		require.NoError(t, b.Add(ctx, []ttl.Activity{{ID: "w1", At: time.Now()}}))
		require.Equal(t, "{"+r.Prefix+"}:activity", b.Key())
		for _, k := range []string{
			r.Prefix + "plain",
			"{" + name + "}:wrapped",
			"{" + name + "-other}:wrapped",
			"app:{" + r.Prefix + "}:tagged",
		} {
			require.NoError(t, r.Client.Set(ctx, k, 1, 0).Err())
		}
		require.Len(t, scanAll(t, r.Client, "*"+name+"*"), 5)
	})
	r := redistest.OpenRedis(t)
	assert.Empty(t, scanAll(t, r.Client, "*"+name+"*"), "keys of the test survived it")
}

func scanAll(t *testing.T, c *redis.Client, match string) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	iter := c.Scan(ctx, 0, match, 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	require.NoError(t, iter.Err())
	return keys
}
