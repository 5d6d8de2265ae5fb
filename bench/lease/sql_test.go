package lease_test

import (
	"database/sql"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ttlkit/ttlkit/internal/testenv/mysqltest"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/sqllease"
)

// The SQL backends: lease/sqllease on PostgreSQL and on MySQL/MariaDB
// against bare `SELECT 1` round trips on the same pool, the round-trip floor
// for a grant plus a release (two) or a heartbeat (one), and against as many
// one-row autocommit UPDATEs (impl=commit), the floor of a durable write:
// each commit waits for the server's log flush, which no store that
// acknowledges only committed grants can skip. They need
// TTLKIT_TEST_POSTGRES_URL / TTLKIT_TEST_MYSQL_DSN and skip without them;
// every run uses a fresh schema (database) and drops it.
func init() {
	backends = append(backends,
		backend{
			name:  "postgres",
			store: postgresStore,
			grantRelease: []peer{
				{"select1", func(b *testing.B) { pgSelect1(b, 2) }},
				{"commit", func(b *testing.B) { pgCommits(b, 2) }},
			},
			heartbeat: []peer{
				{"select1", func(b *testing.B) { pgSelect1(b, 1) }},
				{"commit", func(b *testing.B) { pgCommits(b, 1) }},
			},
		},
		// The same with synchronous_commit=off on the session: commits do
		// not wait for the log flush, so what is left is round trips and
		// server work. Not a recommended setting for leases (a server crash
		// could forget acknowledged grants); it shows where the time goes.
		backend{
			name:         "postgres-asynccommit",
			store:        func(b *testing.B) lease.Store { return pgStoreOn(b, asyncPool(b)) },
			grantRelease: []peer{{"select1", func(b *testing.B) { pgSelect1On(b, asyncPool(b), 2) }}},
			heartbeat:    []peer{{"select1", func(b *testing.B) { pgSelect1On(b, asyncPool(b), 1) }}},
		},
		backend{
			name:  "mysql",
			store: mysqlStore,
			grantRelease: []peer{
				{"select1", func(b *testing.B) { mySelect1(b, 2) }},
				{"commit", func(b *testing.B) { myCommits(b, 2) }},
			},
			heartbeat: []peer{
				{"select1", func(b *testing.B) { mySelect1(b, 1) }},
				{"commit", func(b *testing.B) { myCommits(b, 1) }},
			},
		},
		// The same with interpolateParams=true in the DSN: the driver
		// sends each statement with its arguments in one round trip
		// instead of prepare + execute.
		backend{
			name:         "mysql-interpolateparams",
			store:        func(b *testing.B) lease.Store { return myStoreOn(b, interpolatingDB(b)) },
			grantRelease: []peer{{"select1", func(b *testing.B) { mySelect1On(b, interpolatingDB(b), 2) }}},
			heartbeat:    []peer{{"select1", func(b *testing.B) { mySelect1On(b, interpolatingDB(b), 1) }}},
		})
}

// postgresStore returns a migrated sqllease store in a fresh schema.
func postgresStore(b *testing.B) lease.Store { return pgStoreOn(b, pgtest.OpenPostgres(b).Pool) }

