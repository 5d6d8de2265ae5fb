package redisttl_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/internal/memstore"
	"github.com/ttlkit/ttlkit/ttl/redisttl"
)

// TestGeneration: the generation is made once and shared by every Buffer
// on the key, is invisible to Peek and Len, and changes when the set is
// lost: deleted, or gone with a server restarted without persistence.
func TestGeneration(t *testing.T) {
	ctx := context.Background()
	b, r := newBuffer(t)
	other, err := redisttl.New(r.NewClient(t), redisttl.Options{Prefix: r.Prefix})
	require.NoError(t, err)
	g1, err := b.Generation(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, g1)
	g, err := other.Generation(ctx)
	require.NoError(t, err)
	assert.Equal(t, g1, g, "one generation per key")

	t0 := time.Date(2026, 2, 7, 10, 0, 0, 0, time.UTC)
	require.NoError(t, b.Add(ctx, []ttl.Activity{{ID: "ws-1", At: t0}, {ID: "\x00ttlkit-generation:forged", At: t0}}))
	got, err := b.Peek(ctx, ttl.Activity{}, 10)
	require.NoError(t, err)
	assert.Equal(t, []ttl.Activity{{ID: "ws-1", At: t0}}, got, "the generation is not activity, and cannot be forged")
	n, err := b.Len(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	removed, err := b.Remove(ctx, got)
	require.NoError(t, err)
	assert.Equal(t, 1, removed)
	g, err = b.Generation(ctx)
	require.NoError(t, err)
	assert.Equal(t, g1, g, "draining the buffer empty keeps the generation")

	require.NoError(t, r.Client.Del(ctx, b.Key()).Err())
	g2, err := other.Generation(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, g1, g2, "a deleted set is a new generation")

	srv := redistest.StartRedis(t, redistest.RedisServerOptions{})
	pb, err := redisttl.New(srv.Client(t), redisttl.Options{Prefix: "codehub"})
	require.NoError(t, err)
	require.NoError(t, pb.Add(ctx, []ttl.Activity{{ID: "ws-1", At: t0}}))
	before, err := pb.Generation(ctx)
	require.NoError(t, err)
	srv.Restart(0)
	var after string
	require.Eventually(t, func() bool { after, err = pb.Generation(ctx); return err == nil }, 5*time.Second, 20*time.Millisecond)
	assert.NotEqual(t, before, after, "a server restarted empty is a new generation")
}

// TestFlushIntervals: every Buffer on the key shares the Trackers' notes
// of their FlushInterval and returns the longest; a Runner reads it after
// its drain. Deleting the sorted set keeps the notes.
func TestFlushIntervals(t *testing.T) {
	ctx := context.Background()
	b, r := newBuffer(t)
	other, err := redisttl.New(r.NewClient(t), redisttl.Options{Prefix: r.Prefix})
	require.NoError(t, err)
	d, err := b.FlushInterval(ctx)
	require.NoError(t, err)
	assert.Zero(t, d, "none noted")
	require.NoError(t, b.NoteFlushInterval(ctx, time.Second))
	require.NoError(t, other.NoteFlushInterval(ctx, 30*time.Second))
	require.NoError(t, b.NoteFlushInterval(ctx, time.Second))
	d, err = other.FlushInterval(ctx)
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, d)
	assert.ErrorIs(t, b.NoteFlushInterval(ctx, 0), ttl.ErrInvalid)
	require.NoError(t, r.Client.Del(ctx, b.Key()).Err())
	d, err = b.FlushInterval(ctx)
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, d, "the notes are not activity")

	// A Buffer named by Key keeps its own notes.
	named, err := redisttl.New(r.Client, redisttl.Options{Key: r.Prefix + "activity"})
	require.NoError(t, err)
	d, err = named.FlushInterval(ctx)
	require.NoError(t, err)
	assert.Zero(t, d)

	// A Tracker notes its interval with its flush; the Runner reads it.
	tr, err := ttl.NewTracker(named, ttl.TrackerOptions{FlushInterval: 2 * time.Second, Resolution: -1})
	require.NoError(t, err)
	defer tr.Close(ctx)
	runner, err := ttl.NewRunner(memstore.New(memstore.Options{}), nil, ttl.RunnerOptions{Buffer: named, Interval: time.Hour})
	require.NoError(t, err)
	defer runner.Close(ctx)
	tr.Record("ws-1")
	_, err = tr.Flush(ctx)
	require.NoError(t, err)
	_, err = runner.Tick(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2*time.Second, runner.Stats().FlushInterval)
	// Under a hash tag that is the whole key, so in the key's slot.
	n, err := r.Client.Exists(ctx, "{"+named.Key()+"}:flush-intervals").Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
}
