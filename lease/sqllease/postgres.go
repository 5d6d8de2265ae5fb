package sqllease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/internal/storeerr"
)

// postgresStore is the PostgreSQL dialect of Store (see NewPostgres).
type postgresStore struct {
	pool *pgxpool.Pool
	n    names
	q    pgQueries
}

var _ dialect = (*postgresStore)(nil)

// pgQueries are the statements of one store, built once from its names.
type pgQueries struct {
	lock, share, excl, read, insert  string
	reclaim, recount                 string
	hasCounter, addCounter           string
	heartbeat, release, present, get string
	released                         string
	list, usage, forget, sweep       string
	migrate                          []string
}

// pgCols are the columns scanPG reads, in order.
const pgCols = "id, holder, resource, cost, token, created_at, expires_at, heartbeat_at, grace_ns, deadline"

// NewPostgres returns a Store in a PostgreSQL database, on the tables that
// opts names in the database of pool. It does not touch the database; call
// Migrate once (at start-up, from any instance) to create the tables. Any
// number of stores, in any number of processes, may share the same tables.
func NewPostgres(pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, errs.Invalid(lease.ErrInvalid, "sqllease: pool is nil")
	}
	n, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	t, st, rt := quote(n.table, `"`), quote(n.state, `"`), quote(n.released, `"`)
	q := pgQueries{
		// The row lock every grant serialises on; the grant's INSERT
		// bumps the token, so a rejection (rolled back) leaves no gap.
		lock: `SELECT token FROM ` + st + ` WHERE name = $1 FOR NO KEY UPDATE`,
		// Heartbeats hold this (see change).
		share: `SELECT 1 FROM ` + st + ` WHERE name = $1 FOR SHARE`,
		// Releases, sweeps and a call that met an expired-looking row
		// (see settled) hold this: it waits for every heartbeat and
		// release in flight.
		excl: `SELECT 1 FROM ` + st + ` WHERE name = $1 FOR NO KEY UPDATE`,
		// A statement after the lock: in READ COMMITTED it sees every
		// grant committed before, and clock_timestamp() is read after
		// the lock wait, not at transaction start. The units in use are
		// the counter less what expired since the horizon (see reclaim).
		read: `SELECT n.now, s.used - ` + pgReclaimed(t, "s.horizon", "n.now") + `,
	COALESCE((SELECT id FROM ` + t + ` WHERE holder = $1 AND deadline > n.now ORDER BY token LIMIT 1), ''),
	COALESCE((SELECT holder FROM ` + t + ` WHERE id = $2), '')
FROM (SELECT clock_timestamp() AS now) n, (SELECT used, horizon FROM ` + st + ` WHERE name = $3) s`,
		// The new row, the token and the counter, in one statement.
		insert: `WITH u AS (UPDATE ` + st + ` SET token = $5, used = $11, horizon = $6 WHERE name = $12)
INSERT INTO ` + t + ` (` + pgCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		// Moves the horizon to now, taking out of the counter the leases
		// that expired since; run under the state row lock, after it.
		reclaim: `UPDATE ` + st + ` AS s SET used = s.used - ` + pgReclaimed(t, "s.horizon", "n.now") + `, horizon = n.now
FROM (SELECT clock_timestamp() AS now) n WHERE s.name = $1`,
		// Counts the live leases from scratch; run under the state row
		// lock, after it.
		recount: `UPDATE ` + st + ` AS s SET used = COALESCE((SELECT SUM(cost) FROM ` + t + ` WHERE deadline > n.now), 0), horizon = n.now
FROM (SELECT clock_timestamp() AS now) n WHERE s.name = $1`,
		// GREATEST keeps HeartbeatAt from moving back when two heartbeats
		// of one lease race and the later clock reading commits first.
		heartbeat: `UPDATE ` + t + ` AS l SET
	heartbeat_at = GREATEST(l.heartbeat_at, n.now),
	deadline = LEAST(l.expires_at, GREATEST(l.heartbeat_at, n.now) + ((l.grace_ns + 999) / 1000) * interval '1 microsecond')
FROM (SELECT clock_timestamp() AS now) n
WHERE l.id = $1 AND l.deadline > n.now AND ($2 = '' OR l.holder = $2)
RETURNING l.id, l.holder, l.resource, l.cost, l.token, l.created_at, l.expires_at, l.heartbeat_at, l.grace_ns, l.deadline`,
		// The release is remembered in the same statement, for a retry
		// of a release whose reply was lost (lease.ErrReleased), and its
		// cost taken out of the counter.
		release: `WITH d AS (DELETE FROM ` + t + ` WHERE id = $1 AND deadline > clock_timestamp() AND ($2 = '' OR holder = $2) RETURNING ` + pgCols + `),
	r AS (INSERT INTO ` + rt + ` (id, released_at) SELECT id, clock_timestamp() FROM d
		ON CONFLICT (id) DO UPDATE SET released_at = EXCLUDED.released_at),
	u AS (UPDATE ` + st + ` AS s SET used = s.used - d.cost FROM d WHERE s.name = $3 AND d.deadline > s.horizon)
SELECT ` + pgCols + ` FROM d`,
		// The holder of the record id (live or expired, NULL if none), and
		// whether id was released recently.
		present:  `SELECT (SELECT holder FROM ` + t + ` WHERE id = $1), EXISTS (SELECT 1 FROM ` + rt + ` WHERE id = $1)`,
		released: `SELECT EXISTS (SELECT 1 FROM ` + rt + ` WHERE id = $1)`,
		get:      `SELECT ` + pgCols + `, deadline > clock_timestamp() FROM ` + t + ` WHERE id = $1`,
		// List and Usage also tell whether an expired row was there.
		list: `SELECT ` + pgCols + `, deadline > n.now FROM ` + t + ` CROSS JOIN (SELECT clock_timestamp() AS now) n ORDER BY token`,
		usage: `SELECT COALESCE(SUM(cost) FILTER (WHERE deadline > n.now), 0), COUNT(*) FILTER (WHERE deadline > n.now),
	COUNT(*) FILTER (WHERE deadline <= n.now)
FROM ` + t + ` CROSS JOIN (SELECT clock_timestamp() AS now) n`,
		// Forgets releases older than storeerr.ReleasedRetention.
		forget: `DELETE FROM ` + rt + ` WHERE released_at < clock_timestamp() - $1 * interval '1 microsecond'`,
		// Run after reclaim: the rows it deletes expired by the horizon,
		// so the counter no longer holds them. SKIP LOCKED: a row
		// another call holds is left for a later sweep.
		sweep: `DELETE FROM ` + t + ` WHERE id IN (
	SELECT id FROM ` + t + ` WHERE deadline <= (SELECT horizon FROM ` + st + ` WHERE name = $2)
	ORDER BY deadline LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING ` + pgCols,
		// State tables of earlier versions lack the counter. ALTER TABLE
		// locks the table even when it has nothing to do: ask first.
		hasCounter: `SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass($1)
	AND attname IN ('used', 'horizon') AND NOT attisdropped`,
		addCounter: `ALTER TABLE ` + st + ` ADD COLUMN IF NOT EXISTS used bigint NOT NULL DEFAULT 0,
	ADD COLUMN IF NOT EXISTS horizon timestamptz NOT NULL DEFAULT '-infinity'`,
		migrate: []string{
			`CREATE TABLE IF NOT EXISTS ` + t + ` (
	id           text        PRIMARY KEY,
	holder       text        NOT NULL,
	resource     text        NOT NULL,
	cost         integer     NOT NULL CHECK (cost > 0),
	token        bigint      NOT NULL,
	created_at   timestamptz NOT NULL,
	expires_at   timestamptz NOT NULL,
	heartbeat_at timestamptz NOT NULL,
	grace_ns     bigint      NOT NULL CHECK (grace_ns > 0),
	deadline     timestamptz NOT NULL
)`,
			`CREATE INDEX IF NOT EXISTS ` + quote(n.base+"_deadline_idx", `"`) + ` ON ` + t + ` (deadline)`,
			`CREATE INDEX IF NOT EXISTS ` + quote(n.base+"_holder_idx", `"`) + ` ON ` + t + ` (holder, deadline)`,
			`CREATE TABLE IF NOT EXISTS ` + st + ` (
	name    text        PRIMARY KEY,
	token   bigint      NOT NULL DEFAULT 0,
	used    bigint      NOT NULL DEFAULT 0,
	horizon timestamptz NOT NULL DEFAULT '-infinity'
)`,
			`CREATE TABLE IF NOT EXISTS ` + rt + ` (
	id          text        PRIMARY KEY,
	released_at timestamptz NOT NULL
)`,
			`CREATE INDEX IF NOT EXISTS ` + quote(n.base+"_released_at_idx", `"`) + ` ON ` + rt + ` (released_at)`,
		},
	}
	return &Store{d: &postgresStore{pool: pool, n: n, q: q}}, nil
}

