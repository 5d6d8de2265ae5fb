package redislease_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/leasetest"
	"github.com/ttlkit/ttlkit/lease/redislease"
)

var ctx = context.Background()

// storePrefix returns a store prefix under the test's key prefix, with a
// hash tag, so that testenv finds (and deletes) every key the store writes.
func storePrefix(r *testenv.Redis) string { return r.Prefix + "{lease}:" }

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
		server = map[*redislease.Store]*testenv.Redis{}
	)
	leasetest.Run(t, leasetest.Harness{
		New: func(t *testing.T) lease.Store {
			r := testenv.OpenRedis(t)
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
	require.ErrorIs(t, err, redislease.ErrInvalid)
	assert.Contains(t, err.Error(), "Prefix")
	_, err = redislease.New(nil, redislease.Options{Prefix: "x"})
	require.ErrorIs(t, err, redislease.ErrInvalid)
	assert.Contains(t, err.Error(), "client")
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
		require.ErrorIs(t, err, redislease.ErrInvalid, "prefix %q", prefix)
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
	r := testenv.OpenRedis(t)
	tagged := newStore(t, r.Client, storePrefix(r))
	// The wrapped form: "{<prefix>}:...", which testenv does not clean up.
	plain := newStore(t, r.Client, strings.TrimSuffix(r.Prefix, ":")+"-plain")
	t.Cleanup(func() {
		bg := context.Background()
		r.Client.Del(bg, plain.Keys()...)
		iter := r.Client.Scan(bg, 0, "{"+strings.TrimSuffix(r.Prefix, ":")+"-plain}:receipt:*", 100).Iterator()
		for iter.Next(bg) {
			r.Client.Del(bg, iter.Val())
		}
	})

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

	// Besides Keys, only receipts (carol's release left one).
	noReceipts := func(keys []string) []string {
		return slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return strings.Contains(k, "}:receipt:") })
	}
	keys, err := r.Keys(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, tagged.Keys(), noReceipts(keys), "keys under the test prefix")
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
	assert.ElementsMatch(t, plain.Keys(), noReceipts(plainKeys))
	for _, k := range plainKeys {
		assert.Equal(t, strings.TrimSuffix(r.Prefix, ":")+"-plain", slot(k), k)
	}

	// Sweeping and releasing everything leaves the counters (the state
	// hash), the memory of the releases and the calls' receipts, which
	// expire.
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
	var receipts []string
	keys = slices.DeleteFunc(keys, func(k string) bool {
		if strings.HasPrefix(k, storePrefix(r)+"receipt:") {
			receipts = append(receipts, k)
			return true
		}
		return false
	})
	assert.ElementsMatch(t, []string{storePrefix(r) + "state", storePrefix(r) + "released"}, keys)
	assert.Len(t, receipts, 3) // carol's release, the sweep, the last release
	for _, k := range receipts {
		ttl, err := r.Client.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.True(t, ttl > 0 && ttl <= time.Minute, "receipt %s expires in %v", k, ttl)
		assert.Equal(t, "lease", slot(k), k)
	}
}

func args(holder string, budget int, ttl, grace time.Duration, costs ...int) lease.GrantArgs {
	if len(costs) == 0 {
		costs = []int{1}
	}
	return lease.GrantArgs{
		ID: lease.NewID(), Holder: holder, Resource: "cam-" + holder, Costs: costs,
		TTL: ttl, Grace: grace, Budget: budget, OnePerHolder: true,
	}
}

// TestGrantRepeatIsIdempotent checks what a client retry of a grant whose
// reply was lost sees: the same lease, not a second one nor a rejection.
func TestGrantRepeatIsIdempotent(t *testing.T) {
	r := testenv.OpenRedis(t)
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
	r := testenv.OpenRedis(t)
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
	r := testenv.OpenRedis(t)
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
	r := testenv.OpenRedis(t)
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
	r := testenv.OpenRedis(t)
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
		if errors.As(err, &re) && re.Reason == lease.ReasonHolderHasLease {
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
