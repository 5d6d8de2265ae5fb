package pgttl_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/pgttl"
	"github.com/ttlkit/ttlkit/ttl/ttltest"
)

func newStore(t *testing.T, pool *pgxpool.Pool, opts pgttl.Options) *pgttl.Store {
	t.Helper()
	s, err := pgttl.New(pool, opts)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(context.Background()))
	return s
}

func serverNow(t *testing.T, pool *pgxpool.Pool) time.Time {
	t.Helper()
	var now time.Time
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT now()").Scan(&now))
	return now
}

func TestConformance(t *testing.T) {
	pg := pgtest.OpenPostgres(t)
	n := 0
	ttltest.RunStore(t, tableHarness(pg.Pool, pgttl.Options{}, &n))
}

func TestNewValidates(t *testing.T) {
	_, err := pgttl.New(nil, pgttl.Options{})
	assert.ErrorIs(t, err, ttl.ErrInvalid)
	assert.ErrorContains(t, err, "pool")
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none")
	require.NoError(t, err)
	defer pool.Close()
	for _, bad := range []string{"1abc", "a-b", "a.b.c", `x"; DROP TABLE y; --`, "a b", "toolong_" + fmt.Sprintf("%041d", 0)} {
		_, err := pgttl.New(pool, pgttl.Options{Table: bad})
		assert.ErrorIs(t, err, ttl.ErrInvalid, "table %q", bad)
		assert.ErrorContains(t, err, "Table", "table %q", bad)
	}
	for table, want := range map[string]string{"": `"ttlkit_entities"`, "ops.Workspaces": `"ops"."Workspaces"`} {
		s, err := pgttl.New(pool, pgttl.Options{Table: table})
		require.NoError(t, err)
		assert.Equal(t, want, s.Table())
	}
}

// TestMigrate: idempotent, safe from several processes at once, in another
// schema, and the rules' indexes exist.
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	pg := pgtest.OpenPostgres(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := pgttl.New(pg.NewPool(t), pgttl.Options{Table: "workspaces"})
			if err == nil {
				err = s.Migrate(ctx)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	newStore(t, pg.Pool, pgttl.Options{Table: "workspaces"}) // once more
	insert(t, pg.Pool, "workspaces", "last_activity_at", "", ttltest.Entity{ID: "ws", Phase: "RUNNING", LastActivityAt: time.Now(), PhaseChangedAt: time.Now(), CreatedAt: time.Now()})

	rows, err := pg.Pool.Query(ctx, `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'workspaces' ORDER BY 1`, pg.Schema)
	require.NoError(t, err)
	var names []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"workspaces_created_at", "workspaces_last_activity_bucket", "workspaces_phase_changed_at", "workspaces_pkey"}, names)

	// A schema-qualified table, outside the search_path.
	_, err = pg.Pool.Exec(ctx, `CREATE SCHEMA `+pg.Schema+`_ops`)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = pg.Pool.Exec(context.Background(), `DROP SCHEMA `+pg.Schema+`_ops CASCADE`) })
	newStore(t, pg.Pool, pgttl.Options{Table: pg.Schema + "_ops.workspaces"})
	insert(t, pg.Pool, pg.Schema+"_ops.workspaces", "last_activity_at", "", ttltest.Entity{ID: "other", Phase: "RUNNING", LastActivityAt: time.Now(), PhaseChangedAt: time.Now(), CreatedAt: time.Now()})
	_, found := get(t, pg.Pool, "workspaces", "last_activity_at", "", "other")
	assert.False(t, found, "the two tables are separate")
}

