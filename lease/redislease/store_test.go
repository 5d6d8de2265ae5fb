package redislease_test

import (
	"context"
	crand "crypto/rand"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/leasetest"
	"github.com/ttlkit/ttlkit/lease/redislease"
)

var ctx = context.Background()

// storePrefix returns a store prefix under the test's key prefix, with a
// hash tag, so that testenv finds (and deletes) every key the store writes.
func storePrefix(r *redistest.Redis) string { return r.Prefix + "{lease}:" }

// newStore returns a store on c under prefix whose leases may have a grace
// of up to 10 minutes (tests that restart the server use their own).
func newStore(t *testing.T, c redis.UniversalClient, prefix string) *redislease.Store {
	t.Helper()
	s, err := redislease.New(c, redislease.Options{Prefix: prefix, MaxGrace: 10 * time.Minute})
	require.NoError(t, err)
	return s
}

func TestConformance(t *testing.T) {
	var (
		mu     sync.Mutex
		server = map[*redislease.Store]*redistest.Redis{}
	)
	leasetest.Run(t, leasetest.Harness{
		New: func(t *testing.T) lease.Store {
			r := redistest.OpenRedis(t)
			s := newStore(t, r.Client, storePrefix(r))
			mu.Lock()
			server[s] = r
			mu.Unlock()
			return s
		},
		Peer: func(t *testing.T, s lease.Store) lease.Store {
			mu.Lock()
			r := server[s.(*redislease.Store)]
			mu.Unlock()
			return newStore(t, r.NewClient(t), storePrefix(r))
		},
		// Waits keep half a Unit of margin; 250ms absorbs scheduling delays
		// on a loaded machine.
		Unit: 250 * time.Millisecond,
		// The servers run on this host, on its clock; each remembers releases.
		LocalClock: true, RemembersReleases: true,
	})
}

func TestNewValidates(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	_, err := redislease.New(c, redislease.Options{})
	require.ErrorIs(t, err, lease.ErrInvalid)
	assert.Contains(t, err.Error(), "Prefix")
	_, err = redislease.New(nil, redislease.Options{Prefix: "x"})
	require.ErrorIs(t, err, lease.ErrInvalid)
	assert.Contains(t, err.Error(), "client")
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	for _, tc := range []struct {
		c    redis.UniversalClient
		o    redislease.Options
		want string
	}{
		{c, redislease.Options{Prefix: "x", WaitReplicas: 1, WaitTimeout: -time.Second}, "redislease: WaitTimeout (-1s) must not be negative"},
		{c, redislease.Options{Prefix: "x", WaitReplicas: -1, WaitTimeout: -time.Second}, "redislease: WaitTimeout (-1s) must not be negative"},
		{c, redislease.Options{Prefix: "x", WaitReplicas: 1, WaitTimeout: 5 * time.Second}, "redislease: WaitTimeout (5s) must be below the client's ReadTimeout (5s)"},
		{c, redislease.Options{Prefix: "x", WaitTimeout: 5 * time.Second}, "redislease: WaitTimeout (5s) must be below the client's ReadTimeout (5s)"},
		{ring, redislease.Options{Prefix: "x", WaitReplicas: 1}, "redislease: WaitReplicas (1) needs a *redis.Client or *redis.ClusterClient, not *redis.Ring"},
	} {
		_, err = redislease.New(tc.c, tc.o)
		require.ErrorIs(t, err, lease.ErrInvalid)
		assert.EqualError(t, err, tc.want)
	}
	// Never waiting, and waiting for the replicas there are (which a ring
	// cannot, so it never waits), are valid with any client; so is the
	// default WaitTimeout with a short ReadTimeout.
	short := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: 500 * time.Millisecond})
	defer short.Close()
	for _, tc := range []struct {
		c redis.UniversalClient
		n int
	}{{c, -1}, {ring, -1}, {ring, 0}, {short, 0}} {
		_, err = redislease.New(tc.c, redislease.Options{Prefix: "x", WaitReplicas: tc.n})
		require.NoError(t, err, "%T, WaitReplicas %d", tc.c, tc.n)
	}
}

