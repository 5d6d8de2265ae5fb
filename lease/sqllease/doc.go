// Package sqllease is a lease.Store on PostgreSQL (pgx v5) and on MySQL or
// MariaDB (go-sql-driver/mysql), so that several server instances share one
// lease budget through one database.
//
// Two tables hold a store: the lease table (the shape of a camera admission
// server's modal_leases: id, holder, resource, cost, token, created_at,
// expires_at, heartbeat_at, grace_ns, plus the deadline min(expires_at,
// heartbeat_at + grace) that the sweep and the holder rule are indexed on) and
// a state table whose row per lease table is the fencing-token counter and the
// lock every grant serialises on. Migrate creates both, idempotently; the
// names are Options.
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
// # Calls at a deadline
//
// A heartbeat reads the clock after taking a share lock on the state row,
// checks deadline > now, and commits a moment later (its statements plus
// the commit's log flush). A lease whose deadline passes within that moment
// must not be seen expired before the commit and live after it. Grants hold
// the state row exclusively, so they wait for the heartbeat and count the
// lease. Get, List, Usage, Heartbeat and Release are plain reads or
// row-level writes that would not wait; whenever one of them meets an
// expired-looking row, it decides again in a transaction that holds the
// state row exclusively, after every heartbeat and release in flight has
// committed. Expired rows remain only until the next sweep, so this slower
// path (a grant's cost) is taken only between a deadline and the next
// sweep. Sweeps skip rows a heartbeat has locked; a heartbeat waiting for a
// sweep that locked the row first fails with ErrNotFound.
//
// Times are stored with microsecond precision (timestamptz, DATETIME(6) in
// UTC). The MySQL store reads and writes times as microseconds since the
// epoch, so it is right whatever the DSN's loc or the session time_zone.
//
// Files: options.go (Options, table names), decide.go (the grant rule and
// error helpers both dialects share), postgres.go, mysql.go.
package sqllease
