package pgttl_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/pgttl"
	"github.com/ttlkit/ttlkit/ttl/ttltest"
)

// tableHarness is the harness of the stores made with opts, each on a
// table of its own, named opts.Table (or "entities") and a number that n
// counts, and whose entities it writes and reads as the system that owns
// the table would.
func tableHarness(pool *pgxpool.Pool, opts pgttl.Options, n *int) ttltest.StoreHarness {
	base, last, noOp := opts.Table, opts.LastActivityColumn, opts.NoOperation
	if base == "" {
		base = "entities"
	}
	if last == "" {
		last = "last_activity_at"
	}
	var mu sync.Mutex
	tables := map[ttl.Store]string{}
	table := func(st ttl.Store) string {
		mu.Lock()
		defer mu.Unlock()
		return tables[st]
	}
	return ttltest.StoreHarness{
		New: func(t *testing.T) ttl.Store {
			*n++ // one table per subtest, in the package's schema
			o := opts
			o.Table = fmt.Sprintf("%s_%d", base, *n)
			st := newStore(t, pool, o)
			mu.Lock()
			tables[st] = o.Table
			mu.Unlock()
			return st
		},
		Create: func(t *testing.T, st ttl.Store, es ...ttltest.Entity) {
			t.Helper()
			for _, e := range es {
				insert(t, pool, table(st), last, noOp, e)
			}
		},
		Get: func(t *testing.T, st ttl.Store, id string) (ttltest.Entity, bool) {
			t.Helper()
			return get(t, pool, table(st), last, noOp, id)
		},
		Now: func(t *testing.T) time.Time { return serverNow(t, pool) },
	}
}

// insert writes e into table, the column of the last activity named last
// and no operation written as noOp.
func insert(t *testing.T, pool *pgxpool.Pool, table, last, noOp string, e ttltest.Entity) {
	t.Helper()
	op := e.Operation
	if op == "" {
		op = noOp
	}
	var deleted any
	if !e.DeletedAt.IsZero() {
		deleted = e.DeletedAt
	}
	_, err := pool.Exec(context.Background(), `INSERT INTO `+table+` (id, phase, desired_state, operation, `+last+`, phase_changed_at, created_at, deleted_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, e.ID, e.Phase, e.DesiredState, op, e.LastActivityAt, e.PhaseChangedAt, e.CreatedAt, deleted)
	require.NoError(t, err)
}

// get reads the entity id of table, and false if there is none.
func get(t *testing.T, pool *pgxpool.Pool, table, last, noOp, id string) (ttltest.Entity, bool) {
	t.Helper()
	e := ttltest.Entity{ID: id}
	var deleted *time.Time
	err := pool.QueryRow(context.Background(), `SELECT phase, desired_state, operation, `+last+`, phase_changed_at, created_at, deleted_at
FROM `+table+` WHERE id = $1`, id).Scan(&e.Phase, &e.DesiredState, &e.Operation, &e.LastActivityAt, &e.PhaseChangedAt, &e.CreatedAt, &deleted)
	if errors.Is(err, pgx.ErrNoRows) {
		return ttltest.Entity{}, false
	}
	require.NoError(t, err)
	if e.Operation == noOp {
		e.Operation = ""
	}
	if deleted != nil {
		e.DeletedAt = *deleted
	}
	return e, true
}
