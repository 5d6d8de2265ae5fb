package sqllease_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/sqllease"
)

// An admission server's leases on PostgreSQL: every server instance runs
// this against the same database and so shares one budget of 35 units.
// (Compiled only: it needs a database.)
func ExampleNewPostgres() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := sqllease.NewPostgres(pool, sqllease.Options{Table: "modal_leases"})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil { // idempotent, at start-up
		log.Fatal(err)
	}
	m, err := lease.New(35, lease.Options{Store: store}) // TTL 300 s, grace 45 s, sweep every 10 s
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = m.Close(ctx) }()
	l, err := m.Grant(ctx, lease.Request{Holder: "session-1", Resource: "cam_2f_19", Cost: 2, Fallback: []int{1}})
	if err != nil {
		log.Fatal(err) // a *lease.RejectedError says why
	}
	fmt.Println("lease", l.ID, "cost", l.Cost, "token", l.Token)
}

// The same on MySQL or MariaDB. The DSN needs no parseTime or loc: the
// store reads and writes times in UTC microseconds; interpolateParams saves a
// round trip per statement. (Compiled only.)
func ExampleNewMySQL() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "app@tcp(db:3306)/app?interpolateParams=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := sqllease.NewMySQL(db, sqllease.Options{Table: "modal_leases"})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	m, err := lease.New(35, lease.Options{Store: store})
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = m.Close(ctx) }()
}

// Table names are validated identifiers (optionally schema-qualified):
// they are quoted into SQL, never taken as SQL. This one runs offline.
func ExampleOptions() {
	db, _ := sql.Open("mysql", "app@tcp(db:3306)/app") // does not connect
	defer db.Close()
	_, err := sqllease.NewMySQL(db, sqllease.Options{Table: "modal_leases; DROP TABLE users"})
	fmt.Println(err)
	_, err = sqllease.NewMySQL(db, sqllease.Options{Table: "app.stream_leases"})
	fmt.Println(err)
	// Output:
	// sqllease: Table "modal_leases; DROP TABLE users" is not a valid identifier (letters, digits, _; at most 48; optional schema.)
	// <nil>
}