// TestWaitReplicasByDefault: with the default WaitReplicas, a write waits
// for the master's replica while it has one, so that a replica that takes
// over has every acknowledged write: with the replica stopped, a write
// fails with ErrNotReplicated (on the old code it was acknowledged, and a
// failover could lose it), and so it does for a while after the replica is
// gone (a replica cut off may still take over). A master that never had
// a replica is not waited for, and WaitReplicas -1 never waits.
func TestWaitReplicasByDefault(t *testing.T) {
	master := redistest.StartRedis(t, redistest.RedisServerOptions{})
	host, port, err := net.SplitHostPort(master.Addr)
	require.NoError(t, err)
	replica := redistest.StartRedis(t, redistest.RedisServerOptions{Args: []string{"--replicaof", host, port}})
	mc := master.NewClient(t, nil)
	require.Eventually(t, func() bool {
		info, err := mc.Info(ctx, "replication").Result()
		return err == nil && strings.Contains(info, ",state=online,")
	}, 10*time.Second, 20*time.Millisecond, "the replica never synced")

	s, err := redislease.New(mc, redislease.Options{Prefix: "cams", WaitTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	never, err := redislease.New(master.NewClient(t, nil), redislease.Options{Prefix: "cams", WaitReplicas: -1})
	require.NoError(t, err)
	l, err := s.Grant(ctx, args("alice", 10, time.Minute, 10*time.Second))
	require.NoError(t, err)

	replica.Pause()
	_, err = s.Heartbeat(ctx, l.ID, "")
	require.ErrorIs(t, err, redislease.ErrNotReplicated)
	require.ErrorIs(t, err, lease.ErrUnknownOutcome)
	_, err = s.Grant(ctx, args("bob", 10, time.Minute, 10*time.Second))
	require.ErrorIs(t, err, redislease.ErrNotReplicated, "the replica is still online for its master")
	_, err = never.Heartbeat(ctx, l.ID, "")
	require.NoError(t, err, "WaitReplicas -1 waits for no replica")

	replica.Resume()
	replica.Kill()
	_, err = s.Heartbeat(ctx, l.ID, "")
	require.ErrorIs(t, err, redislease.ErrNotReplicated, "the replica is gone, but may take over")

	alone := redistest.StartRedis(t, redistest.RedisServerOptions{})
	s, err = redislease.New(alone.NewClient(t, nil), redislease.Options{Prefix: "cams", WaitTimeout: time.Second})
	require.NoError(t, err)
	start := time.Now()
	_, err = s.Grant(ctx, args("carol", 10, time.Minute, 10*time.Second))
	require.NoError(t, err)
	assert.Less(t, time.Since(start), time.Second, "the grant waited for a replica")
}

// TestWaitReplicasNotAcknowledged: on a server without replicas, a write
// waits WaitTimeout and fails with ErrNotReplicated and
// lease.ErrUnknownOutcome, although it took effect on the server (a
// repeated Grant with the same ID returns the lease); reads do not wait.
func TestWaitReplicasNotAcknowledged(t *testing.T) {
	r := redistest.OpenRedis(t)
	replicas, err := r.Client.Info(ctx, "replication").Result()
	require.NoError(t, err)
	if !strings.Contains(replicas, "connected_slaves:0") {
		t.Skip("the shared server has replicas")
	}
	s, err := redislease.New(r.Client, redislease.Options{Prefix: storePrefix(r), MaxGrace: 10 * time.Minute,
		WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	a := args("alice", 10, time.Minute, time.Minute)
	start := time.Now()
	_, err = s.Grant(ctx, a)
	require.ErrorIs(t, err, redislease.ErrNotReplicated)
	require.ErrorIs(t, err, lease.ErrUnknownOutcome)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond, "the grant did not wait")
	l, err := s.Get(ctx, a.ID)
	require.NoError(t, err, "a read waits for no replica")
	again, err := newStore(t, r.Client, storePrefix(r)).Grant(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, l, again)
}

func TestKeysAreHashTagged(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	for prefix, want := range map[string]string{
		"cams":         "{cams}:leases",
		"app:{cams}:":  "app:{cams}:leases",
		"{x}":          "{x}leases",
		"ttl{kit}cams": "ttl{kit}camsleases",
	} {
		s := newStore(t, c, prefix)
		keys := s.Keys()
		assert.Equal(t, want, keys[0], "prefix %q", prefix)
		for _, k := range keys {
			assert.Equal(t, slot(keys[0]), slot(k), "key %q of prefix %q", k, prefix)
		}
	}
	// "{}" is no hash tag, so "a{}b" would be wrapped as "{a{}b}:", whose
	// tag is "a{", not the prefix; a prefix with an early "}" likewise.
	for _, prefix := range []string{"a{}b", "}x", "a}b"} {
		_, err := redislease.New(c, redislease.Options{Prefix: prefix})
		require.ErrorIs(t, err, lease.ErrInvalid, "prefix %q", prefix)
		assert.Contains(t, err.Error(), "Prefix", "prefix %q", prefix)
	}
}

// slot returns the part of key that Redis Cluster hashes.
func slot(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// TestKeysUnderPrefix checks that a store writes only its own keys, all
// under its prefix and in one hash slot, for both prefix forms.
func TestKeysUnderPrefix(t *testing.T) {
	r := redistest.OpenRedis(t)
	tagged := newStore(t, r.Client, storePrefix(r))
	// The wrapped form: "{<prefix>}:...", which testenv does not clean up.
	plain := newStore(t, r.Client, strings.TrimSuffix(r.Prefix, ":")+"-plain")
	t.Cleanup(func() { r.Client.Del(context.Background(), plain.Keys()...) })

	for _, s := range []*redislease.Store{tagged, plain} {
		l, err := s.Grant(ctx, args("alice", 10, time.Minute, 50*time.Millisecond))
		require.NoError(t, err)
		_, err = s.Grant(ctx, args("bob", 10, time.Minute, time.Minute))
		require.NoError(t, err)
		_, err = s.Heartbeat(ctx, l.ID, "")
		require.NoError(t, err)
		c, err := s.Grant(ctx, args("carol", 10, time.Minute, time.Minute))
		require.NoError(t, err)
		_, err = s.Release(ctx, c.ID, "")
		require.NoError(t, err)
		time.Sleep(100 * time.Millisecond)
		_, _, err = s.Usage(ctx) // retires alice's lease
		require.NoError(t, err)
	}

	// Keys, and no other: carol's receipt is a field of one of them.
	keys, err := r.Keys(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, tagged.Keys(), keys, "keys under the test prefix")
	for _, k := range keys {
		assert.True(t, strings.HasPrefix(k, storePrefix(r)), k)
		assert.Equal(t, "lease", slot(k), k)
	}

	var plainKeys []string
	iter := r.Client.Scan(ctx, 0, "{"+strings.TrimSuffix(r.Prefix, ":")+"-plain}:*", 100).Iterator()
	for iter.Next(ctx) {
		plainKeys = append(plainKeys, iter.Val())
	}
	require.NoError(t, iter.Err())
	assert.ElementsMatch(t, plain.Keys(), plainKeys)
	for _, k := range plainKeys {
		assert.Equal(t, strings.TrimSuffix(r.Prefix, ":")+"-plain", slot(k), k)
	}

	// Sweeping and releasing everything leaves the counters (the state
	// hash), the memory of the releases, and the receipt of the last call:
	// each call deleted the receipt of the one before, which had returned.
	for _, s := range []*redislease.Store{tagged, plain} {
		swept, err := s.Sweep(ctx, 10)
		require.NoError(t, err)
		require.Len(t, swept, 1)
		ls, err := s.List(ctx)
		require.NoError(t, err)
		require.Len(t, ls, 1)
		_, err = s.Release(ctx, ls[0].ID, "")
		require.NoError(t, err)
	}
	keys, err = r.Keys(ctx)
	require.NoError(t, err)
	p := storePrefix(r)
	assert.ElementsMatch(t, []string{p + "state", p + "released", p + "receipts", p + "receipted"}, keys)
	n, err := r.Client.HLen(ctx, p+"receipts").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "receipts kept")
	due, err := r.Client.ZRangeWithScores(ctx, p+"receipted", 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, due, 1)
	in := time.Until(time.UnixMicro(int64(due[0].Score)))
	assert.True(t, in > 0 && in <= time.Minute, "the receipt goes in %v", in)
}

func args(holder string, budget int, ttl, grace time.Duration, costs ...int) lease.GrantArgs {
	if len(costs) == 0 {
		costs = []int{1}
	}
	return lease.GrantArgs{
		ID: crand.Text(), Holder: holder, Resource: "cam-" + holder, Costs: costs,
		TTL: ttl, Grace: grace, Budget: budget, OnePerHolder: true,
	}
}

// TestGrantRepeatIsIdempotent checks what a client retry of a grant whose
// reply was lost sees: the same lease, not a second one nor a rejection.
func TestGrantRepeatIsIdempotent(t *testing.T) {
	r := redistest.OpenRedis(t)
	s := newStore(t, r.Client, storePrefix(r))
	a := args("alice", 2, time.Minute, time.Minute, 2)
	l, err := s.Grant(ctx, a)
	require.NoError(t, err)
	again, err := s.Grant(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, l, again)
	u, n, err := s.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, [2]int{2, 1}, [2]int{u, n})

	// The same id for another holder is bad input, and stores nothing.
	b := a
	b.Holder = "bob"
	_, err = s.Grant(ctx, b)
	require.ErrorIs(t, err, lease.ErrInvalid)
	u, n, err = s.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, [2]int{2, 1}, [2]int{u, n})
}

// TestRecordsRoundTrip checks holders and resources with the record
// separator, digits and arbitrary bytes, and durations that are not whole milliseconds.
func TestRecordsRoundTrip(t *testing.T) {
	r := redistest.OpenRedis(t)
	s := newStore(t, r.Client, storePrefix(r))
	for _, hr := range [][2]string{
		{"a,b", "c,d"}, {"12", "34"}, {"x", ""}, {"日本語", "\x00\xff,"}, {"h:1", "5:z"},
	} {
		a := args(hr[0], 10, time.Minute+1, time.Minute+1500*time.Nanosecond)
		a.Resource = hr[1]
		l, err := s.Grant(ctx, a)
		require.NoError(t, err)
		assert.Equal(t, hr[0], l.Holder)
		assert.Equal(t, hr[1], l.Resource)
		assert.Equal(t, a.Grace, l.Grace)
		got, err := s.Get(ctx, l.ID)
		require.NoError(t, err)
		assert.Equal(t, l, got)
		_, err = s.Grant(ctx, args(hr[0], 10, time.Minute, time.Minute))
		var re *lease.RejectedError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, l.ID, re.Existing)
	}
	// A holder whose name is another holder's name plus more is another
	// holder.
	_, err := s.Grant(ctx, args("a,bc", 10, time.Minute, time.Minute))
	require.NoError(t, err)
	ls, err := s.List(ctx)
	require.NoError(t, err)
	assert.Len(t, ls, 6)
}

