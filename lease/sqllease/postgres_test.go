package sqllease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/internal/leasecheck"
	"github.com/ttlkit/ttlkit/lease/leasetest"
	"github.com/ttlkit/ttlkit/lease/sqllease"
)

var ctx = context.Background()

// newPG returns a migrated store on pool.
func newPG(t *testing.T, pool *pgxpool.Pool, opts sqllease.Options) *sqllease.Store {
	t.Helper()
	s, err := sqllease.NewPostgres(pool, opts)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	return s
}

func TestPostgresConformance(t *testing.T) {
	pg := pgtest.OpenPostgres(t)
	tables := map[lease.Store]sqllease.Options{}
	leasetest.Run(t, leasetest.Harness{
		New: func(t *testing.T) lease.Store {
			// Each subtest gets its own tables in the test's schema.
			opts := sqllease.Options{Table: fmt.Sprintf("leases_%d", len(tables))}
			s := newPG(t, pg.Pool, opts)
			tables[s] = opts
			return s
		},
		Peer: func(t *testing.T, s lease.Store) lease.Store {
			p, err := sqllease.NewPostgres(pg.NewPool(t), tables[s])
			require.NoError(t, err)
			return p
		},
		Unit: 500 * time.Millisecond, // 23 grants must fit in one Unit, on a loaded CI machine
		// The servers run on this host, on its clock; each remembers releases.
		LocalClock: true, RemembersReleases: true,
	})
}

// TestPostgresMultiInstance: three Managers with their own pools on one
// pair of tables; the recorded history is checked against the model.
func TestPostgresMultiInstance(t *testing.T) {
	pg := pgtest.OpenPostgres(t)
	opts := sqllease.Options{Table: "modal_leases"}
	stores := []lease.Store{newPG(t, pg.Pool, opts)}
	for range 2 {
		stores = append(stores, newPG(t, pg.NewPool(t), opts))
	}
	leasecheck.ProveMultiInstance(t, stores, 6, 250)
}

// TestPostgresBackendTerminated terminates the stores' server backends
// (pg_terminate_backend, only connections with this test's
// application_name) again and again during the multi-instance workload.
func TestPostgresBackendTerminated(t *testing.T) {
	pg := pgtest.OpenPostgres(t)
	app := "ttlkit_fault_" + pg.Schema
	opts := sqllease.Options{Table: "modal_leases"}
	var stores []lease.Store
	for range 3 {
		stores = append(stores, newPG(t, pg.NamedPool(t, app, nil), opts))
	}
	leasecheck.ProveFault(t, stores, "sqllease: ", 100*time.Millisecond, 150, func() (int, error) {
		return pg.Terminate(ctx, app)
	}, nil)
}
