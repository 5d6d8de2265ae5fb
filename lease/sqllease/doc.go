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
// A Grant whose ID is already in the table for the same holder is a repeat
// of a grant that took effect and returns the stored lease without a new
// decision (see lease.Store.Grant).
//
// # Reads at a deadline
//
// Get, List and Usage are plain reads that do not wait for writes in
// flight. A heartbeat reads the clock, checks deadline > now and commits a
// moment later (its statements plus the commit's log flush). If the lease's
// deadline passes within that moment, a call between the deadline and the
// commit sees the lease expired (Get, and another Heartbeat or Release of
// it, return ErrExpired; List and Usage leave it out), and a call after the
// commit sees it live again, with a HeartbeatAt before the deadline. Decisions are not
// affected: heartbeats and releases hold a share lock on the state row
// until they commit, every grant holds that row exclusively, so a grant
// counts the lease as the heartbeat left it; and a sweep skips a row a
// heartbeat has locked, while a heartbeat waiting for a sweep that locked
// the row first fails with ErrNotFound. So the sweep's expired event is
// final, whereas ErrExpired (and a lease missing from List or Usage) is
// final only once the deadline is a commit's duration past.
// Heartbeats sent well before the deadline, as KeepAlive sends them, never
// meet this.
//
// Times are stored with microsecond precision (timestamptz, DATETIME(6) in
// UTC). The MySQL store reads and writes times as microseconds since the
// epoch, so it is right whatever the DSN's loc or the session time_zone.
//
// Files: options.go (Options, table names), decide.go (the grant rule and
// error helpers both dialects share), postgres.go, mysql.go.
package sqllease
