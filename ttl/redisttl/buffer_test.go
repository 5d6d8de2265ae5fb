package redisttl_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/redisttl"
	"github.com/ttlkit/ttlkit/ttl/ttltest"
)

func newBuffer(t *testing.T) (*redisttl.Buffer, *redistest.Redis) {
	t.Helper()
	r := redistest.OpenRedis(t)
	b, err := redisttl.New(r.Client, redisttl.Options{Prefix: r.Prefix})
	require.NoError(t, err)
	return b, r
}

func TestConformance(t *testing.T) {
	ttltest.RunBuffer(t, ttltest.BufferHarness{New: func(t *testing.T) ttl.Buffer {
		b, _ := newBuffer(t)
		return b
	}})
}

func TestNewValidates(t *testing.T) {
	_, err := redisttl.New(nil, redisttl.Options{Prefix: "x"})
	assert.ErrorIs(t, err, ttl.ErrInvalid)
	assert.ErrorContains(t, err, "client")
	c := redis.NewClient(&redis.Options{})
	defer c.Close()
	_, err = redisttl.New(c, redisttl.Options{})
	assert.ErrorIs(t, err, ttl.ErrInvalid)
	assert.ErrorContains(t, err, "Prefix")
}

func TestKeyHashTag(t *testing.T) {
	c := redis.NewClient(&redis.Options{})
	defer c.Close()
	for prefix, want := range map[string]string{
		"codehub":       "{codehub}:activity",
		"app:{ws}:":     "app:{ws}:activity",
		"{codehub}:ttl": "{codehub}:ttlactivity",
	} {
		b, err := redisttl.New(c, redisttl.Options{Prefix: prefix})
		require.NoError(t, err)
		assert.Equal(t, want, b.Key(), "prefix %q", prefix)
	}
	// Wrapped, "odd{}:" would give "{odd{}:}:activity", whose hash tag is
	// "odd{", not the prefix: every ttlkit Redis backend refuses a prefix
	// whose "}" ends the added tag early, so keys of one prefix always
	// share the slot the prefix names.
	_, err := redisttl.New(c, redisttl.Options{Prefix: "odd{}:"})
	assert.ErrorIs(t, err, ttl.ErrInvalid)
	assert.ErrorContains(t, err, `Prefix "odd{}:"`)

	// A design's own name is used as it is.
	b, err := redisttl.New(c, redisttl.Options{Key: "codehub:activity", Prefix: "ignored"})
	require.NoError(t, err)
	assert.Equal(t, "codehub:activity", b.Key())
	_, err = redisttl.New(c, redisttl.Options{Key: "odd}key"})
	assert.ErrorIs(t, err, ttl.ErrInvalid)
	assert.ErrorContains(t, err, `Key "odd}key"`)
}

// TestConformanceKey runs the Buffer suite on a buffer named by Key.
func TestConformanceKey(t *testing.T) {
	ttltest.RunBuffer(t, ttltest.BufferHarness{New: func(t *testing.T) ttl.Buffer {
		r := redistest.OpenRedis(t)
		b, err := redisttl.New(r.Client, redisttl.Options{Key: r.Prefix + "codehub:activity"})
		require.NoError(t, err)
		return b
	}})
}

// TestScoreExact shows that a score is exactly the millisecond time Peek
// returns, so Remove compares with what Peek handed out, also for times far
// from the epoch.
func TestScoreExact(t *testing.T) {
	b, _ := newBuffer(t)
	ctx := context.Background()
	times := []time.Time{
		time.Date(2026, 2, 7, 10, 0, 0, 999_999_999, time.UTC),
		time.Date(2262, 4, 11, 0, 0, 0, 123_456_789, time.UTC),
		time.Date(1971, 1, 1, 0, 0, 0, 1_000_000, time.UTC),
	}
	var acts []ttl.Activity
	for i, at := range times {
		acts = append(acts, ttl.Activity{ID: string(rune('a' + i)), At: at})
	}
	require.NoError(t, b.Add(ctx, acts))
	got, err := b.Peek(ctx, ttl.Activity{}, 10)
	require.NoError(t, err)
	require.Len(t, got, len(times))
	byID := map[string]time.Time{}
	for _, a := range got {
		byID[a.ID] = a.At
	}
	for i, at := range times {
		id := string(rune('a' + i))
		assert.True(t, byID[id].Equal(at.Truncate(time.Millisecond)), "%s: got %v, want %v", id, byID[id], at)
	}
	n, err := b.Remove(ctx, got)
	require.NoError(t, err)
	assert.Equal(t, len(times), n)
}