// TestApplyUsesIndex: every rule's UPDATE, the statement Apply really runs,
// finds its phase through an index rather than scanning the table, and the
// merge of a small batch looks rows up by primary key.
func TestApplyUsesIndex(t *testing.T) {
	ctx := context.Background()
	pg := pgtest.OpenPostgres(t)
	s := newStore(t, pg.Pool, pgttl.Options{Table: "ws"})
	_, err := pg.Pool.Exec(ctx, `INSERT INTO ws (id, phase, last_activity_at, phase_changed_at)
SELECT 'ws-' || i, CASE WHEN i % 50 = 0 THEN 'RUNNING' ELSE 'ARCHIVED' END, now(), now() FROM generate_series(1, 20000) i`)
	require.NoError(t, err)
	_, err = pg.Pool.Exec(ctx, `ANALYZE ws`)
	require.NoError(t, err)
	explain := func(q string, args ...any) string {
		t.Helper()
		rows, err := pg.Pool.Query(ctx, `EXPLAIN (FORMAT TEXT) `+q, args...)
		require.NoError(t, err)
		var plan []string
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			plan = append(plan, line)
		}
		require.NoError(t, rows.Err())
		return strings.Join(plan, "\n")
	}
	for since, index := range map[ttl.Since]string{
		ttl.SinceLastActivity: "ws_last_activity_bucket",
		ttl.SincePhaseChanged: "ws_phase_changed_at",
		ttl.SinceCreated:      "ws_created_at",
	} {
		plan := explain(s.ApplySQL(since), "STANDBY", "RUNNING", 600.0)
		assert.Contains(t, plan, "Index", "rule on %s: %s", since, plan)
		assert.Contains(t, plan, index, "rule on %s: %s", since, plan)
		assert.NotContains(t, plan, "Seq Scan", "rule on %s: %s", since, plan)
	}
	plan := explain(s.MergeSQL(), []string{"ws-1", "ws-2"}, []time.Time{time.Now(), time.Now()})
	assert.Contains(t, plan, "ws_pkey", "merge: %s", plan)
}

// TestIndexesAtScale: with 100,000 workspaces, 20,000 of them STANDBY and
// 20,000 idle for more than the standby TTL, the standby rule finds the idle
// ones through its index, and a merge of 1,000 activities looks them up by
// primary key, rather than scanning or hashing the whole table.
func TestIndexesAtScale(t *testing.T) {
	ctx := context.Background()
	pg := pgtest.OpenPostgres(t)
	s := newStore(t, pg.Pool, pgttl.Options{Table: "ws"})
	_, err := pg.Pool.Exec(ctx, `INSERT INTO ws (id, phase, last_activity_at, phase_changed_at)
SELECT format('ws-%s', lpad(i::text, 6, '0')), CASE WHEN i % 5 = 0 THEN 'STANDBY' ELSE 'RUNNING' END,
       CASE WHEN i % 5 = 1 THEN now() - interval '11 minutes' - (i % 540) * interval '1 second'
            ELSE now() - (i % 60) * interval '1 second' END, now()
FROM generate_series(1, 100000) i`)
	require.NoError(t, err)
	_, err = pg.Pool.Exec(ctx, `VACUUM ANALYZE ws`)
	require.NoError(t, err)
	explain := func(q string, args ...any) string {
		t.Helper()
		rows, err := pg.Pool.Query(ctx, `EXPLAIN (FORMAT TEXT) `+q, args...)
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return strings.Join(lines, "\n")
	}
	for _, secs := range []float64{3600, 600} { // none idle; 20,000 idle
		plan := explain(s.ApplySQL(ttl.SinceLastActivity), "STANDBY", "RUNNING", secs)
		assert.Contains(t, plan, "ws_last_activity_bucket", "standby rule (%v s): %s", secs, plan)
		assert.NotContains(t, plan, "Seq Scan", "standby rule (%v s): %s", secs, plan)
	}
	exps, err := s.Apply(ctx, workspaceRules(10*time.Minute, time.Hour)[0])
	require.NoError(t, err)
	assert.Len(t, exps, 20000, "the index narrows the rows; the rule still finds every idle one")
	ids := make([]string, 1000)
	ats := make([]time.Time, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("ws-%06d", i*97%100000+1)
		ats[i] = time.Now()
	}
	slices.Sort(ids)
	plan := explain(s.MergeSQL(), ids, ats)
	assert.Contains(t, plan, "ws_pkey", "merge of 1,000: %s", plan)
	assert.NotContains(t, plan, "Seq Scan", "merge of 1,000: %s", plan)
}