// Migrate creates the lease table, its indexes, the state table, the table
// of recent releases (Table + "_released") and the store's state row if
// they do not exist, adds the counter of units to a state table of an
// earlier version, and counts the units of the live leases into it (see
// "The counter" in the package documentation). It is idempotent and safe to run from several
// instances at once (it holds a transaction-level advisory lock). Run it
// after every upgrade of this package: a store whose tables lack what this
// version uses fails with ErrNotMigrated.
func (s *postgresStore) Migrate(ctx context.Context) error {
	if err := checkCtx(ctx, "postgres", "migrate"); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "ttlkit/sqllease:"+s.n.key); err != nil {
			return err
		}
		for _, q := range s.q.migrate {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		var cols int
		if err := tx.QueryRow(ctx, s.q.hasCounter, quote(s.n.state, `"`)).Scan(&cols); err != nil {
			return err
		}
		if cols < 2 {
			if _, err := tx.Exec(ctx, s.q.addCounter); err != nil {
				return err
			}
		}
		// A state row created while leases exist (say, deleted by hand)
		// resumes the token counter above their tokens.
		if _, err := tx.Exec(ctx, `INSERT INTO `+quote(s.n.state, `"`)+` (name, token)
SELECT $1, COALESCE(MAX(token), 0) FROM `+quote(s.n.table, `"`)+` ON CONFLICT (name) DO NOTHING`, s.n.key); err != nil {
			return err
		}
		// The units in use, counted from the rows: right for a state row
		// just made or a table of an earlier version, and a repair for a
		// counter that rows written by hand made wrong.
		if _, err := tx.Exec(ctx, s.q.excl, s.n.key); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.q.recount, s.n.key)
		return err
	})
	if err != nil {
		return wrap(ctx, "postgres", "migrate", err)
	}
	return nil
}

