package redispool_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/pool/pooltest"
	"github.com/ttlkit/ttlkit/pool/redispool"
	"github.com/ttlkit/ttlkit/pool/shared"
)

var ctx = context.Background()

// poolPrefix puts the inventory under the test's key prefix with a hash tag.
func poolPrefix(r *redistest.Redis) string { return r.Prefix + "{pool}:" }

func newInventory(t *testing.T, c redis.UniversalClient, prefix string) *redispool.Inventory {
	t.Helper()
	inv, err := redispool.New(c, redispool.Options{Prefix: prefix})
	require.NoError(t, err)
	return inv
}

// openViews returns n inventories sharing r's prefix, each on its own client
// (the first on r.Client).
func openViews(t *testing.T, r *redistest.Redis, n int) []*redispool.Inventory {
	invs := make([]*redispool.Inventory, n)
	for i := range invs {
		c := r.Client
		if i > 0 {
			c = r.NewClient(t)
		}
		invs[i] = newInventory(t, c, poolPrefix(r))
	}
	return invs
}

func TestConformance(t *testing.T) {
	pooltest.Run(t, pooltest.Harness{Open: func(t *testing.T, n int) []shared.Inventory {
		r := redistest.OpenRedis(t)
		out := make([]shared.Inventory, n)
		for i, inv := range openViews(t, r, n) {
			out[i] = inv
		}
		return out
	}})
}

func TestNewValidates(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, tc := range []struct {
		client redis.UniversalClient
		opts   redispool.Options
		want   string
	}{
		{nil, redispool.Options{Prefix: "p"}, "client"},
		{c, redispool.Options{}, "Prefix"},
		{c, redispool.Options{Prefix: "p", ReplayWindow: -time.Second}, "ReplayWindow"},
		{c, redispool.Options{Prefix: "p", WaitReplicas: -1}, "WaitReplicas (-1)"},
		{c, redispool.Options{Prefix: "p", WaitReplicas: 1, WaitTimeout: -time.Second}, "WaitTimeout (-1s)"},
		{c, redispool.Options{Prefix: "p", WaitReplicas: 1, WaitTimeout: time.Minute}, "WaitTimeout (1m0s) must be below the client's ReadTimeout"},
	} {
		_, err := redispool.New(tc.client, tc.opts)
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.want)
		assert.True(t, strings.HasPrefix(err.Error(), "redispool: "), err.Error())
	}
	inv, err := redispool.New(c, redispool.Options{Prefix: "gw"})
	require.NoError(t, err)
	assert.Equal(t, "{gw}:records", inv.Keys()[3])
	inv, err = redispool.New(c, redispool.Options{Prefix: "app:{gw}:"})
	require.NoError(t, err)
	assert.Equal(t, "app:{gw}:records", inv.Keys()[3])
}

// Bad options match ErrInvalid, and a Prefix whose keys would not share
// one Redis Cluster hash slot is refused.
func TestNewOptionErrorsMatchErrInvalid(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	for _, tc := range []struct {
		client redis.UniversalClient
		opts   redispool.Options
		want   string
	}{
		{nil, redispool.Options{Prefix: "p"}, "redispool: client is nil"},
		{c, redispool.Options{}, "redispool: Prefix is empty"},
		{c, redispool.Options{Prefix: "}gw"}, `redispool: Prefix "}gw"`},
		{c, redispool.Options{Prefix: "p", ReplayWindow: -time.Second}, "redispool: ReplayWindow (-1s) is negative"},
	} {
		_, err := redispool.New(tc.client, tc.opts)
		require.ErrorIs(t, err, redispool.ErrInvalid, "%+v", tc.opts)
		assert.True(t, strings.HasPrefix(err.Error(), tc.want), err.Error())
	}
}

