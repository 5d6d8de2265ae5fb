package pgtest

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/ttlkit/ttlkit/internal/testenv"
)

// Postgres is a test's view of the PostgreSQL server named by
// TTLKIT_TEST_POSTGRES_URL.
type Postgres struct {
	// Pool is connected with search_path set to Schema; it is closed when the
	// test ends.
	Pool *pgxpool.Pool
	// Schema is created for the test and dropped, with everything in it,
	// when the test ends.
	Schema string

	config *pgxpool.Config
}

// OpenPostgres connects to the server named by TTLKIT_TEST_POSTGRES_URL,
// creates a schema for the test and returns a pool whose search_path is that
// schema. It skips or fails t (see the package doc) when the server is not
// set or does not answer.
func OpenPostgres(t testing.TB) *Postgres {
	t.Helper()
	url := testenv.Lookup(t, testenv.EnvPostgres)
	config, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("testenv: %s: %v", testenv.EnvPostgres, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.ConnectTimeout)
	defer cancel()
	admin, err := pgx.ConnectConfig(ctx, config.ConnConfig.Copy())
	if err != nil {
		testenv.Unavailable(t, "postgres at %s does not answer: %v", config.ConnConfig.Host, err)
	}
	p := &Postgres{Schema: testenv.UniqueName(), config: config}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+p.Schema); err != nil {
		_ = admin.Close(ctx)
		t.Fatalf("testenv: creating schema %s: %v", p.Schema, err)
	}
	_ = admin.Close(ctx)
	t.Cleanup(func() {
		ctx, cancel := testenv.CleanupContext()
		defer cancel()
		admin, err := pgx.ConnectConfig(ctx, config.ConnConfig.Copy())
		if err != nil {
			t.Errorf("testenv: dropping schema %s: %v", p.Schema, err)
			return
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+p.Schema+" CASCADE"); err != nil {
			t.Errorf("testenv: dropping schema %s: %v", p.Schema, err)
		}
	})
	p.Pool = p.NewPool(t)
	return p
}

// NewPool returns another pool with its own connections in the test's schema
// (as a second server instance would have), closed when the test ends.
func (p *Postgres) NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	config := p.config.Copy()
	config.ConnConfig.RuntimeParams["search_path"] = p.Schema
	ctx, cancel := context.WithTimeout(context.Background(), testenv.ConnectTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		t.Fatalf("testenv: postgres pool: %v", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		testenv.Unavailable(t, "postgres at %s does not answer: %v", config.ConnConfig.Host, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// URL returns a connection URL for the test's schema, for code that opens
// its own connections.
func (p *Postgres) URL() string {
	url, sep := p.config.ConnString(), "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "search_path=" + p.Schema
}
