package pgentities_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/entities/entitiestest"
	"github.com/ttlkit/ttlkit/examples/entities/pgentities"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/pgttl"
)

func newStore(t *testing.T, pool *pgxpool.Pool, opts pgttl.Options) *pgentities.Store {
	t.Helper()
	s, err := pgentities.New(pool, opts)
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
	h := entitiestest.StoreHarness{
		New: func(t *testing.T) entities.Store {
			n++ // one table per subtest, in the package's schema
			return newStore(t, pg.Pool, pgttl.Options{Table: fmt.Sprintf("entities_%d", n)})
		},
		Now: func(t *testing.T) time.Time { return serverNow(t, pg.Pool) },
	}
	entitiestest.RunStore(t, h)
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
			s, err := pgentities.New(pg.NewPool(t), pgttl.Options{Table: "workspaces"})
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
	s := newStore(t, pg.Pool, pgttl.Options{Table: "workspaces"}) // once more
	_, err := s.Create(ctx, entities.Entity{ID: "ws", Phase: "RUNNING"})
	require.NoError(t, err)

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
	q := newStore(t, pg.Pool, pgttl.Options{Table: pg.Schema + "_ops.workspaces"})
	_, err = q.Create(ctx, entities.Entity{ID: "other", Phase: "RUNNING"})
	require.NoError(t, err)
	_, err = s.Get(ctx, "other")
	assert.ErrorIs(t, err, entities.ErrNotFound, "the two tables are separate")
}

func TestCancelledContext(t *testing.T) {
	pg := pgtest.OpenPostgres(t)
	s := newStore(t, pg.Pool, pgttl.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Create(ctx, entities.Entity{ID: "a", Phase: "RUNNING"})
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorContains(t, err, "pgentities: create")
	err = s.Add(ctx, []ttl.Activity{{ID: "a", At: time.Now()}})
	assert.ErrorIs(t, err, context.Canceled)
	_, err = s.Apply(ctx, workspaceRules(time.Minute, time.Minute)[0])
	assert.ErrorIs(t, err, context.Canceled)
	_, err = s.Get(context.Background(), "a")
	assert.ErrorIs(t, err, entities.ErrNotFound)
}

// TestMergeIgnoresIDsNoRowCanHave: an id PostgreSQL text cannot hold (a NUL
// byte, invalid UTF-8), say from a hostile request path, matches no row, so
// Add ignores it like any unknown id instead of failing the whole
// batch on every tick, which would keep the rest of the batch out of the
// store for good. Create rejects such an id as invalid.
func TestMergeIgnoresIDsNoRowCanHave(t *testing.T) {
	ctx := context.Background()
	pg := pgtest.OpenPostgres(t)
	s := newStore(t, pg.Pool, pgttl.Options{})
	now := serverNow(t, pg.Pool)
	_, err := s.Create(ctx, entities.Entity{ID: "ws-1", Phase: "RUNNING", CreatedAt: now.Add(-time.Hour)})
	require.NoError(t, err)
	at := now.Truncate(time.Millisecond)
	require.NoError(t, s.Add(ctx, []ttl.Activity{
		{ID: "ws-\x00", At: at}, {ID: "ws-1", At: at}, {ID: "ws-\xff", At: at},
	}))
	e, err := s.Get(ctx, "ws-1")
	require.NoError(t, err)
	assert.True(t, e.LastActivityAt.Equal(at), "ws-1 at %v, want %v", e.LastActivityAt, at)

	for _, id := range []string{"ws-\x00", "ws-\xff"} {
		_, err = s.Create(ctx, entities.Entity{ID: id, Phase: "RUNNING"})
		assert.ErrorIs(t, err, ttl.ErrInvalid, "id %q", id)
		_, err = s.Get(ctx, id)
		assert.ErrorIs(t, err, entities.ErrNotFound, "id %q", id)
		_, err = s.Update(ctx, id, entities.Update{Phase: "STANDBY"})
		assert.ErrorIs(t, err, entities.ErrNotFound, "id %q", id)
	}
	_, err = s.Update(ctx, "ws-1", entities.Update{Phase: "STAND\x00BY"})
	assert.ErrorIs(t, err, ttl.ErrInvalid)
}
