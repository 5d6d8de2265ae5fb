// Package sqllease is a lease.Store on PostgreSQL (pgx v5) and on MySQL or
// MariaDB (go-sql-driver/mysql), so that several server instances share one
// lease budget through one database.
//
//	store, err := sqllease.NewPostgres(pool, sqllease.Options{}) // or NewMySQL(db, ...)
//	if err != nil { ... }
//	if err := store.Migrate(ctx); err != nil { ... } // once, from any instance
//	m, err := lease.New(35, lease.Options{Store: store})
//
// Three tables hold a store: the lease table (id, holder, resource, cost, token, created_at,
// expires_at, heartbeat_at, grace_ns, plus the deadline min(expires_at,
// heartbeat_at + grace) that the sweep and the holder rule are indexed on), a
// state table whose row per lease table is the fencing-token counter, the
// counter of units in use and the lock every grant serialises on, and the
// table of recent releases. Migrate creates them, idempotently; the names
// derive from Options.
//
// Every decision takes its time from the database clock inside the
// statement or transaction that makes it (PostgreSQL clock_timestamp(),
// MySQL UTC_TIMESTAMP(6)), never from the client. A grant is one
// transaction: lock and bump the state row, read the units and the holder's
// live lease at the time taken after the lock, decide (gate, holder,
// budget), insert, update the counter, commit; a rejection rolls back, so
// tokens have no gaps from rejections. Expired rows are excluded by the
// predicate deadline > now everywhere, before any sweep.
//
// # The counter
//
// A grant does not add up the costs of the live leases, which would take
// it longer the more leases are live. The state row keeps used, the units
// of the leases whose deadline is after its horizon, a time. A grant
// subtracts the leases whose deadline passed between the horizon and its
// now (a range of the deadline index: only the leases that expired since
// the last grant or sweep, each read once), decides on the result, and
// writes back the counter with its cost added and the horizon moved to
// now. A release subtracts its lease's cost; a sweep moves the horizon as
// a grant does, then deletes the rows expired by it (locking them FOR
// UPDATE SKIP LOCKED), so concurrent sweepers on any instance return each
// expired lease once. Grants, releases and sweeps hold the state row
// exclusively, so the counter changes in the transaction that changes the
// rows; heartbeats only move deadlines later, from after the horizon.
//
// The counter is exact while the database clock does not go back past
// the horizon (a clock stepped back more than that would let a heartbeat
// move a deadline across it unseen). Migrate counts it again from the
// rows, under the state row lock: after such a step, after rows were
// written by hand, and after an upgrade from a version without the
// counter. Instances of such a version grant and release without
// updating it: stop them, then run Migrate, before the new version grants.
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
// must not be seen expired before the commit and live after it. Grants,
// releases and sweeps hold the state row exclusively, so they wait for the
// heartbeat and count the lease. Get, List, Usage and Heartbeat are plain
// reads or row-level writes that would not wait; whenever one of them
// meets an expired-looking row, it decides again in a transaction that
// holds the state row exclusively, after every heartbeat and release in
// flight has committed. Expired rows remain only until the next sweep, so
// this slower path (a grant's cost) is taken only between a deadline and
// the next sweep. A heartbeat that waited for a sweep finds the swept
// lease gone and fails with ErrNotFound.
//
// Times are stored with microsecond precision (timestamptz, DATETIME(6) in
// UTC), as the database clock gives them, never rounded down: a lease's
// HeartbeatAt is never earlier than the moment its heartbeat was sent, so
// the local deadline of lease.KeepAlive and lease.HeartbeatResult is never
// after the store's. The MySQL store reads and writes times as
// microseconds since the epoch, so it is right whatever the DSN's loc or
// the session time_zone.
//
// # Text
//
// Holder, Resource and ids compare byte for byte: PostgreSQL text columns,
// and on MySQL/MariaDB VARBINARY(255) columns (a PAD SPACE collation such
// as utf8mb4_bin would make "alice " equal "alice"; Migrate converts the
// VARCHAR columns of a table created by an earlier version). Both dialects
// refuse a Holder or Resource with a NUL byte or invalid UTF-8, and MySQL
// one longer than 255 bytes, each with its own lease.ErrInvalid message.
//
// # What the database must provide
//
// The promises of lease.Store hold as long as the database keeps every
// commit it acknowledged: on PostgreSQL fsync = on and synchronous_commit =
// on (or remote_apply/on with synchronous_standby_names when a standby may
// be promoted); on MySQL/MariaDB InnoDB with
// innodb_flush_log_at_trx_commit = 1 and sync_binlog = 1, and
// semi-synchronous replication (rpl_semi_sync_master_wait_point =
// AFTER_SYNC) when a replica may be promoted. The store does not detect
// lost commits: after restoring a backup or promoting a replica that
// missed commits, keep grants back by hand for the longest grace in use.
//
// # Failures
//
// Errors from the database are wrapped and match lease.ErrNotApplied when
// nothing was committed (the context had ended, no connection was made,
// the failure came before COMMIT was sent, or the server reported an
// ERROR for the transaction) and lease.ErrUnknownOutcome when the commit
// may have happened (the connection broke after COMMIT was sent, or the
// server ended it with a FATAL error or a kill). A failed read matches
// lease.ErrNotApplied. A Release also records the id in a table of recent
// releases (Table + "_released", pruned by Sweep after
// a minute), so that a Release repeated after
// lease.ErrUnknownOutcome returns lease.ErrNotFound with lease.ErrReleased
// if the first took effect.
//
// Files: options.go (Options, table names), decide.go (the grant rule and
// error helpers both dialects share), postgres.go, mysql.go.
package sqllease