// TestServerErrorsAreWrapped checks that a failing server is reported with
// an error that wraps the client's and matches no lease sentinel.
func TestServerErrorsAreWrapped(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	s := newStore(t, c, "x")
	_, err := s.Grant(ctx, args("alice", 1, time.Minute, time.Minute))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "redislease: grant")
	for _, sentinel := range []error{lease.ErrNotFound, lease.ErrExpired, lease.ErrInvalid, lease.ErrOverCapacity,
		lease.ErrHolderHasLease, lease.ErrOverloaded} {
		assert.False(t, errors.Is(err, sentinel), "matches %v", sentinel)
	}
	var oe interface{ Timeout() bool }
	assert.True(t, errors.As(err, &oe), "wraps the network error: %v", err)

	// A key of the wrong type is a server error too, not a rule outcome.
	r := redistest.OpenRedis(t)
	s = newStore(t, r.Client, storePrefix(r))
	require.NoError(t, r.Client.Set(ctx, s.Keys()[0], "not a hash", 0).Err())
	_, err = s.Get(ctx, "id")
	var re redis.Error
	require.ErrorAs(t, err, &re)
	assert.False(t, errors.Is(err, lease.ErrNotFound))
}

// noScript answers every EVALSHA with NOSCRIPT, as a server that has just
// restarted (or flushed its script cache) does, and counts the EVALs sent.
type noScript struct{ evals atomic.Int64 }

