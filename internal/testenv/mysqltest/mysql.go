package mysqltest

import (
	"context"
	"database/sql"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/ttlkit/ttlkit/internal/testenv"
)

// MySQL is a test's view of the MySQL or MariaDB server named by
// TTLKIT_TEST_MYSQL_DSN.
type MySQL struct {
	// DB is connected to Database; it is closed when the test ends.
	DB *sql.DB
	// Database is created for the test and dropped when the test ends.
	Database string
	// DSN connects to Database, for code that opens its own connections.
	DSN string
}

// OpenMySQL connects to the server named by TTLKIT_TEST_MYSQL_DSN, creates a
// database for the test and returns a handle to it. It skips or fails t (see
// the package doc) when the server is not set or does not answer.
func OpenMySQL(t testing.TB) *MySQL {
	t.Helper()
	dsn := testenv.Lookup(t, testenv.EnvMySQL)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("testenv: %s: %v", testenv.EnvMySQL, err)
	}
	cfg.ParseTime = true
	cfg.Timeout = testenv.ConnectTimeout
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("testenv: %s: %v", testenv.EnvMySQL, err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.ConnectTimeout)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		testenv.Unavailable(t, "mysql at %s does not answer: %v", cfg.Addr, err)
	}
	m := &MySQL{Database: testenv.UniqueName()}
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+m.Database); err != nil {
		t.Fatalf("testenv: creating database %s: %v", m.Database, err)
	}
	adminDSN := cfg.FormatDSN()
	t.Cleanup(func() {
		ctx, cancel := testenv.CleanupContext()
		defer cancel()
		admin, err := sql.Open("mysql", adminDSN)
		if err == nil {
			defer admin.Close()
			_, err = admin.ExecContext(ctx, "DROP DATABASE "+m.Database)
		}
		if err != nil {
			t.Errorf("testenv: dropping database %s: %v", m.Database, err)
		}
	})
	cfg.DBName = m.Database
	m.DSN = cfg.FormatDSN()
	m.DB = m.NewDB(t)
	return m
}

// NewDB returns another handle with its own connections to the test's
// database (as a second server instance would have), closed when the test
// ends.
func (m *MySQL) NewDB(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", m.DSN)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}
