package pgentities_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/pgttl"
	"github.com/ttlkit/ttlkit/ttl/redisttl"
)

// TestRedisRestartedEmpty: a workspace's only recent activity sits in the
// Redis buffer when Redis restarts empty. The tick after the restart must
// not set it to STANDBY on PostgreSQL's older activity: the loss is
// detected, the idle rule waits, the proxy's next flush sends the activity
// again, and only then does the rule run, expiring the idle workspace and
// keeping the active one. Before, the first tick after the restart set both
// to STANDBY.
func TestRedisRestartedEmpty(t *testing.T) {
	ctx := context.Background()
	pg := pgtest.OpenPostgres(t)
	srv := redistest.StartRedis(t, redistest.RedisServerOptions{})
	store := newStore(t, pg.Pool, pgttl.Options{Table: "workspaces"})
	runnerBuf, err := redisttl.New(srv.Client(t), redisttl.Options{Prefix: "codehub"})
	require.NoError(t, err)
	proxyBuf, err := redisttl.New(srv.Client(t), redisttl.Options{Prefix: "codehub"})
	require.NoError(t, err)
	proxy, err := ttl.NewTracker(proxyBuf, ttl.TrackerOptions{FlushInterval: time.Hour, Resolution: -1})
	require.NoError(t, err)
	defer proxy.Close(ctx)
	mock := clock.NewMock() // the runner's clock, which times the hold
	mock.Set(time.Now())
	r, err := ttl.NewRunner(store, workspaceRules(10*time.Minute, time.Hour),
		ttl.RunnerOptions{Interval: time.Hour, Buffer: runnerBuf, Clock: mock, Hold: time.Minute})
	require.NoError(t, err)
	defer r.Close(ctx)

	_, err = r.Tick(ctx) // the runner knows the buffer
	require.NoError(t, err)
	now := serverNow(t, pg.Pool)
	for _, id := range []string{"ws-active", "ws-idle"} {
		_, err := store.Create(ctx, entities.Entity{ID: id, Phase: "RUNNING", CreatedAt: now.Add(-11 * time.Minute)})
		require.NoError(t, err)
	}
	proxy.Record("ws-active")
	_, err = proxy.Flush(ctx)
	require.NoError(t, err)

	srv.Restart(0) // empty: ws-active's activity is gone from Redis

	// The first command on a dropped connection may fail: then the buffer
	// is unreadable rather than found lost, and the rule is held as well.
	res, _ := r.Tick(ctx)
	desired := func(id string) string {
		e, err := store.Get(ctx, id)
		require.NoError(t, err)
		return e.DesiredState
	}
	assert.Empty(t, desired("ws-active"), "active workspace set to STANDBY after the buffer was lost")
	assert.Equal(t, []string{"standby"}, res.Skipped)
	assert.True(t, res.Lost || (!res.Drained && res.HeldUntil.After(time.Now())), "the buffer lost or unreadable: %+v", res)
	assert.Equal(t, mock.Now().Add(time.Minute), res.HeldUntil)

	fr, err := proxy.Flush(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, fr.Resent, "the proxy sent the lost activity again")
	assert.Equal(t, uint64(1), proxy.Stats().SinkLosses)
	res, err = r.Tick(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Synced)
	assert.True(t, res.Lost || (res.Drained && res.HeldUntil.After(time.Now())), "the buffer lost, or held: %+v", res)
	assert.Empty(t, desired("ws-active"), "active workspace set to STANDBY after the buffer was lost")
	e, err := store.Get(ctx, "ws-active")
	require.NoError(t, err)
	assert.WithinDuration(t, now, e.LastActivityAt, time.Minute, "the lost activity reached PostgreSQL")

	// After the hold the rule runs again, on complete activity.
	mock.Add(time.Minute + time.Second)
	res, err = r.Tick(ctx)
	require.NoError(t, err)
	assert.Empty(t, res.Skipped)
	assert.Equal(t, []string{"ws-idle"}, expiredIDs(res))
	assert.Empty(t, desired("ws-active"))
	st := r.Stats()
	assert.Equal(t, uint64(2), st.Rules[0].Skipped, "skipped on the two ticks within the hold")
	assert.True(t, st.HeldUntil.IsZero())
}