// Grant implements lease.Store. It takes two round trips: BEGIN, the state
// row lock and the read are pipelined, then the INSERT (which also writes
// the token and the counter) and COMMIT (or ROLLBACK). The read does not grow with the number of live
// leases: it takes the counter of units and subtracts the leases that
// expired since the last grant or sweep, found on the deadline index.
func (s *postgresStore) Grant(ctx context.Context, a lease.GrantArgs) (lease.Lease, error) {
	if err := a.Validate(); err != nil {
		return lease.Lease{}, err
	}
	if err := validText(a, 0, "PostgreSQL"); err != nil {
		return lease.Lease{}, err
	}
	if err := checkCtx(ctx, "postgres", "grant"); err != nil {
		return lease.Lease{}, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return lease.Lease{}, storeerr.NotApplied(wrap(ctx, "postgres", "grant", err))
	}
	// A connection released inside a transaction (after an error) is
	// closed by the pool, and the server rolls the transaction back.
	defer conn.Release()

	var (
		token    int64
		now      time.Time
		used     int64
		existing string
		stored   string
	)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(s.q.lock, s.n.key).QueryRow(func(r pgx.Row) error { return r.Scan(&token) })
	b.Queue(s.q.read, a.Holder, a.ID, s.n.key).QueryRow(func(r pgx.Row) error { return r.Scan(&now, &used, &existing, &stored) })
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			err = fmt.Errorf("%w: no row %q in %s", ErrNotMigrated, s.n.key, s.n.state)
		}
		return lease.Lease{}, s.abort(ctx, conn, "grant", err)
	}
	if again, err := repeated(a, stored); err != nil {
		_, _ = conn.Exec(ctx, "ROLLBACK")
		return lease.Lease{}, err
	} else if again {
		// Read under the state row lock: no release commits meanwhile.
		l, err := scanPG(conn.QueryRow(ctx, s.q.get, a.ID), new(bool))
		if err != nil {
			return lease.Lease{}, s.abort(ctx, conn, "grant", err)
		}
		_, _ = conn.Exec(ctx, "ROLLBACK")
		return l, nil
	}
	cost, rej := decide(a, int(used), existing)
	if rej != nil {
		// If ROLLBACK fails the rejection still stands: nothing was
		// committed, and the pool drops the connection with its open
		// transaction.
		_, _ = conn.Exec(ctx, "ROLLBACK")
		return lease.Lease{}, rej
	}
	token++
	l := newLease(a, cost, uint64(token), now)
	b = &pgx.Batch{}
	b.Queue(s.q.insert, l.ID, l.Holder, l.Resource, l.Cost, token, l.CreatedAt, l.ExpiresAt,
		l.HeartbeatAt, int64(l.Grace), deadline(l), used+int64(cost), s.n.key)
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return lease.Lease{}, s.abortCommit(ctx, conn, "grant", err)
	}
	return l, nil
}

