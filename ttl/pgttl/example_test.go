package pgttl_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/pgttl"
)

// New validates the table name and does not contact the server.
func ExampleNew() {
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:5432/app")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	store, err := pgttl.New(pool, pgttl.Options{Table: "ops.workspaces"})
	if err != nil {
		panic(err)
	}
	fmt.Println(store.Table())
	_, err = pgttl.New(pool, pgttl.Options{Table: "workspaces; DROP TABLE users"})
	fmt.Println(err)
	// Output:
	// "ops"."workspaces"
	// pgttl: Table "workspaces; DROP TABLE users" is not a valid identifier (letters, digits, _; at most 48; optional schema.)
}

// The TTL runner of a cloud-IDE workspace system: PostgreSQL decides, and controllers in other
// processes are woken through NOTIFY. (Needs a PostgreSQL server.)
func ExampleNotifier() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://127.0.0.1:5432/app")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	store, err := pgttl.New(pool, pgttl.Options{Table: "workspaces"})
	if err != nil {
		panic(err)
	}
	if err := store.Migrate(ctx); err != nil {
		panic(err)
	}
	wake, err := pgttl.NewNotifier(pool, "workspace_wake")
	if err != nil {
		panic(err)
	}
	rules := []ttl.Rule{
		{Name: "standby", Phase: "RUNNING", Since: ttl.SinceLastActivity, After: 10 * time.Minute, Then: "STANDBY"},
		{Name: "archive", Phase: "STANDBY", Since: ttl.SincePhaseChanged, After: 30 * time.Minute, Then: "ARCHIVED"},
	}
	runner, err := ttl.NewRunner(store, rules,
		ttl.RunnerOptions{Interval: time.Minute, Wake: wake.WakeExpired})
	if err != nil {
		panic(err)
	}
	defer runner.Close(context.Background())
}

// A controller in another process reconciles the workspaces it is woken
// for; a nil ids slice follows a reconnect and means "reconcile all".
// (Needs a PostgreSQL server.)
func ExampleListen() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://127.0.0.1:5432/app")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	l, err := pgttl.Listen(ctx, pool, "workspace_wake", func(ids []string) {
		fmt.Println("reconcile", ids)
	}, pgttl.ListenOptions{})
	if err != nil {
		panic(err)
	}
	defer l.Close(context.Background())
}
