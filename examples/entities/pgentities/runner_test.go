package pgentities_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/entities/entitiestest"
	"github.com/ttlkit/ttlkit/examples/entities/pgentities"
	"github.com/ttlkit/ttlkit/examples/entities/pgnotify"
	"github.com/ttlkit/ttlkit/internal/testenv"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/pgttl"
	"github.com/ttlkit/ttlkit/ttl/redisttl"
)

// pipeline is a cloud-IDE workspace system wired end to end: a proxy's Tracker flushes into the
// Redis buffer, the Runner drains it into PostgreSQL, applies the rules on
// the server's clock and wakes a controller listening on another
// connection.
type pipeline struct {
	pg      *pgtest.Postgres
	rd      *redistest.Redis
	store   *pgentities.Store
	buf     *redisttl.Buffer
	tracker *ttl.Tracker
	runner  *ttl.Runner
	woken   *entitiestest.Collector
	now     time.Time // the server's now when the pipeline was built
}

func newPipeline(t *testing.T, storePool func(pg *pgtest.Postgres) ttlPool) *pipeline {
	t.Helper()
	ctx := context.Background()
	p := &pipeline{pg: pgtest.OpenPostgres(t), rd: redistest.OpenRedis(t), woken: entitiestest.NewCollector()}
	pool := p.pg.Pool
	if storePool != nil {
		pool = storePool(p.pg)
	}
	p.store = newStore(t, pool, pgttl.Options{Table: "workspaces"})
	var err error
	p.buf, err = redisttl.New(p.rd.Client, redisttl.Options{Prefix: p.rd.Prefix + "codehub"})
	require.NoError(t, err)
	p.tracker, err = ttl.NewTracker(p.buf, ttl.TrackerOptions{FlushInterval: time.Hour, Resolution: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.tracker.Close(context.Background()) })

	l, err := pgnotify.Listen(ctx, p.pg.NewPool(t), "workspace_wake", p.woken.Fn, pgnotify.ListenOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close(context.Background()) })
	notifier, err := pgnotify.NewNotifier(pool, "workspace_wake")
	require.NoError(t, err)
	p.runner, err = ttl.NewRunner(p.store, workspaceRules(10*time.Minute, 30*time.Minute), ttl.RunnerOptions{
		Interval: time.Hour, // ticked by hand
		Buffer:   p.buf,
		Wake:     notifier.WakeExpired,
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.runner.Close(context.Background()) })
	p.now = serverNow(t, p.pg.Pool)
	return p
}

type ttlPool = *pgxpool.Pool

// create makes a RUNNING workspace last active idle ago (server time).
func (p *pipeline) create(t *testing.T, id string, idle time.Duration) {
	t.Helper()
	_, err := p.store.Create(context.Background(), entities.Entity{ID: id, Phase: "RUNNING", CreatedAt: p.now.Add(-idle)})
	require.NoError(t, err)
}

func (p *pipeline) desired(t *testing.T, id string) string {
	t.Helper()
	e, err := p.store.Get(context.Background(), id)
	require.NoError(t, err)
	return e.DesiredState
}

// flushErr drops the result of a Flush, for assertions on its error.
func flushErr(_ ttl.FlushResult, err error) error { return err }

func expiredIDs(res ttl.TickResult) []string {
	var ids []string
	for _, e := range res.Expired {
		ids = append(ids, e.ID)
	}
	return ids
}

// TestPipelineActivityBeforeSyncKeepsRunning: activity that reaches the
// buffer before the tick is synced first, so the rule sees it; the idle
// workspace is expired and the controller is woken with its id.
func TestPipelineActivityBeforeSyncKeepsRunning(t *testing.T) {
	ctx := context.Background()
	p := newPipeline(t, nil)
	p.create(t, "ws-active", 11*time.Minute)
	p.create(t, "ws-idle", 11*time.Minute)

	p.tracker.Record("ws-active") // a proxied request
	require.NoError(t, flushErr(p.tracker.Flush(ctx)))
	res, err := p.runner.Tick(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Synced)
	assert.Equal(t, []string{"ws-idle"}, expiredIDs(res))
	assert.Equal(t, "", p.desired(t, "ws-active"), "active workspace keeps running")
	assert.Equal(t, "STANDBY", p.desired(t, "ws-idle"))
	e, err := p.store.Get(ctx, "ws-active")
	require.NoError(t, err)
	assert.WithinDuration(t, p.now, e.LastActivityAt, time.Minute, "the tracked time reached the store")
	n, err := bufLen(ctx, p.buf)
	require.NoError(t, err)
	assert.Zero(t, n, "the tick drained the buffer")

	p.woken.WaitFor(t, "wake", func(ids []string, _ int) bool { return len(ids) > 0 })
	assert.Equal(t, []string{"ws-idle"}, p.woken.IDs())

	// An older flush arriving late (another proxy) moves nothing back.
	require.NoError(t, p.buf.Add(ctx, []ttl.Activity{{ID: "ws-active", At: p.now.Add(-time.Hour)}}))
	_, err = p.runner.Tick(ctx)
	require.NoError(t, err)
	again, err := p.store.Get(ctx, "ws-active")
	require.NoError(t, err)
	assert.True(t, again.LastActivityAt.Equal(e.LastActivityAt), "LastActivityAt %v, want %v", again.LastActivityAt, e.LastActivityAt)
}