// abort wraps err, from before a COMMIT was sent, and closes conn's
// transaction if one is open and the connection still works; otherwise the
// pool discards the connection, and the server rolls the transaction back.
// Nothing was committed: the error matches lease.ErrNotApplied.
func (s *postgresStore) abort(ctx context.Context, conn *pgxpool.Conn, op string, err error) error {
	if !conn.Conn().IsClosed() && conn.Conn().PgConn().TxStatus() != 'I' && ctx.Err() == nil {
		_, _ = conn.Exec(ctx, "ROLLBACK")
	}
	return storeerr.NotApplied(wrap(ctx, "postgres", op, err))
}

// abortCommit is abort for an error of a pipeline that ended with COMMIT:
// the transaction may have committed unless the server reported an error
// (which aborts the whole transaction) or nothing was sent.
func (s *postgresStore) abortCommit(ctx context.Context, conn *pgxpool.Conn, op string, err error) error {
	if !conn.Conn().IsClosed() && conn.Conn().PgConn().TxStatus() != 'I' && ctx.Err() == nil {
		_, _ = conn.Exec(ctx, "ROLLBACK")
	}
	return afterCommit(wrap(ctx, "postgres", op, err), err)
}

// Heartbeat implements lease.Store in one round trip: BEGIN, a share lock
// on the state row, the update, an existence check and COMMIT go in one
// pipeline.
func (s *postgresStore) Heartbeat(ctx context.Context, id, holder string) (lease.Lease, error) {
	return s.change(ctx, "heartbeat", s.q.share, s.q.heartbeat, id, holder)
}

// Release implements lease.Store in one round trip: BEGIN, a lock on the
// state row, the delete (which also takes the cost out of the counter),
// an existence check and COMMIT go in one pipeline. Releases update the
// state row, so they wait for each other as grants do.
func (s *postgresStore) Release(ctx context.Context, id, holder string) (lease.Lease, error) {
	return s.change(ctx, "release", s.q.excl, s.q.release, id, holder, s.n.key)
}