// TestMergeOutOfOrder: batches from several runners, late and out of order,
// never move time back, including one big batch with repeated ids.
func TestMergeOutOfOrder(t *testing.T) {
	ctx := context.Background()
	pg := pgtest.OpenPostgres(t)
	s := newStore(t, pg.Pool, pgttl.Options{})
	other := newStore(t, pg.NewPool(t), pgttl.Options{})
	base := serverNow(t, pg.Pool).Add(-time.Hour).Truncate(time.Millisecond)
	const n = 2000
	_, err := pg.Pool.Exec(ctx, `INSERT INTO ttlkit_entities (id, phase, last_activity_at, phase_changed_at, created_at)
SELECT 'ws-' || i, 'RUNNING', $1, $1, $1 FROM generate_series(0, $2 - 1) i`, base, n)
	require.NoError(t, err)
	batch := func(offset time.Duration) []ttl.Activity {
		acts := make([]ttl.Activity, 0, 2*n)
		for i := range n {
			id := fmt.Sprint("ws-", i)
			acts = append(acts, ttl.Activity{ID: id, At: base.Add(offset)}, ttl.Activity{ID: id, At: base.Add(offset - time.Second)})
		}
		return acts
	}
	require.NoError(t, s.Add(ctx, batch(30*time.Minute)))
	require.NoError(t, other.Add(ctx, batch(10*time.Minute))) // older, later
	var bad int
	require.NoError(t, pg.Pool.QueryRow(ctx, `SELECT count(*) FROM ttlkit_entities WHERE last_activity_at <> $1`, base.Add(30*time.Minute)).Scan(&bad))
	assert.Zero(t, bad, "rows whose time moved back or did not move")
}

func TestCancelledContext(t *testing.T) {
	pg := pgtest.OpenPostgres(t)
	s := newStore(t, pg.Pool, pgttl.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Add(ctx, []ttl.Activity{{ID: "a", At: time.Now()}})
	assert.ErrorIs(t, err, context.Canceled)
	_, err = s.Apply(ctx, workspaceRules(time.Minute, time.Minute)[0])
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "pgttl: apply")
}

// TestMergeIgnoresIDsNoRowCanHave: an id PostgreSQL text cannot hold (a NUL
// byte, invalid UTF-8), say from a hostile request path, matches no row, so
// Add ignores it like any unknown id instead of failing the whole batch on
// every tick, which would keep the rest of the batch out of the store for
// good.
func TestMergeIgnoresIDsNoRowCanHave(t *testing.T) {
	ctx := context.Background()
	pg := pgtest.OpenPostgres(t)
	s := newStore(t, pg.Pool, pgttl.Options{})
	now := serverNow(t, pg.Pool)
	hour := now.Add(-time.Hour)
	insert(t, pg.Pool, "ttlkit_entities", "last_activity_at", "", ttltest.Entity{ID: "ws-1", Phase: "RUNNING", LastActivityAt: hour, PhaseChangedAt: hour, CreatedAt: hour})
	at := now.Truncate(time.Millisecond)
	require.NoError(t, s.Add(ctx, []ttl.Activity{
		{ID: "ws-\x00", At: at}, {ID: "ws-1", At: at}, {ID: "ws-\xff", At: at},
	}))
	e, _ := get(t, pg.Pool, "ttlkit_entities", "last_activity_at", "", "ws-1")
	assert.True(t, e.LastActivityAt.Equal(at), "ws-1 at %v, want %v", e.LastActivityAt, at)
}

// TestMigrateAddsActivityBucket: a table made by an earlier Migrate, without
// the last_activity_bucket column, gets it and its index, filled in.
func TestMigrateAddsActivityBucket(t *testing.T) {
	ctx := context.Background()
	pg := pgtest.OpenPostgres(t)
	_, err := pg.Pool.Exec(ctx, `CREATE TABLE ws (
  id text PRIMARY KEY, phase text NOT NULL, desired_state text NOT NULL DEFAULT '',
  operation text NOT NULL DEFAULT '', last_activity_at timestamptz NOT NULL,
  phase_changed_at timestamptz NOT NULL, created_at timestamptz NOT NULL DEFAULT now(),
  deleted_at timestamptz) WITH (fillfactor = 70);
INSERT INTO ws (id, phase, last_activity_at, phase_changed_at) VALUES
  ('idle', 'RUNNING', now() - interval '11 minutes', now()), ('busy', 'RUNNING', now(), now())`)
	require.NoError(t, err)
	s := newStore(t, pg.Pool, pgttl.Options{Table: "ws"})
	exps, err := s.Apply(ctx, workspaceRules(10*time.Minute, time.Hour)[0])
	require.NoError(t, err)
	require.Len(t, exps, 1)
	assert.Equal(t, "idle", exps[0].ID)
	var n int
	require.NoError(t, pg.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = 'ws_last_activity_bucket'`, pg.Schema).Scan(&n))
	assert.Equal(t, 1, n)
}
