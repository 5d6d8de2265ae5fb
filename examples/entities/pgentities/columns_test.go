package pgentities_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/entities/entitiestest"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/pgttl"
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
	h := entitiestest.StoreHarness{
		New: func(t *testing.T) entities.Store {
			n++
			o := seedTable
			o.Table = fmt.Sprintf("workspaces_%d", n)
			return newStore(t, pg.Pool, o)
		},
		Now: func(t *testing.T) time.Time { return serverNow(t, pg.Pool) },
	}
	entitiestest.RunStore(t, h)
}

// TestNamedColumns: the table Migrate makes has the design's columns, a
// row with no operation holds 'NONE', and the rules' SQL reads it (a row
// written by hand with 'NONE' is expired, one with an operation is not).
// pgttl's own TestNamedColumns shows that the indexes still serve the rules.
func TestNamedColumns(t *testing.T) {
	ctx := context.Background()
	pg := pgtest.OpenPostgres(t)
	s := newStore(t, pg.Pool, seedTable)

	cols, err := pgx.CollectRows(must(pg.Pool.Query(ctx, `SELECT column_name FROM information_schema.columns
WHERE table_schema = $1 AND table_name = 'workspaces' ORDER BY ordinal_position`, pg.Schema)), pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"id", "phase", "desired_state", "operation", "last_access_at", "phase_changed_at", "created_at", "deleted_at", "last_activity_bucket"}, cols)

	_, err = s.Create(ctx, entities.Entity{ID: "ws-created", Phase: "RUNNING"})
	require.NoError(t, err)
	_, err = pg.Pool.Exec(ctx, `INSERT INTO workspaces (id, phase, last_access_at, phase_changed_at) VALUES
  ('ws-idle', 'RUNNING', now() - interval '11 minutes', now()),
  ('ws-busy', 'RUNNING', now() - interval '11 minutes', now())`)
	require.NoError(t, err)
	var op string
	require.NoError(t, pg.Pool.QueryRow(ctx, `SELECT operation FROM workspaces WHERE id = 'ws-created'`).Scan(&op))
	assert.Equal(t, "NONE", op, "Create writes NoOperation")
	require.NoError(t, pg.Pool.QueryRow(ctx, `SELECT operation FROM workspaces WHERE id = 'ws-idle'`).Scan(&op))
	assert.Equal(t, "NONE", op, "the column's default")

	e, err := s.Update(ctx, "ws-busy", entities.Update{Operation: "STOPPING"})
	require.NoError(t, err)
	assert.Equal(t, "STOPPING", e.Operation)
	exps, err := s.Apply(ctx, workspaceRules(10*time.Minute, 30*time.Minute)[0])
	require.NoError(t, err)
	require.Len(t, exps, 1, "only the idle workspace without an operation: %v", exps)
	assert.Equal(t, "ws-idle", exps[0].ID)
	e, err = s.Get(ctx, "ws-idle")
	require.NoError(t, err)
	assert.Empty(t, e.Operation, "'NONE' reads as no operation")
	assert.Equal(t, "STANDBY", e.DesiredState)

	// The seed's WC write: UPDATE ... WHERE id = :id AND operation = :expected_op.
	e, err = s.Update(ctx, "ws-busy", entities.Update{ExpectOperation: "STOPPING", Operation: "", Phase: "STANDBY"})
	require.NoError(t, err)
	assert.Empty(t, e.Operation)
	require.NoError(t, pg.Pool.QueryRow(ctx, `SELECT operation FROM workspaces WHERE id = 'ws-busy'`).Scan(&op))
	assert.Equal(t, "NONE", op, "ending an operation writes NoOperation")

	require.NoError(t, s.Add(ctx, []ttl.Activity{{ID: "ws-idle", At: time.Now()}}))
	var last time.Time
	require.NoError(t, pg.Pool.QueryRow(ctx, `SELECT last_access_at FROM workspaces WHERE id = 'ws-idle'`).Scan(&last))
	assert.WithinDuration(t, time.Now(), last, time.Minute)
}

func must(rows pgx.Rows, err error) pgx.Rows {
	if err != nil {
		panic(err)
	}
	return rows
}
