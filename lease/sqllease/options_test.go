package sqllease_test

import (
	"context"
	crand "crypto/rand"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/mysqltest"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/sqllease"
)

// migrator is what both stores offer.
type migrator interface {
	lease.Store
	Migrate(ctx context.Context) error
}

func TestInvalidNamesRejected(t *testing.T) {
	// Neither handle connects until used.
	pool, err := pgxpool.New(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	require.NoError(t, err)
	defer pool.Close()
	db, err := sql.Open("mysql", "nobody@tcp(127.0.0.1:1)/none")
	require.NoError(t, err)
	defer db.Close()
	open := map[string]func(sqllease.Options) error{
		"postgres": func(o sqllease.Options) error { _, err := sqllease.NewPostgres(pool, o); return err },
		"mysql":    func(o sqllease.Options) error { _, err := sqllease.NewMySQL(db, o); return err },
	}
	bad := []struct {
		opts  sqllease.Options
		field string
	}{
		{sqllease.Options{Table: "modal-leases"}, "Table"},
		{sqllease.Options{Table: "1leases"}, "Table"},
		{sqllease.Options{Table: "a.b.c"}, "Table"},
		{sqllease.Options{Table: "x; DROP TABLE y"}, "Table"},
		{sqllease.Options{Table: `x"y`}, "Table"},
		{sqllease.Options{Table: "x`y"}, "Table"},
		{sqllease.Options{Table: strings.Repeat("t", 49)}, "Table"},
		{sqllease.Options{Table: "ok", StateTable: "no good"}, "StateTable"},
		{sqllease.Options{Table: "same", StateTable: "same"}, "StateTable"},
	}
	for name, newStore := range open {
		for _, c := range bad {
			err := newStore(c.opts)
			if assert.ErrorIs(t, err, lease.ErrInvalid, "%s %+v", name, c.opts) {
				assert.Contains(t, err.Error(), c.field+" ", "%s %+v", name, c.opts)
			}
		}
		for _, o := range []sqllease.Options{{}, {Table: "modal_leases"}, {Table: "ops.Modal_Leases", StateTable: "ops.state"},
			{Table: strings.Repeat("t", 48)}} {
			assert.NoError(t, newStore(o), "%s %+v", name, o)
		}
	}
	_, err = sqllease.NewPostgres(nil, sqllease.Options{})
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = sqllease.NewMySQL(nil, sqllease.Options{})
	assert.ErrorIs(t, err, lease.ErrInvalid)
}

// testMigrate checks Migrate on two stores over custom names: it refuses
// to grant before, is idempotent, creates what exists says, and two lease
// tables sharing one state table keep separate budgets and tokens.
func testMigrate(t *testing.T, newStore func(sqllease.Options) migrator, exists func(name string) bool,
	exec func(query string) error, a, b sqllease.Options, objects []string) {
	s := newStore(a)
	args := lease.GrantArgs{ID: crand.Text(), Holder: "h", Costs: []int{2}, TTL: time.Minute, Grace: time.Minute, Budget: 2}
	_, err := s.Grant(ctx, args)
	require.ErrorIs(t, err, sqllease.ErrNotMigrated)
	assert.False(t, errors.Is(err, lease.ErrInvalid))
	_, err = s.Heartbeat(ctx, "x", "")
	require.ErrorIs(t, err, sqllease.ErrNotMigrated)
	for range 3 {
		require.NoError(t, s.Migrate(ctx))
	}
	_, err = s.Grant(ctx, lease.GrantArgs{ID: "x", Holder: "h", Costs: []int{2}, TTL: time.Minute, Grace: time.Minute, Budget: 2})
	require.NoError(t, err)
	for _, o := range objects {
		assert.True(t, exists(o), "%s after Migrate", o)
	}
	s2 := newStore(b)
	require.NoError(t, s2.Migrate(ctx))
	require.NoError(t, s.Migrate(ctx)) // again, with data in place: nothing lost
	l, err := s.Get(ctx, "x")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), l.Token)
	// The other table has its own budget and its own token counter.
	args.ID = crand.Text()
	l2, err := s2.Grant(ctx, args)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), l2.Token)
	args.ID, args.Holder = crand.Text(), "other"
	_, err = s.Grant(ctx, args)
	assert.ErrorIs(t, err, lease.ErrOverCapacity)

	// Without its state row a store refuses to grant, and Migrate puts
	// the row back with the counter above the tokens in the table.
	require.NoError(t, exec("DELETE FROM lease_state WHERE name = '"+b.Table+"'"))
	args.ID = crand.Text()
	_, err = s2.Grant(ctx, args)
	require.ErrorIs(t, err, sqllease.ErrNotMigrated)
	require.NoError(t, s2.Migrate(ctx))
	_, err = s2.Get(ctx, l2.ID)
	assert.NoError(t, err)
	args.ID, args.Costs = crand.Text(), []int{1}
	args.Holder = "third"
	args.Budget = 5
	l3, err := s2.Grant(ctx, args)
	require.NoError(t, err)
	assert.Greater(t, l3.Token, l2.Token)
}

func TestPostgresMigrate(t *testing.T) {
	pg := pgtest.OpenPostgres(t)
	qualified := pg.Schema + ".Modal_Leases"
	testMigrate(t,
		func(o sqllease.Options) migrator {
			s, err := sqllease.NewPostgres(pg.Pool, o)
			require.NoError(t, err)
			return s
		},
		func(name string) bool {
			var n int
			require.NoError(t, pg.Pool.QueryRow(ctx,
				`SELECT count(*) FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = $1 AND c.relname = $2`,
				pg.Schema, name).Scan(&n))
			return n == 1
		},
		func(q string) error { _, err := pg.Pool.Exec(ctx, q); return err },
		sqllease.Options{Table: qualified, StateTable: "lease_state"},
		sqllease.Options{Table: "other_leases", StateTable: "lease_state"},
		[]string{"Modal_Leases", "Modal_Leases_deadline_idx", "Modal_Leases_holder_idx", "lease_state"})
}

func TestMySQLMigrate(t *testing.T) {
	my := mysqltest.OpenMySQL(t)
	qualified := my.Database + ".Modal_Leases"
	testMigrate(t,
		func(o sqllease.Options) migrator {
			s, err := sqllease.NewMySQL(my.DB, o)
			require.NoError(t, err)
			return s
		},
		func(name string) bool {
			var n int
			table, index, _ := strings.Cut(name, ":")
			q, args := `SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?`, []any{my.Database, table}
			if index != "" {
				q = `SELECT count(DISTINCT index_name) FROM information_schema.statistics WHERE table_schema = ? AND table_name = ? AND index_name = ?`
				args = append(args, index)
			}
			require.NoError(t, my.DB.QueryRow(q, args...).Scan(&n))
			return n == 1
		},
		func(q string) error { _, err := my.DB.ExecContext(ctx, q); return err },
		sqllease.Options{Table: qualified, StateTable: "lease_state"},
		sqllease.Options{Table: "other_leases", StateTable: "lease_state"},
		[]string{"Modal_Leases", "Modal_Leases:Modal_Leases_deadline_idx", "Modal_Leases:Modal_Leases_holder_idx", "lease_state"})
}