func (n *noScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (n *noScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "evalsha":
			cmd.SetErr(redis.ErrNoScript)
			return redis.ErrNoScript
		case "eval":
			n.evals.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (n *noScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestNoScriptFallsBackToEval checks that every operation works when the
// server does not have the script cached: EVALSHA fails, EVAL runs it.
func TestNoScriptFallsBackToEval(t *testing.T) {
	r := redistest.OpenRedis(t)
	c := r.NewClient(t)
	hook := &noScript{}
	c.AddHook(hook)
	s := newStore(t, c, storePrefix(r))
	l, err := s.Grant(ctx, args("alice", 2, time.Minute, time.Minute))
	require.NoError(t, err)
	_, err = s.Heartbeat(ctx, l.ID, "")
	require.NoError(t, err)
	_, err = s.Get(ctx, l.ID)
	require.NoError(t, err)
	ls, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, ls, 1)
	u, n, err := s.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, [2]int{1, 1}, [2]int{u, n})
	_, err = s.Sweep(ctx, 1)
	require.NoError(t, err)
	_, err = s.Release(ctx, l.ID, "")
	require.NoError(t, err)
	assert.Equal(t, int64(7), hook.evals.Load())
}

// TestHolderIndex exercises the holder index with several leases per holder
// (the rule off for their grants): releases and expiry take out exactly
// the right entry, and the rule sees the holder free only when none is
// left.
func TestHolderIndex(t *testing.T) {
	r := redistest.OpenRedis(t)
	s := newStore(t, r.Client, storePrefix(r))
	grant := func(grace time.Duration) lease.Lease {
		a := args("alice", 10, time.Minute, grace)
		a.OnePerHolder = false
		l, err := s.Grant(ctx, a)
		require.NoError(t, err)
		return l
	}
	existing := func() string {
		t.Helper()
		_, err := s.Grant(ctx, args("alice", 10, time.Minute, time.Minute))
		var re *lease.RejectedError
		if errors.As(err, &re) && re.Err == lease.ErrHolderHasLease {
			return re.Existing
		}
		require.NoError(t, err, "want HolderHasLease or a grant")
		return ""
	}
	short := grant(100 * time.Millisecond)
	a, b, c := grant(time.Minute), grant(time.Minute), grant(time.Minute)
	assert.Contains(t, []string{short.ID, a.ID, b.ID, c.ID}, existing())
	_, err := s.Release(ctx, b.ID, "")
	require.NoError(t, err)
	assert.Contains(t, []string{short.ID, a.ID, c.ID}, existing())
	time.Sleep(150 * time.Millisecond) // short expires
	assert.Contains(t, []string{a.ID, c.ID}, existing())
	_, err = s.Release(ctx, a.ID, "")
	require.NoError(t, err)
	assert.Equal(t, c.ID, existing())
	_, err = s.Release(ctx, c.ID, "")
	require.NoError(t, err)
	free := existing() // granted now: the holder had nothing left
	assert.Empty(t, free)
	u, n, err := s.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, [2]int{1, 1}, [2]int{u, n})
	swept, err := s.Sweep(ctx, 10)
	require.NoError(t, err)
	require.Len(t, swept, 1)
	assert.Equal(t, short.ID, swept[0].ID)
}