// lossyDrain is the hand-written sync of a cloud-IDE workspace system: ZRANGE,
// then the store update, then ZREM of every member read. It is here only as the counter-example.
func lossyDrain(ctx context.Context, c redis.UniversalClient, key string, merge func([]ttl.Activity)) error {
	zs, err := c.ZRangeWithScores(ctx, key, 0, -1).Result()
	if err != nil {
		return err
	}
	acts := make([]ttl.Activity, len(zs))
	members := make([]any, len(zs))
	for i, z := range zs {
		acts[i] = ttl.Activity{ID: z.Member.(string), At: redisttl.ScoreTime(int64(z.Score))}
		members[i] = z.Member
	}
	merge(acts)
	if len(members) == 0 {
		return nil
	}
	return c.ZRem(ctx, key, members...).Err()
}

// TestActivityBetweenReadAndRemove injects an activity from a second client
// (another proxy instance) while the runner writes a batch to the store: the
// race-free drain keeps it for the next tick, the hand-written drain loses it.
func TestActivityBetweenReadAndRemove(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)
	first := []ttl.Activity{{ID: "ws-1", At: t0}, {ID: "ws-2", At: t0}}
	newer := ttl.Activity{ID: "ws-1", At: t0.Add(45 * time.Second)}

	t.Run("impl=ttlkit", func(t *testing.T) {
		b, r := newBuffer(t)
		proxy, err := redisttl.New(r.NewClient(t), redisttl.Options{Prefix: r.Prefix})
		require.NoError(t, err)
		require.NoError(t, b.Add(ctx, first))

		store := map[string]time.Time{}
		merge := func(acts []ttl.Activity) {
			for _, a := range acts {
				if a.At.After(store[a.ID]) {
					store[a.ID] = a.At
				}
			}
		}
		peeked, err := b.Peek(ctx, ttl.Activity{}, 100)
		require.NoError(t, err)
		merge(peeked)
		require.NoError(t, proxy.Add(ctx, []ttl.Activity{newer})) // between read and remove
		n, err := b.Remove(ctx, peeked)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "only ws-2 is unchanged since Peek")

		left, err := b.Peek(ctx, ttl.Activity{}, 100)
		require.NoError(t, err)
		require.Len(t, left, 1)
		assert.Equal(t, "ws-1", left[0].ID)
		assert.True(t, left[0].At.Equal(newer.At), "buffered %v, want %v", left[0].At, newer.At)
		merge(left) // the next tick
		assert.True(t, store["ws-1"].Equal(newer.At), "store has %v, want the injected %v", store["ws-1"], newer.At)
	})

	t.Run("impl=zrangezrem", func(t *testing.T) {
		b, r := newBuffer(t)
		proxy, err := redisttl.New(r.NewClient(t), redisttl.Options{Prefix: r.Prefix})
		require.NoError(t, err)
		require.NoError(t, b.Add(ctx, first))
		store := map[string]time.Time{}
		err = lossyDrain(ctx, r.Client, b.Key(), func(acts []ttl.Activity) {
			for _, a := range acts {
				store[a.ID] = a.At
			}
			require.NoError(t, proxy.Add(ctx, []ttl.Activity{newer}))
		})
		require.NoError(t, err)
		n, err := b.Len(ctx)
		require.NoError(t, err)
		assert.Zero(t, n, "ZREM removed the injected activity")
		assert.True(t, store["ws-1"].Equal(t0), "the store only saw the old time")
		assert.True(t, store["ws-1"].Before(newer.At), "the hand-written drain lost the newer activity")
	})
}

// TestOutOfOrderAcrossClients: batches from several instances arriving in
// any order never move a time back, also across pipelined big batches.
func TestOutOfOrderAcrossClients(t *testing.T) {
	ctx := context.Background()
	b, r := newBuffer(t)
	other, err := redisttl.New(r.NewClient(t), redisttl.Options{Prefix: r.Prefix})
	require.NoError(t, err)
	t0 := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)
	const n = 10000 // above one ZADD chunk: exercises the pipeline
	newBatch := func(offset time.Duration) []ttl.Activity {
		acts := make([]ttl.Activity, n)
		for i := range acts {
			acts[i] = ttl.Activity{ID: "ws-" + string(rune('a'+i%26)) + time.Duration(i).String(), At: t0.Add(offset)}
		}
		return acts
	}
	require.NoError(t, b.Add(ctx, newBatch(time.Minute)))
	require.NoError(t, other.Add(ctx, newBatch(time.Second))) // older, arrives later
	got, err := b.Peek(ctx, ttl.Activity{}, 2*n)
	require.NoError(t, err)
	require.Len(t, got, n)
	for _, a := range got {
		if !a.At.Equal(t0.Add(time.Minute)) {
			t.Fatalf("%s at %v, want %v", a.ID, a.At, t0.Add(time.Minute))
		}
	}
}