// change runs query, which changes the live lease id (of holder, unless
// empty; extra are its further arguments) and returns it, in a transaction
// that holds lock on the state row (shared or not), and tells
// ErrWrongHolder, ErrExpired and ErrNotFound apart when it changed nothing.
// The lock orders heartbeats and releases with grants: a grant reads the
// units in use after every heartbeat and release before it has committed,
// and none commits between a grant's read and its commit. Without it a
// heartbeat that read its time just before a lease's deadline could commit
// after a grant had counted that lease as expired, and overfill the budget.
// BEGIN, lock, change, existence check and COMMIT go in one pipeline.
func (s *postgresStore) change(ctx context.Context, op, lock, query, id, holder string, extra ...any) (lease.Lease, error) {
	if err := checkCtx(ctx, "postgres", op); err != nil {
		return lease.Lease{}, err
	}
	if !storable(id, 0) {
		return lease.Lease{}, notFoundOrExpired(false, id)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return lease.Lease{}, storeerr.NotApplied(wrap(ctx, "postgres", op, err))
	}
	defer conn.Release()
	var (
		l              lease.Lease
		found, present bool
		released       bool
		stored         *string // the record's holder, nil if no record
	)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	args := append([]any{id, holder}, extra...)
	b.Queue(lock, s.n.key)
	b.Queue(query, args...).QueryRow(func(r pgx.Row) error {
		var err error
		l, err = scanPG(r)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	b.Queue(s.q.present, id).QueryRow(func(r pgx.Row) error { return r.Scan(&stored, &released) })
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return lease.Lease{}, s.abortCommit(ctx, conn, op, err)
	}
	present = stored != nil
	if !found && present && (holder == "" || *stored == holder) {
		// Expired, or a heartbeat sent before the deadline has not
		// committed yet: decide once every write in flight is done.
		conn.Release()
		err := s.settled(ctx, op, func(tx pgx.Tx) error {
			var err error
			l, err = scanPG(tx.QueryRow(ctx, query, args...))
			found = err == nil
			if errors.Is(err, pgx.ErrNoRows) {
				err = tx.QueryRow(ctx, s.q.present, id).Scan(&stored, &released)
				present = stored != nil
			}
			return err
		})
		if err != nil {
			return lease.Lease{}, err
		}
	}
	switch {
	case found:
		return l, nil
	case present && holder != "" && *stored != holder:
		return lease.Lease{}, fmt.Errorf("%w: %s", lease.ErrWrongHolder, id)
	case !present:
		return lease.Lease{}, notFound(id, released)
	}
	return lease.Lease{}, notFoundOrExpired(true, id)
}

// settled runs fn in a transaction that holds the state row exclusively,
// so no heartbeat, release or grant is in flight and none starts before
// it commits. A read that meets an expired-looking row decides through
// it: a heartbeat reads its time after its share lock and commits a moment
// later, and a lease whose deadline falls in that moment must not be seen
// expired first and live after. Rows are expired for good once a sweep has
// them, so this path is taken only between a deadline and the next sweep.
func (s *postgresStore) settled(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.q.excl, s.n.key); err != nil {
			return err
		}
		return fn(tx)
	})
	if err != nil && !isRuleError(err) {
		return afterCommit(wrap(ctx, "postgres", op, err), err)
	}
	return err
}

// Get implements lease.Store in one statement, or, for a lease that looks
// expired, in a transaction that waits for writes in flight (see "Calls at
// a deadline" in the package documentation).
func (s *postgresStore) Get(ctx context.Context, id string) (lease.Lease, error) {
	if err := checkCtx(ctx, "postgres", "get"); err != nil {
		return lease.Lease{}, err
	}
	if !storable(id, 0) {
		return lease.Lease{}, notFoundOrExpired(false, id)
	}
	var live bool
	l, err := scanPG(s.pool.QueryRow(ctx, s.q.get, id), &live)
	if err == nil && !live {
		err = s.settled(ctx, "get", func(tx pgx.Tx) error {
			var err error
			l, err = scanPG(tx.QueryRow(ctx, s.q.get, id), &live)
			return err
		})
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return lease.Lease{}, err
		}
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		var released bool
		if err := s.pool.QueryRow(ctx, s.q.released, id).Scan(&released); err != nil {
			return lease.Lease{}, storeerr.NotApplied(wrap(ctx, "postgres", "get", err))
		}
		return lease.Lease{}, notFound(id, released)
	case err != nil:
		return lease.Lease{}, storeerr.NotApplied(wrap(ctx, "postgres", "get", err))
	case !live:
		return lease.Lease{}, notFoundOrExpired(true, id)
	}
	return l, nil
}

