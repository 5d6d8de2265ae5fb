package pgttl_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/pgttl"
)

// New validates the names and does not contact the server.
func ExampleNew() {
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:5432/app")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	_, err = pgttl.New(pool, pgttl.Options{Table: "ops.entities", LastActivityColumn: "last_access_at"})
	fmt.Println(err)
	_, err = pgttl.New(pool, pgttl.Options{Table: "entities; DROP TABLE users"})
	fmt.Println(err)
	// Output:
	// <nil>
	// pgttl: Table "entities; DROP TABLE users" is not a valid identifier (letters, digits, _; at most 48; optional schema.)
}

// A TTL runner on PostgreSQL: the server's clock decides, and the system
// that owns the table acts on the decisions. (Needs a PostgreSQL server.)
func ExampleStore() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://127.0.0.1:5432/app")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	store, err := pgttl.New(pool, pgttl.Options{Table: "entities"})
	if err != nil {
		panic(err)
	}
	if err := store.Migrate(ctx); err != nil {
		panic(err)
	}
	rules := []ttl.Rule{
		{Name: "standby", Phase: "RUNNING", Since: ttl.SinceLastActivity, After: 10 * time.Minute, Then: "STANDBY"},
		{Name: "archive", Phase: "STANDBY", Since: ttl.SincePhaseChanged, After: 30 * time.Minute, Then: "ARCHIVED"},
	}
	runner, err := ttl.NewRunner(store, rules, ttl.RunnerOptions{
		Interval: time.Minute,
		Wake: func(ctx context.Context, expired []ttl.Expiry) error {
			for _, x := range expired {
				fmt.Println(x.ID, "->", x.Then)
			}
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	defer runner.Close(ctx)
}