func TestBadArguments(t *testing.T) {
	r := redistest.OpenRedis(t)
	inv := newInventory(t, r.Client, poolPrefix(r))
	rec := shared.Record{ID: "x"}
	errs := []error{
		inv.Add(ctx, shared.Record{}, 0),
		inv.Add(ctx, rec, -time.Second),
		func() error { _, _, err := inv.Pop(ctx, "", 0); return err }(),
		func() error { _, err := inv.Claim(ctx, "x", "", 0); return err }(),
		func() error { _, err := inv.Put(ctx, rec, -1, 0); return err }(),
		func() error { _, err := inv.Touch(ctx, "a", []string{"x"}, -1); return err }(),
		func() error { _, err := inv.Remove(ctx, ""); return err }(),
		func() error { _, err := inv.Reserve(ctx, "", 1, 0); return err }(),
	}
	for i, err := range errs {
		assert.ErrorIs(t, err, redispool.ErrInvalid, "case %d", i)
	}
	keys, err := r.Keys(ctx)
	require.NoError(t, err)
	assert.Empty(t, keys, "a rejected call wrote to Redis")
}

// TestKeysUnderPrefixAndExpiring checks that every key the inventory writes
// is under its prefix and carries a ttl when the records do, and that a
// fleet that stops calling leaves nothing behind once the ttls pass.
func TestKeysUnderPrefixAndExpiring(t *testing.T) {
	r := redistest.OpenRedis(t)
	inv, err := redispool.New(r.Client, redispool.Options{Prefix: poolPrefix(r), ReplayWindow: 700 * time.Millisecond})
	require.NoError(t, err)
	const ttl = 700 * time.Millisecond
	for _, id := range []string{"a", "b", "c"} {
		require.NoError(t, inv.Add(ctx, shared.Record{ID: id, Data: []byte("{}")}, ttl))
	}
	require.NoError(t, inv.Add(ctx, shared.Record{ID: "busy", Owner: "i1", Data: []byte("{}")}, ttl))
	got, ok, err := inv.Pop(ctx, "i2", ttl)
	require.NoError(t, err)
	require.True(t, ok)
	got.LastUsed = time.Now()
	ok, err = inv.Put(ctx, got, 0, ttl)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = inv.Reserve(ctx, "tok", 10, ttl)
	require.NoError(t, err)
	require.True(t, ok)

	keys, err := r.Keys(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, inv.Keys(), keys, "the inventory's keys, and no others")
	for _, k := range keys {
		pttl, err := r.Client.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.Greater(t, pttl, time.Duration(0), "key %s has no ttl", k)
	}
	// Each state-changing call deleted the outcome of the one before: the
	// last call's is kept.
	n, err := r.Client.HLen(ctx, poolPrefix(r)+"replies").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "outcomes kept")

	// Nothing outside the prefix mentions this test's unique name.
	unique := strings.TrimSuffix(r.Prefix, ":")
	iter := r.Client.Scan(ctx, 0, "*"+unique+"*", 1000).Iterator()
	for iter.Next(ctx) {
		assert.True(t, strings.HasPrefix(iter.Val(), r.Prefix), "key %s outside the prefix", iter.Val())
	}
	require.NoError(t, iter.Err())

	// Nobody calls again (the whole fleet died): Redis drops every key by
	// itself once the ttls pass.
	require.Eventually(t, func() bool {
		keys, err := r.Keys(ctx)
		return err == nil && len(keys) == 0
	}, 10*time.Second, 50*time.Millisecond, "keys left behind")
}