// asyncPool returns a pool on a fresh schema whose sessions do not wait for
// the log flush at commit.
func asyncPool(b *testing.B) *pgxpool.Pool {
	pg := pgtest.OpenPostgres(b)
	cfg, err := pgxpool.ParseConfig(pg.URL())
	if err != nil {
		b.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// pgStoreOn returns a migrated sqllease store on pool.
func pgStoreOn(b *testing.B, pool *pgxpool.Pool) lease.Store {
	s, err := sqllease.NewPostgres(pool, sqllease.Options{Table: "modal_leases"})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	return s
}

// mysqlStore returns a migrated sqllease store in a fresh database.
func mysqlStore(b *testing.B) lease.Store { return myStoreOn(b, mysqltest.OpenMySQL(b).DB) }

// interpolatingDB returns a handle on a fresh database with
// interpolateParams=true.
func interpolatingDB(b *testing.B) *sql.DB {
	cfg, err := mysql.ParseDSN(mysqltest.OpenMySQL(b).DSN)
	if err != nil {
		b.Fatal(err)
	}
	cfg.InterpolateParams = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

// myStoreOn returns a migrated sqllease store on db.
func myStoreOn(b *testing.B, db *sql.DB) lease.Store {
	s, err := sqllease.NewMySQL(db, sqllease.Options{Table: "modal_leases"})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	return s
}

// pgSelect1 runs n `SELECT 1` per operation on a pgx pool.
func pgSelect1(b *testing.B, n int) { pgSelect1On(b, pgtest.OpenPostgres(b).Pool, n) }

func pgSelect1On(b *testing.B, pool *pgxpool.Pool, n int) {
	repeat(b, n, func() error { var one int; return pool.QueryRow(ctx, "SELECT 1").Scan(&one) })
}

// mySelect1 runs n `SELECT 1` per operation on a database/sql handle.
func mySelect1(b *testing.B, n int) { mySelect1On(b, mysqltest.OpenMySQL(b).DB, n) }

func mySelect1On(b *testing.B, db *sql.DB, n int) {
	repeat(b, n, func() error { var one int; return db.QueryRowContext(ctx, "SELECT 1").Scan(&one) })
}

// repeat runs query n times per operation.
func repeat(b *testing.B, n int, query func() error) {
	for b.Loop() {
		for range n {
			if err := query(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// pgCommits runs n autocommit one-row UPDATEs per operation.
func pgCommits(b *testing.B, n int) {
	pool := pgtest.OpenPostgres(b).Pool
	if _, err := pool.Exec(ctx, "CREATE TABLE counter (id int PRIMARY KEY, n bigint NOT NULL); INSERT INTO counter VALUES (1, 0)"); err != nil {
		b.Fatal(err)
	}
	repeat(b, n, func() error { _, err := pool.Exec(ctx, "UPDATE counter SET n = n + 1 WHERE id = 1"); return err })
}

// myCommits runs n autocommit one-row UPDATEs per operation.
func myCommits(b *testing.B, n int) {
	db := mysqltest.OpenMySQL(b).DB
	for _, q := range []string{"CREATE TABLE counter (id int PRIMARY KEY, n bigint NOT NULL) ENGINE=InnoDB", "INSERT INTO counter VALUES (1, 0)"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	repeat(b, n, func() error { _, err := db.ExecContext(ctx, "UPDATE counter SET n = n + 1 WHERE id = 1"); return err })
}

// BenchmarkLeasePostgresInterleaved runs one grant+release through
// lease/sqllease, two one-row autocommit UPDATEs (each commit waits for
// the log flush, as a grant's and a release's do) and two SELECT 1 per
// iteration, in turn, on one pool, and reports each one's median and
// 10th-percentile latency and the ratios of the medians: every
// implementation sees the same load and the same fsync latency.
func BenchmarkLeasePostgresInterleaved(b *testing.B) {
	b.Run("backend=postgres/op=grantrelease", func(b *testing.B) {
		b.ReportAllocs()
		pool := pgtest.OpenPostgres(b).Pool
		m := newManager(b, pgStoreOn(b, pool))
		if _, err := pool.Exec(ctx, "CREATE TABLE counter (id int PRIMARY KEY, n bigint NOT NULL); INSERT INTO counter VALUES (1, 0)"); err != nil {
			b.Fatal(err)
		}
		req := lease.Request{Holder: "session-1", Resource: "cam_2f_19", Cost: 2, Fallback: []int{1}}
		interleave(b, []impl{
			{"ttlkit", func() error {
				l, err := m.Grant(ctx, req)
				if err != nil {
					return err
				}
				_, err = m.Release(ctx, l.ID, "")
				return err
			}},
			{"commit", func() error {
				for range 2 {
					if _, err := pool.Exec(ctx, "UPDATE counter SET n = n + 1 WHERE id = 1"); err != nil {
						return err
					}
				}
				return nil
			}},
			{"select1", func() error {
				var one int
				for range 2 {
					if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
						return err
					}
				}
				return nil
			}},
		})
	})
}

// BenchmarkLeaseMySQLInterleaved is BenchmarkLeasePostgresInterleaved on
// MySQL/MariaDB: one grant+release through lease/sqllease, two one-row
// autocommit UPDATEs and two SELECT 1, in turn, on one handle (the DSN as
// given: each statement with arguments is a prepare and an execute).
func BenchmarkLeaseMySQLInterleaved(b *testing.B) {
	b.Run("backend=mysql/op=grantrelease", func(b *testing.B) {
		b.ReportAllocs()
		db := mysqltest.OpenMySQL(b).DB
		m := newManager(b, myStoreOn(b, db))
		for _, q := range []string{"CREATE TABLE counter (id int PRIMARY KEY, n bigint NOT NULL) ENGINE=InnoDB", "INSERT INTO counter VALUES (1, 0)"} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
		req := lease.Request{Holder: "session-1", Resource: "cam_2f_19", Cost: 2, Fallback: []int{1}}
		interleave(b, []impl{
			{"ttlkit", func() error {
				l, err := m.Grant(ctx, req)
				if err != nil {
					return err
				}
				_, err = m.Release(ctx, l.ID, "")
				return err
			}},
			{"commit", func() error {
				for range 2 {
					if _, err := db.ExecContext(ctx, "UPDATE counter SET n = n + 1 WHERE id = 1"); err != nil {
						return err
					}
				}
				return nil
			}},
			{"select1", func() error {
				var one int
				for range 2 {
					if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
						return err
					}
				}
				return nil
			}},
		})
	})
}
