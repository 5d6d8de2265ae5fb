package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ttlkit/ttlkit/internal/testenv"
)

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

// no others, and returns how many there were.
func (p *Postgres) Terminate(ctx context.Context, app string) (int, error) {
	var n int
	err := p.Pool.QueryRow(ctx,
		`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
	return n, err
}
