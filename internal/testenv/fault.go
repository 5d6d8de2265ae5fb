package testenv

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// NamedClient returns a client of its own to r's server whose connections
// carry a CLIENT SETNAME unique to the test (the prefix plus suffix), so that
// KillClients can cut exactly its connections and no one else's. maxRetries
// is go-redis's Options.MaxRetries (-1 disables retries). The client is
// closed when the test ends.
func (r *Redis) NamedClient(t testing.TB, suffix string, maxRetries int) (*redis.Client, string) {
	t.Helper()
	o := *r.opts
	o.ClientName = strings.TrimSuffix(r.Prefix, ":") + "-" + suffix
	o.MaxRetries = maxRetries
	c := redis.NewClient(&o)
	t.Cleanup(func() { _ = c.Close() })
	return c, o.ClientName
}

// KillClients kills the server connections named name (by NamedClient), and
// no others, and returns how many it killed.
func (r *Redis) KillClients(ctx context.Context, name string) (int, error) {
	list, err := r.Client.ClientList(ctx).Result()
	if err != nil {
		return 0, err
	}
	n := 0
	for line := range strings.SplitSeq(list, "\n") {
		var id, nm string
		for f := range strings.FieldsSeq(line) {
			if v, ok := strings.CutPrefix(f, "id="); ok {
				id = v
			} else if v, ok := strings.CutPrefix(f, "name="); ok {
				nm = v
			}
		}
		if id == "" || nm != name {
			continue
		}
		if err := r.Client.Do(ctx, "CLIENT", "KILL", "ID", id).Err(); err == nil {
			n++
		}
	}
	return n, nil
}

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
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
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