// List implements lease.Store in one statement, or, when an expired row is
// still there, in a transaction that waits for writes in flight (see "Calls at a
// deadline" in the package documentation).
func (s *postgresStore) List(ctx context.Context) ([]lease.Lease, error) {
	if err := checkCtx(ctx, "postgres", "list"); err != nil {
		return nil, err
	}
	out, expired, err := s.list(ctx, s.pool)
	if err != nil {
		return nil, storeerr.NotApplied(wrap(ctx, "postgres", "list", err))
	}
	if expired {
		err = s.settled(ctx, "list", func(tx pgx.Tx) error {
			var err error
			out, _, err = s.list(ctx, tx)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// list returns the live leases and whether any expired row was there.
func (s *postgresStore) list(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) (out []lease.Lease, expired bool, err error) {
	rows, err := q.Query(ctx, s.q.list)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var live bool
		l, err := scanPG(rows, &live)
		if err != nil {
			return nil, false, err
		}
		if !live {
			expired = true
			continue
		}
		out = append(out, l)
	}
	return out, expired, rows.Err()
}

// Usage implements lease.Store in one statement, or, when an expired row
// is still there, in a transaction that waits for writes in flight (see "Calls at a
// deadline" in the package documentation).
func (s *postgresStore) Usage(ctx context.Context) (units, leases int, err error) {
	if err := checkCtx(ctx, "postgres", "usage"); err != nil {
		return 0, 0, err
	}
	var u, n, expired int64
	if err := s.pool.QueryRow(ctx, s.q.usage).Scan(&u, &n, &expired); err != nil {
		return 0, 0, storeerr.NotApplied(wrap(ctx, "postgres", "usage", err))
	}
	if expired > 0 {
		err := s.settled(ctx, "usage", func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, s.q.usage).Scan(&u, &n, &expired)
		})
		if err != nil {
			return 0, 0, err
		}
	}
	return int(u), int(n), nil
}

// Sweep implements lease.Store in one round trip: BEGIN, the state row
// lock, the counter's reclaim (see reclaim), the forgetting of old
// releases, the DELETE of up to limit rows expired by the new horizon
// (locked with FOR UPDATE SKIP LOCKED, RETURNING them) and COMMIT go in
// one pipeline.
func (s *postgresStore) Sweep(ctx context.Context, limit int) ([]lease.Lease, error) {
	if limit <= 0 {
		return nil, errs.Invalid(lease.ErrInvalid, "sqllease: sweep limit (%d) must be > 0", limit)
	}
	if err := checkCtx(ctx, "postgres", "sweep"); err != nil {
		return nil, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, storeerr.NotApplied(wrap(ctx, "postgres", "sweep", err))
	}
	defer conn.Release()
	var out []lease.Lease
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(s.q.excl, s.n.key).QueryRow(func(r pgx.Row) error { var one int; return r.Scan(&one) })
	b.Queue(s.q.reclaim, s.n.key)
	b.Queue(s.q.forget, storeerr.ReleasedRetention.Microseconds())
	b.Queue(s.q.sweep, limit, s.n.key).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			l, err := scanPG(rows)
			if err != nil {
				return err
			}
			out = append(out, l)
		}
		return rows.Err()
	})
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			err = fmt.Errorf("%w: no row %q in %s", ErrNotMigrated, s.n.key, s.n.state)
			return nil, s.abort(ctx, conn, "sweep", err)
		}
		// A sweep whose result was cut off may have deleted rows it
		// could not return: the caller sees an error (ambiguous).
		return nil, s.abortCommit(ctx, conn, "sweep", err)
	}
	return out, nil
}

// pgReclaimed is the SQL for the units of the leases whose deadline lies
// between the times from and to: expired at to but counted at from (less
// the reverse, should the clock have gone back). The deadline index finds
// them, so it reads only the leases that expired since the last grant or
// sweep, each once.
//
// The state row keeps used, the units of the leases whose deadline is
// after horizon. Grants and releases change both in the transaction that
// changes the rows, under the state row lock; heartbeats only move
// deadlines later, from after their time, which is after the horizon. So
// used − pgReclaimed(horizon, now), read under the lock, is the units of
// the leases live at now.
func pgReclaimed(t, from, to string) string {
	return `(COALESCE((SELECT SUM(cost) FROM ` + t + ` WHERE deadline > ` + from + ` AND deadline <= ` + to + `), 0)
	- COALESCE((SELECT SUM(cost) FROM ` + t + ` WHERE deadline > ` + to + ` AND deadline <= ` + from + `), 0))`
}

// scanPG scans the pgCols of one row, then extra.
func scanPG(r pgx.Row, extra ...any) (lease.Lease, error) {
	var (
		l        lease.Lease
		token    int64
		graceNS  int64
		deadline time.Time
	)
	dest := append([]any{&l.ID, &l.Holder, &l.Resource, &l.Cost, &token, &l.CreatedAt, &l.ExpiresAt,
		&l.HeartbeatAt, &graceNS, &deadline}, extra...)
	if err := r.Scan(dest...); err != nil {
		return lease.Lease{}, err
	}
	l.Token, l.Grace = uint64(token), time.Duration(graceNS)
	l.CreatedAt, l.ExpiresAt, l.HeartbeatAt = l.CreatedAt.UTC(), l.ExpiresAt.UTC(), l.HeartbeatAt.UTC()
	return l, nil
}
