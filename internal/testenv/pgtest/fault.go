package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ttlkit/ttlkit/internal/testenv"
)

// NamedPool returns a pool in the test's schema whose connections carry
// application_name app, so that Terminate can end exactly them. configure,
// if not nil, adjusts the pool's config first. The pool is closed when the
// test ends.
func (p *Postgres) NamedPool(t testing.TB, app string, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	config := p.config.Copy()
	config.ConnConfig.RuntimeParams["search_path"] = p.Schema
	config.ConnConfig.RuntimeParams["application_name"] = app
	if configure != nil {
		configure(config)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.ConnectTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		t.Fatalf("testenv: postgres pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Terminate ends the server backends of application app (see NamedPool), and
// no others, and returns how many there were.
func (p *Postgres) Terminate(ctx context.Context, app string) (int, error) {
	var n int
	err := p.Pool.QueryRow(ctx,
		`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
	return n, err
}

// FragilePool is a NamedPool that never pings an idle connection, so that
// the first use of one Terminate ended fails instead of being replaced
// silently. It is connected when returned.
func (p *Postgres) FragilePool(t testing.TB, app string) *pgxpool.Pool {
	t.Helper()
	pool := p.NamedPool(t, app, func(cfg *pgxpool.Config) {
		cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	})
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatalf("testenv: postgres pool: %v", err)
	}
	return pool
}