// TestPersistentRecords checks that ttl 0 means no expiry for the record
// and for the indexes that hold it.
func TestPersistentRecords(t *testing.T) {
	r := redistest.OpenRedis(t)
	inv := newInventory(t, r.Client, poolPrefix(r))
	require.NoError(t, inv.Add(ctx, shared.Record{ID: "short", Data: []byte("{}")}, time.Minute))
	require.NoError(t, inv.Add(ctx, shared.Record{ID: "forever", Data: []byte("{}")}, 0))
	for _, k := range []string{poolPrefix(r) + "records", poolPrefix(r) + "items", poolPrefix(r) + "idle"} {
		pttl, err := r.Client.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.Equal(t, time.Duration(-1), pttl, "key %s", k) // exists, no expiry
	}

	// Without the persistent record, the records and indexes expire again.
	ok, err := inv.Remove(ctx, "forever")
	require.NoError(t, err)
	require.True(t, ok)
	for _, k := range []string{poolPrefix(r) + "records", poolPrefix(r) + "items", poolPrefix(r) + "idle"} {
		pttl, err := r.Client.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.Greater(t, pttl, 50*time.Second, "key %s", k)
	}
	// So do the reservations'.
	ok, err = inv.Reserve(ctx, "forever", 5, 0)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = inv.Reserve(ctx, "short", 5, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	pttl, err := r.Client.PTTL(ctx, poolPrefix(r)+"res").Result()
	require.NoError(t, err)
	assert.Equal(t, time.Duration(-1), pttl)
	require.NoError(t, inv.Unreserve(ctx, "forever"))
	pttl, err = r.Client.PTTL(ctx, poolPrefix(r)+"res").Result()
	require.NoError(t, err)
	assert.Greater(t, pttl, 50*time.Second)
}

// TestReplay resends a Pop and a Put with the same replay marker, as
// go-redis does after a lost reply: each acts once.
func TestReplay(t *testing.T) {
	r := redistest.OpenRedis(t)
	inv := newInventory(t, r.Client, poolPrefix(r))
	for _, id := range []string{"a", "b"} {
		require.NoError(t, inv.Add(ctx, shared.Record{ID: id, Data: []byte("{}")}, 0))
	}
	first, err := redispool.PopAs(ctx, inv, "op1", "i1", time.Minute)
	require.NoError(t, err)
	again, err := redispool.PopAs(ctx, inv, "op1", "i1", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, first, again)
	c, err := inv.Counts(ctx)
	require.NoError(t, err)
	assert.Equal(t, shared.Counts{Idle: 1, InUse: 1}, c, "the resent Pop popped again")

	for range 2 {
		v, err := redispool.PutAs(ctx, inv, "op2", "a", "i1", 0)
		require.NoError(t, err)
		assert.Equal(t, "OK", v, "a resent Put must report its first outcome")
	}
	c, err = inv.Counts(ctx)
	require.NoError(t, err)
	assert.Equal(t, shared.Counts{Idle: 2}, c)
	// A new call is not a resend: the item is idle, not held.
	v, err := redispool.PutAs(ctx, inv, "op3", "a", "i1", 0)
	require.NoError(t, err)
	assert.Equal(t, "NOTHELD", v)
}

func TestCancelledContext(t *testing.T) {
	r := redistest.OpenRedis(t)
	inv := newInventory(t, r.Client, poolPrefix(r))
	cause := errors.New("caller gave up")
	cctx, cancel := context.WithCancelCause(ctx)
	cancel(cause)
	_, _, err := inv.Pop(cctx, "a", 0)
	assert.ErrorIs(t, err, cause)
	assert.ErrorContains(t, err, "redispool: pop")
}

// TestWaitReplicasNotAcknowledged: on a server without replicas, a change
// waits WaitTimeout and fails with ErrNotReplicated, although it took
// effect on the server; reads do not wait.
func TestWaitReplicasNotAcknowledged(t *testing.T) {
	r := redistest.OpenRedis(t)
	info, err := r.Client.Info(ctx, "replication").Result()
	require.NoError(t, err)
	if !strings.Contains(info, "connected_slaves:0") {
		t.Skip("the shared server has replicas")
	}
	inv, err := redispool.New(r.Client, redispool.Options{Prefix: poolPrefix(r), WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	start := time.Now()
	err = inv.Add(ctx, shared.Record{ID: "a", Data: []byte("{}")}, time.Minute)
	require.ErrorIs(t, err, redispool.ErrNotReplicated)
	assert.ErrorContains(t, err, "redispool: add")
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "the add did not wait")
	c, err := inv.Counts(ctx)
	require.NoError(t, err, "a read waits for no replica")
	assert.Equal(t, shared.Counts{Idle: 1}, c, "the add took effect")
}