// TestPipelineBufferLost: Redis loses the buffer (the key is deleted, as a
// restart without persistence would). The tick sees the generation change
// and holds the idle rule instead of deciding on the store's stale
// activity; the tracker sends what it retains again, and the flushes work
// again.
func TestPipelineBufferLost(t *testing.T) {
	ctx := context.Background()
	p := newPipeline(t, nil)
	p.create(t, "ws-synced", 11*time.Minute)
	p.tracker.Record("ws-synced")
	require.NoError(t, flushErr(p.tracker.Flush(ctx)))
	res, err := p.runner.Tick(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Synced)
	require.Empty(t, res.Expired)

	// ws-lost is active, but its activity only reaches Redis, which loses it.
	p.create(t, "ws-lost", 11*time.Minute)
	p.tracker.Record("ws-lost")
	require.NoError(t, flushErr(p.tracker.Flush(ctx)))
	require.NoError(t, p.rd.Client.Del(ctx, "{"+p.rd.Prefix+"codehub}:activity").Err())
	res, err = p.runner.Tick(ctx)
	require.NoError(t, err)
	assert.Zero(t, res.Synced)
	assert.Empty(t, expiredIDs(res), "the idle rule waits for the trackers to send again")
	assert.Equal(t, []string{"standby"}, res.Skipped)
	assert.True(t, res.Lost)
	assert.Equal(t, "", p.desired(t, "ws-synced"), "synced activity is kept in the store")
	assert.Equal(t, "", p.desired(t, "ws-lost"))

	p.tracker.Record("ws-synced")
	fr, err := p.tracker.Flush(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, fr.Resent, "the tracker sent its retained activity again")
	res, err = p.runner.Tick(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Synced, "the buffer works again after the loss")
	assert.True(t, res.Drained && !res.Lost && res.HeldUntil.After(time.Now()) && len(res.Skipped) > 0, "held")
	e, err := p.store.Get(ctx, "ws-lost")
	require.NoError(t, err)
	assert.WithinDuration(t, p.now, e.LastActivityAt, time.Minute, "the lost activity reached the store")
	assert.Equal(t, "", e.DesiredState)
}

// TestPipelineRedisDown: with the buffer unreachable the tick reports the
// sync error and applies the rules, except the idle rule: the drain did not
// reach the end of the buffer, so the store's last activity may be stale.
func TestPipelineRedisDown(t *testing.T) {
	ctx := context.Background()
	p := newPipeline(t, nil)
	p.create(t, "ws-idle", 11*time.Minute)
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer down.Close()
	buf, err := redisttl.New(down, redisttl.Options{Prefix: p.rd.Prefix})
	require.NoError(t, err)
	r, err := ttl.NewRunner(p.store, workspaceRules(10*time.Minute, 30*time.Minute), ttl.RunnerOptions{Interval: time.Hour, Buffer: buf})
	require.NoError(t, err)
	defer r.Close(context.Background())
	res, err := r.Tick(ctx)
	require.Error(t, err)
	assert.ErrorContains(t, err, "redisttl: peek")
	assert.Empty(t, expiredIDs(res))
	assert.Equal(t, []string{"standby"}, res.Skipped)
	assert.True(t, !res.Drained && !res.Lost && res.HeldUntil.After(time.Now()) && len(res.Skipped) > 0, "a buffer error: not drained, and a hold")
}

// TestPipelinePostgresTerminated: the store's server connections are
// terminated (pg_terminate_backend on this pool's application_name only);
// the tick fails with wrapped errors and skips the idle rule, since the
// activity it read could not reach the store, and the next tick recovers,
// syncing what stayed buffered.
func TestPipelinePostgresTerminated(t *testing.T) {
	ctx := context.Background()
	app := testenv.UniqueName()
	p := newPipeline(t, func(pg *pgtest.Postgres) ttlPool { return pg.FragilePool(t, app) })
	// Both look idle to the store; only ws-active's buffered activity
	// says otherwise.
	p.create(t, "ws-active", 11*time.Minute)
	p.create(t, "ws-idle", 11*time.Minute)
	p.tracker.Record("ws-active")
	require.NoError(t, flushErr(p.tracker.Flush(ctx)))

	require.Positive(t, terminate(t, p.pg, app))
	res1, err := p.runner.Tick(ctx)
	require.Error(t, err)
	assert.ErrorContains(t, err, "pgttl: merge 1 activities")
	assert.Zero(t, res1.Synced)
	// The pool replaces the dead connection, so later statements of the
	// tick may succeed on a fresh one; the idle rule must not run on the
	// stale last_activity_at all the same.
	assert.Equal(t, []string{"standby"}, res1.Skipped)
	assert.Empty(t, res1.Expired)
	n, err := bufLen(ctx, p.buf)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "a failed sync leaves the activity buffered")

	res2, err := p.runner.Tick(ctx)
	require.NoError(t, err, "the next tick recovers")
	assert.Equal(t, 1, res2.Synced)
	assert.Empty(t, res2.Skipped)
	assert.Equal(t, []string{"ws-idle"}, expiredIDs(res2))
	e, err := p.store.Get(ctx, "ws-active")
	require.NoError(t, err)
	assert.WithinDuration(t, p.now, e.LastActivityAt, time.Minute, "the buffered activity reached the store")
	assert.Equal(t, "", e.DesiredState)
}
