// Package sqllease is a lease.Store on PostgreSQL (pgx v5) and on MySQL or
// MariaDB (go-sql-driver/mysql), so that several server instances share one
// lease budget through one database.
//
// Two tables hold a store: the lease table (seed 003's modal_leases shape:
// id, holder, resource, cost, token, created_at, expires_at, heartbeat_at,
// grace_ns, plus the deadline min(expires_at, heartbeat_at + grace) that the
// sweep and the holder rule are indexed on) and a state table whose row per
// lease table is the fencing-token counter and the lock every grant
// serialises on. Migrate creates both, idempotently; the names are Options.
//
// Every decision takes its time from the database clock inside the
// statement or transaction that makes it (PostgreSQL clock_timestamp(),
// MySQL UTC_TIMESTAMP(6)), never from the client. A grant is one
// transaction: lock and bump the state row, read the units and the holder's
// live lease at the time taken after the lock, decide (gate, holder,
// budget), insert, commit; a rejection rolls back, so tokens have no gaps
// from rejections. Expired rows are excluded by the predicate
// deadline > now everywhere, before any sweep. Sweep locks expired rows with
// FOR UPDATE SKIP LOCKED and deletes them in the same transaction, so
// concurrent sweepers on any instance return each expired lease once.
//
// Times are stored with microsecond precision (timestamptz, DATETIME(6) in
// UTC). The MySQL store reads and writes times as microseconds since the
// epoch, so it is right whatever the DSN's loc or the session time_zone.
//
// Files: options.go (Options, table names), decide.go (the grant rule and
// error helpers both dialects share), postgres.go, mysql.go.
package sqllease
