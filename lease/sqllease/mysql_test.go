package sqllease_test

import (
	crand "crypto/rand"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/mysqltest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/internal/leasecheck"
	"github.com/ttlkit/ttlkit/lease/leasetest"
	"github.com/ttlkit/ttlkit/lease/sqllease"
)

// newMy returns a migrated store on db.
func newMy(t *testing.T, db *sql.DB, opts sqllease.Options) *sqllease.Store {
	t.Helper()
	s, err := sqllease.NewMySQL(db, opts)
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	return s
}

func TestMySQLConformance(t *testing.T) {
	my := mysqltest.OpenMySQL(t)
	tables := map[lease.Store]sqllease.Options{}
	leasetest.Run(t, leasetest.Harness{
		New: func(t *testing.T) lease.Store {
			opts := sqllease.Options{Table: fmt.Sprintf("leases_%d", len(tables))}
			s := newMy(t, my.DB, opts)
			tables[s] = opts
			return s
		},
		Peer: func(t *testing.T, s lease.Store) lease.Store {
			p, err := sqllease.NewMySQL(my.NewDB(t), tables[s])
			require.NoError(t, err)
			return p
		},
		Unit: 500 * time.Millisecond, // 23 grants (6 round trips each) must fit in one Unit, on a loaded CI machine
		// The servers run on this host, on its clock; each remembers releases.
		LocalClock: true, RemembersReleases: true,
	})
}

// TestMySQLMultiInstance: three Managers with their own *sql.DB on one pair
// of tables; the recorded history is checked against the model.
func TestMySQLMultiInstance(t *testing.T) {
	my := mysqltest.OpenMySQL(t)
	opts := sqllease.Options{Table: "modal_leases"}
	stores := []lease.Store{newMy(t, my.DB, opts)}
	for range 2 {
		stores = append(stores, newMy(t, my.NewDB(t), opts))
	}
	leasecheck.ProveMultiInstance(t, stores, 6, 250)
}

// TestMySQLConnectionsKilled kills the stores' server connections (KILL,
// only connections to this test's database, never the killer's own) again
// and again during the multi-instance workload.
func TestMySQLConnectionsKilled(t *testing.T) {
	my := mysqltest.OpenMySQL(t)
	opts := sqllease.Options{Table: "modal_leases"}
	var stores []lease.Store
	for range 3 {
		stores = append(stores, newMy(t, my.NewDB(t), opts))
	}
	killer := my.NewDB(t)
	killer.SetMaxOpenConns(1)
	// Fewer kills than on PostgreSQL: a MySQL grant is six round trips, so
	// more calls fail, and each failed write widens the history check.
	leasecheck.ProveFault(t, stores, "sqllease: ", 80*time.Millisecond, 150, func() (int, error) {
		rows, err := killer.QueryContext(ctx,
			`SELECT id FROM information_schema.processlist WHERE db = ? AND id <> CONNECTION_ID()`, my.Database)
		if err != nil {
			return 0, err
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return 0, err
			}
			ids = append(ids, id)
		}
		rows.Close()
		n := 0
		for _, id := range ids {
			// A connection may have gone by itself since the listing.
			if _, err := killer.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err == nil {
				n++
			}
		}
		return n, rows.Err()
	}, nil)
}

// TestMySQLMigratesPadSpaceColumns: a lease table created by an earlier
// version (VARCHAR columns, utf8mb4_bin, which pads with spaces) gets
// binary columns from Migrate, keeps its leases, and then tells "alice "
// from "alice".
func TestMySQLMigratesPadSpaceColumns(t *testing.T) {
	my := mysqltest.OpenMySQL(t)
	_, err := my.DB.ExecContext(ctx, "CREATE TABLE old_leases (\n"+
		"id VARCHAR(255) NOT NULL, holder VARCHAR(255) NOT NULL, resource VARCHAR(255) NOT NULL,\n"+
		"cost INT NOT NULL, token BIGINT UNSIGNED NOT NULL, created_at DATETIME(6) NOT NULL,\n"+
		"expires_at DATETIME(6) NOT NULL, heartbeat_at DATETIME(6) NOT NULL, grace_ns BIGINT NOT NULL,\n"+
		"deadline DATETIME(6) NOT NULL, PRIMARY KEY (id), KEY old_leases_deadline_idx (deadline),\n"+
		"KEY old_leases_holder_idx (holder, deadline)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
	require.NoError(t, err)
	_, err = my.DB.ExecContext(ctx, `INSERT INTO old_leases VALUES ('old-lease', 'alice', 'cam_2f_19', 1, 7,
	UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR, UTC_TIMESTAMP(6), 3600000000000, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)`)
	require.NoError(t, err)

	s := newMy(t, my.DB, sqllease.Options{Table: "old_leases"}) // migrates
	var types []string
	rows, err := my.DB.QueryContext(ctx, `SELECT DATA_TYPE FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'old_leases' AND COLUMN_NAME IN ('id', 'holder', 'resource')`)
	require.NoError(t, err)
	for rows.Next() {
		var ty string
		require.NoError(t, rows.Scan(&ty))
		types = append(types, ty)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"varbinary", "varbinary", "varbinary"}, types)
	require.NoError(t, s.Migrate(ctx), "a second Migrate")

	old, err := s.Get(ctx, "old-lease")
	require.NoError(t, err)
	assert.Equal(t, "alice", old.Holder)
	assert.Equal(t, uint64(7), old.Token)
	_, err = s.Get(ctx, "old-lease ")
	require.ErrorIs(t, err, lease.ErrNotFound)
	l, err := s.Grant(ctx, lease.GrantArgs{ID: crand.Text(), Holder: "alice ", Costs: []int{1}, TTL: time.Hour,
		Grace: time.Hour, Budget: 5, OnePerHolder: true})
	require.NoError(t, err, "another holder than alice")
	assert.Greater(t, l.Token, old.Token)
}