func TestCancelledContext(t *testing.T) {
	b, _ := newBuffer(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	cause := errors.New("shutting down")
	cancel(cause)
	err := b.Add(ctx, []ttl.Activity{{ID: "a", At: time.Now()}})
	assert.ErrorIs(t, err, cause)
	_, err = b.Remove(ctx, []ttl.Activity{{ID: "a", At: time.Now()}})
	assert.ErrorIs(t, err, cause)
	_, err = b.Peek(ctx, ttl.Activity{}, 1)
	assert.Error(t, err)
	n, err := b.Len(context.Background())
	require.NoError(t, err)
	assert.Zero(t, n, "a cancelled Add wrote nothing")
}

// TestServerErrorWrapped: a wrong-type key makes every call fail with the
// package prefix and the server's error wrapped.
func TestServerErrorWrapped(t *testing.T) {
	ctx := context.Background()
	b, r := newBuffer(t)
	require.NoError(t, r.Client.Set(ctx, b.Key(), "not a zset", 0).Err())
	err := b.Add(ctx, []ttl.Activity{{ID: "a", At: time.Now()}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "redisttl: add:")
	var rerr redis.Error
	assert.ErrorAs(t, err, &rerr)
	_, err = b.Peek(ctx, ttl.Activity{}, 10)
	assert.ErrorContains(t, err, "redisttl: peek:")
	_, err = b.Remove(ctx, []ttl.Activity{{ID: "a", At: time.Now()}})
	assert.ErrorContains(t, err, "redisttl: remove:")
}

// TestRemoveLargeBatch: only the members changed since Peek stay, whether
// the changes land before Remove reads the scores (path=watch) or between
// that read and the EXEC (path=script: EXEC is refused and the Lua script,
// whose chunk boundaries 5001 members cross, decides).
func TestRemoveLargeBatch(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(map[bool]string{false: "path=watch", true: "path=script"}[late], func(t *testing.T) {
			ctx := context.Background()
			b, r := newBuffer(t)
			proxy, err := redisttl.New(r.NewClient(t), redisttl.Options{Prefix: r.Prefix})
			require.NoError(t, err)
			t0 := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)
			const n = 5001
			acts := make([]ttl.Activity, n)
			for i := range acts {
				acts[i] = ttl.Activity{ID: fmt.Sprint("ws-", i), At: t0.Add(time.Duration(i) * time.Millisecond)}
			}
			require.NoError(t, b.Add(ctx, acts))
			peeked, err := b.Peek(ctx, ttl.Activity{}, n)
			require.NoError(t, err)
			require.Len(t, peeked, n)
			var newer []ttl.Activity
			for i := 0; i < n; i += 7 {
				newer = append(newer, ttl.Activity{ID: acts[i].ID, At: acts[i].At.Add(time.Millisecond)})
			}
			hooked := 0
			if late {
				redisttl.SetBeforeExec(b, func() {
					hooked++
					require.NoError(t, proxy.Add(ctx, newer))
				})
			} else {
				require.NoError(t, proxy.Add(ctx, newer))
			}
			removed, err := b.Remove(ctx, peeked)
			require.NoError(t, err)
			assert.Equal(t, n-len(newer), removed)
			left, err := b.Peek(ctx, ttl.Activity{}, n)
			require.NoError(t, err)
			assert.ElementsMatch(t, newer, left)
			if late {
				assert.Equal(t, 1, hooked, "the script path does not read the scores under WATCH")
			}
		})
	}
}

// TestRemoveWriteBeforeExec: an activity that another instance adds after
// Remove has compared the scores but before it deletes survives, and Remove
// still reports the entries it deleted.
func TestRemoveWriteBeforeExec(t *testing.T) {
	ctx := context.Background()
	b, r := newBuffer(t)
	proxy, err := redisttl.New(r.NewClient(t), redisttl.Options{Prefix: r.Prefix})
	require.NoError(t, err)
	t0 := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)
	require.NoError(t, b.Add(ctx, []ttl.Activity{{ID: "ws-1", At: t0}, {ID: "ws-2", At: t0}}))
	peeked, err := b.Peek(ctx, ttl.Activity{}, 10)
	require.NoError(t, err)
	require.Len(t, peeked, 2)
	newer := ttl.Activity{ID: "ws-1", At: t0.Add(time.Second)}
	redisttl.SetBeforeExec(b, func() { require.NoError(t, proxy.Add(ctx, []ttl.Activity{newer})) })
	n, err := b.Remove(ctx, peeked)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "only ws-2 is unchanged")
	left, err := b.Peek(ctx, ttl.Activity{}, 10)
	require.NoError(t, err)
	assert.Equal(t, []ttl.Activity{newer}, left)
}
