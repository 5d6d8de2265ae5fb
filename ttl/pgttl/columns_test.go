package pgttl_test

import (
	"context"
	"strings"
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

// seedTable is a workspace table as a cloud-IDE design writes it: the last
// activity in last_access_at, and 'NONE' in operation when none runs.
var seedTable = pgttl.Options{Table: "workspaces", LastActivityColumn: "last_access_at", NoOperation: "NONE"}

// TestConformanceNamedColumns runs the Store suite on a table with the
// design's names: the translation of "" to 'NONE' and the renamed column
// change nothing a Store promises.
func TestConformanceNamedColumns(t *testing.T) {
	pg := pgtest.OpenPostgres(t)
	n := 0
	ttltest.RunStore(t, tableHarness(pg.Pool, seedTable, &n))
}

// TestNamedColumns: the table Migrate makes has the design's columns, a
// row with no operation holds 'NONE' by default, the rules' SQL reads it
// (a row written with 'NONE' is expired, one with an operation is not), Add
// writes the renamed column, and the indexes still serve the rules.
func TestNamedColumns(t *testing.T) {
	ctx := context.Background()
	pg := pgtest.OpenPostgres(t)
	s := newStore(t, pg.Pool, seedTable)

	cols, err := pgx.CollectRows(must(pg.Pool.Query(ctx, `SELECT column_name FROM information_schema.columns
WHERE table_schema = $1 AND table_name = 'workspaces' ORDER BY ordinal_position`, pg.Schema)), pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"id", "phase", "desired_state", "operation", "last_access_at", "phase_changed_at", "created_at", "deleted_at", "last_activity_bucket"}, cols)

	_, err = pg.Pool.Exec(ctx, `INSERT INTO workspaces (id, phase, last_access_at, phase_changed_at) VALUES
  ('ws-idle', 'RUNNING', now() - interval '11 minutes', now()),
  ('ws-busy', 'RUNNING', now() - interval '11 minutes', now())`)
	require.NoError(t, err)
	var op string
	require.NoError(t, pg.Pool.QueryRow(ctx, `SELECT operation FROM workspaces WHERE id = 'ws-idle'`).Scan(&op))
	assert.Equal(t, "NONE", op, "the column's default")

	_, err = pg.Pool.Exec(ctx, `UPDATE workspaces SET operation = 'STOPPING' WHERE id = 'ws-busy'`)
	require.NoError(t, err)
	exps, err := s.Apply(ctx, workspaceRules(10*time.Minute, 30*time.Minute)[0])
	require.NoError(t, err)
	require.Len(t, exps, 1, "only the idle workspace without an operation: %v", exps)
	assert.Equal(t, "ws-idle", exps[0].ID)
	e, _ := get(t, pg.Pool, "workspaces", "last_access_at", "NONE", "ws-idle")
	assert.Equal(t, "STANDBY", e.DesiredState)

	require.NoError(t, s.Add(ctx, []ttl.Activity{{ID: "ws-idle", At: time.Now()}}))
	var last time.Time
	require.NoError(t, pg.Pool.QueryRow(ctx, `SELECT last_access_at FROM workspaces WHERE id = 'ws-idle'`).Scan(&last))
	assert.WithinDuration(t, time.Now(), last, time.Minute)

	_, err = pg.Pool.Exec(ctx, `INSERT INTO workspaces (id, phase, last_access_at, phase_changed_at)
SELECT 'ws-' || i, CASE WHEN i % 50 = 0 THEN 'STANDBY' ELSE 'ARCHIVED' END, now(), now() FROM generate_series(1, 20000) i`)
	require.NoError(t, err)
	_, err = pg.Pool.Exec(ctx, `ANALYZE workspaces`)
	require.NoError(t, err)
	plan, err := pgx.CollectRows(must(pg.Pool.Query(ctx, `EXPLAIN `+s.ApplySQL(ttl.SincePhaseChanged), "ARCHIVED", "STANDBY", 1800.0)), pgx.RowTo[string])
	require.NoError(t, err)
	assert.Contains(t, strings.Join(plan, "\n"), "workspaces_phase_changed_at", "the partial index's 'NONE' matches the rule's")
}

func must(rows pgx.Rows, err error) pgx.Rows {
	if err != nil {
		panic(err)
	}
	return rows
}

func TestNamedColumnsValidated(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none")
	require.NoError(t, err)
	defer pool.Close()
	for _, bad := range []string{"1abc", "a-b", "a.b", `x"; --`} {
		_, err := pgttl.New(pool, pgttl.Options{LastActivityColumn: bad})
		assert.ErrorIs(t, err, ttl.ErrInvalid, "column %q", bad)
		assert.ErrorContains(t, err, "LastActivityColumn", "column %q", bad)
	}
	for _, bad := range []string{"it's", "NO NE", strings.Repeat("N", 33), "é"} {
		_, err := pgttl.New(pool, pgttl.Options{NoOperation: bad})
		assert.ErrorIs(t, err, ttl.ErrInvalid, "NoOperation %q", bad)
		assert.ErrorContains(t, err, "NoOperation", "NoOperation %q", bad)
	}
}
