package sqllease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/internal/storeerr"
)

// mysqlStore is the MySQL/MariaDB dialect of Store (see NewMySQL).
type mysqlStore struct {
	db *sql.DB
	n  names
	q  myQueries
}

var _ dialect = (*mysqlStore)(nil)

type myQueries struct {
	lock, share, excl, read, insert       string
	count, reclaimed, reclaim, subtract   string
	live, hasCounter, addCounter          string
	padded, unpad                         string
	lockRow, heartbeat, release, get      string
	list, usage, sweepSelect, sweepDelete string
	remember, released, forget            string
	migrate                               []string
}

// Reading and writing DATETIME(6) as integer microseconds since the epoch.
const (
	myEpoch = `'1970-01-01 00:00:00'`
	myNow   = `TIMESTAMPDIFF(MICROSECOND, ` + myEpoch + `, UTC_TIMESTAMP(6))`
	myTime  = `TIMESTAMPADD(MICROSECOND, ?, ` + myEpoch + `)`
)

func us(col string) string { return `TIMESTAMPDIFF(MICROSECOND, ` + myEpoch + `, ` + col + `)` }

// myCols are the columns scanMy reads, in order.
var myCols = `id, holder, resource, cost, token, ` + us("created_at") + `, ` + us("expires_at") + `, ` +
	us("heartbeat_at") + `, grace_ns, ` + us("deadline")

// maxMyField is the length limit in bytes of id, holder and resource in the
// MySQL schema (VARBINARY(255)); longer values are rejected as invalid.
// The columns are binary so that values compare byte for byte: a PAD SPACE
// collation (utf8mb4_bin, utf8mb4_general_ci) would make "alice " equal
// "alice", and utf8mb4_0900_bin, which does not pad, exists only on MySQL 8.
const maxMyField = 255

// NewMySQL returns a Store in a MySQL (8.0+) or MariaDB (10.6+) database,
// InnoDB tables, on the tables that opts names in the database of db. It
// does not touch the database; call Migrate once (at start-up, from any
// instance) to create the tables. Any number of stores, in any number of
// processes, may share the same tables.
//
// Times are read and written as microseconds since the epoch and stored as
// UTC DATETIME(6), taken from UTC_TIMESTAMP(6): the DSN's parseTime and loc
// and the session time_zone do not matter.
//
// Every operation is a few statements with arguments; with the driver's
// default each is a prepare and an execute round trip. interpolateParams=true
// in the DSN sends each in one, about halving the time of a grant.
func NewMySQL(db *sql.DB, opts Options) (*Store, error) {
	if db == nil {
		return nil, errs.Invalid(lease.ErrInvalid, "sqllease: db is nil")
	}
	n, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	t, st, rt := quote(n.table, "`"), quote(n.state, "`"), quote(n.released, "`")
	q := myQueries{
		// LAST_INSERT_ID(expr) hands the new token back in the OK packet:
		// one statement locks the row every grant serialises on and bumps
		// the counter; a rejection rolls it back.
		lock: `UPDATE ` + st + ` SET token = LAST_INSERT_ID(token + 1) WHERE name = ?`,
		// Heartbeats hold this (see lockLive).
		share: `SELECT 1 FROM ` + st + ` WHERE name = ? LOCK IN SHARE MODE`,
		// Releases, sweeps and a call that met an expired-looking row
		// (see settled) hold this: it waits for every heartbeat and
		// release in flight.
		excl: `SELECT 1 FROM ` + st + ` WHERE name = ? FOR UPDATE`,
		// Run after the lock in READ COMMITTED, so it sees every grant
		// committed before; UTC_TIMESTAMP(6) is this statement's time,
		// after the lock wait. The units in use are the counter less
		// what expired since the horizon (see pgReclaimed).
		read: `SELECT ` + us("n.now") + `, s.used - ` + myReclaimed(t, "s.horizon", "n.now") + `,
	COALESCE((SELECT id FROM ` + t + ` WHERE holder = ? AND deadline > n.now ORDER BY token LIMIT 1), ''),
	COALESCE((SELECT holder FROM ` + t + ` WHERE id = ?), '')
FROM (SELECT UTC_TIMESTAMP(6) AS now) n, (SELECT used, horizon FROM ` + st + ` WHERE name = ?) s`,
		count: `UPDATE ` + st + ` SET used = ?, horizon = ` + myTime + ` WHERE name = ?`,
		// What expired since the horizon, for a sweep; then reclaim
		// moves the horizon to that now.
		reclaimed: `SELECT ` + us("n.now") + `, ` + myReclaimed(t, "s.horizon", "n.now") + `
FROM (SELECT UTC_TIMESTAMP(6) AS now) n, (SELECT horizon FROM ` + st + ` WHERE name = ?) s`,
		reclaim:  `UPDATE ` + st + ` SET used = used - ?, horizon = ` + myTime + ` WHERE name = ?`,
		subtract: `UPDATE ` + st + ` SET used = used - ? WHERE name = ? AND horizon < ` + myTime,
		// The units of the leases live now, for Migrate.
		live: `SELECT ` + us("n.now") + `, COALESCE((SELECT SUM(cost) FROM ` + t + ` WHERE deadline > n.now), 0)
FROM (SELECT UTC_TIMESTAMP(6) AS now) n`,
		// State tables of earlier versions lack the counter.
		hasCounter: `SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ` + schemaOf(n.state) + `
	AND TABLE_NAME = ? AND COLUMN_NAME IN ('used', 'horizon')`,
		addCounter: `ALTER TABLE ` + st + ` ADD COLUMN used BIGINT NOT NULL DEFAULT 0,
	ADD COLUMN horizon DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00'`,
		insert: `INSERT INTO ` + t + ` (id, holder, resource, cost, token, created_at, expires_at, heartbeat_at, grace_ns, deadline)
VALUES (?, ?, ?, ?, ?, ` + myTime + `, ` + myTime + `, ` + myTime + `, ?, ` + myTime + `)`,
		lockRow:   `SELECT ` + myCols + `, ` + myNow + ` FROM ` + t + ` WHERE id = ? FOR UPDATE`,
		heartbeat: `UPDATE ` + t + ` SET heartbeat_at = ` + myTime + `, deadline = ` + myTime + ` WHERE id = ?`,
		release:   `DELETE FROM ` + t + ` WHERE id = ?`,
		get:       `SELECT ` + myCols + `, ` + myNow + ` FROM ` + t + ` WHERE id = ?`,
		// List and Usage also tell whether an expired row was there.
		list: `SELECT ` + myCols + `, ` + myNow + ` FROM ` + t + ` ORDER BY token`,
		usage: `SELECT COALESCE(SUM(CASE WHEN l.deadline > n.now THEN l.cost END), 0),
	COALESCE(SUM(l.deadline > n.now), 0), COALESCE(SUM(l.deadline <= n.now), 0)
FROM ` + t + ` l CROSS JOIN (SELECT UTC_TIMESTAMP(6) AS now) n`,
		// Run after reclaim, with its horizon: the rows expired by it are
		// no longer in the counter.
		sweepSelect: `SELECT ` + myCols + ` FROM ` + t + ` WHERE deadline <= ` + myTime + ` ORDER BY deadline LIMIT ? FOR UPDATE SKIP LOCKED`,
		sweepDelete: `DELETE FROM ` + t + ` WHERE id IN `,
		// Tables created before the columns were binary: their text
		// columns (utf8mb4_bin pads with spaces) become VARBINARY.
		padded: `SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ` + schemaOf(n.table) + `
	AND TABLE_NAME = ? AND COLUMN_NAME IN ('id', 'holder', 'resource') AND DATA_TYPE <> 'varbinary'`,
		unpad: `ALTER TABLE ` + t + ` MODIFY id VARBINARY(255) NOT NULL, MODIFY holder VARBINARY(255) NOT NULL,
	MODIFY resource VARBINARY(255) NOT NULL`,
		// Releases are remembered for a retry of a release whose reply
		// was lost (lease.ErrReleased), and forgotten by sweeps.
		remember: `INSERT INTO ` + rt + ` (id, released_at) VALUES (?, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE released_at = VALUES(released_at)`,
		released: `SELECT COUNT(*) FROM ` + rt + ` WHERE id = ?`,
		forget:   `DELETE FROM ` + rt + ` WHERE released_at < TIMESTAMPADD(MICROSECOND, -?, UTC_TIMESTAMP(6))`,
		migrate: []string{
			`CREATE TABLE IF NOT EXISTS ` + t + ` (
	id           VARBINARY(255) NOT NULL,
	holder       VARBINARY(255) NOT NULL,
	resource     VARBINARY(255) NOT NULL,
	cost         INT          NOT NULL,
	token        BIGINT UNSIGNED NOT NULL,
	created_at   DATETIME(6)  NOT NULL,
	expires_at   DATETIME(6)  NOT NULL,
	heartbeat_at DATETIME(6)  NOT NULL,
	grace_ns     BIGINT       NOT NULL,
	deadline     DATETIME(6)  NOT NULL,
	PRIMARY KEY (id),
	KEY ` + quote(n.base+"_deadline_idx", "`") + ` (deadline),
	KEY ` + quote(n.base+"_holder_idx", "`") + ` (holder, deadline)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
			`CREATE TABLE IF NOT EXISTS ` + st + ` (
	name    VARCHAR(191) NOT NULL,
	token   BIGINT UNSIGNED NOT NULL DEFAULT 0,
	used    BIGINT NOT NULL DEFAULT 0,
	horizon DATETIME(6) NOT NULL DEFAULT '1970-01-01 00:00:00',
	PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`,
			`CREATE TABLE IF NOT EXISTS ` + rt + ` (
	id          VARBINARY(255) NOT NULL,
	released_at DATETIME(6)    NOT NULL,
	PRIMARY KEY (id),
	KEY ` + quote(n.base+"_released_at_idx", "`") + ` (released_at)
) ENGINE=InnoDB`,
			// A state row created while leases exist (say, deleted by
			// hand) resumes the counter above their tokens.
			`INSERT IGNORE INTO ` + st + ` (name, token) SELECT ?, COALESCE(MAX(token), 0) FROM ` + t,
		},
	}
	return &Store{d: &mysqlStore{db: db, n: n, q: q}}, nil
}

// Migrate creates the lease table with its indexes, the state table, the
// table of recent releases (Table + "_released") and the store's state
// row if they do not exist, adds the counter of units to a state table of
// an earlier version and counts the units of the live leases into it (see
// "The counter" in the package documentation), and turns the text columns of a lease table
// created by an earlier version (VARCHAR with the PAD SPACE collation
// utf8mb4_bin, under which "alice " equals "alice") into VARBINARY. It is
// idempotent. Run it after every upgrade of
// this package: a store whose tables lack what this version uses fails with
// ErrNotMigrated.
func (s *mysqlStore) Migrate(ctx context.Context) error {
	if err := checkCtx(ctx, "mysql", "migrate"); err != nil {
		return err
	}
	for i, q := range s.q.migrate {
		var args []any
		if i == len(s.q.migrate)-1 {
			args = []any{s.n.key}
		}
		if _, err := s.db.ExecContext(ctx, q, args...); err != nil {
			return wrap(ctx, "mysql", "migrate", err)
		}
	}
	var cols int
	if err := s.db.QueryRowContext(ctx, s.q.hasCounter, baseOf(s.n.state)).Scan(&cols); err != nil {
		return wrap(ctx, "mysql", "migrate", err)
	}
	if cols < 2 {
		// Concurrent Migrates may both add the columns; the second
		// fails with "duplicate column", which is done.
		var me *mysql.MySQLError
		if _, err := s.db.ExecContext(ctx, s.q.addCounter); err != nil && !(errors.As(err, &me) && me.Number == 1060) {
			return wrap(ctx, "mysql", "migrate: counter", err)
		}
	}
	// The units in use, counted from the rows: right for a state row just
	// made or a table of an earlier version, and a repair for a counter
	// that rows written by hand made wrong.
	err := s.inTx(ctx, "migrate", func(tx *sql.Tx) error {
		var one, nowUS, used int64
		if err := tx.QueryRowContext(ctx, s.q.excl, s.n.key).Scan(&one); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, s.q.live).Scan(&nowUS, &used); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, s.q.count, used, nowUS, s.n.key)
		return err
	})
	if err != nil {
		return err
	}
	var padded int
	if err := s.db.QueryRowContext(ctx, s.q.padded, s.n.base).Scan(&padded); err != nil {
		return wrap(ctx, "mysql", "migrate", err)
	}
	if padded > 0 {
		// Values were limited to 255 bytes, so they fit; the table is
		// rebuilt once. Concurrent Migrates run the same ALTER twice,
		// which is harmless.
		if _, err := s.db.ExecContext(ctx, s.q.unpad); err != nil {
			return wrap(ctx, "mysql", "migrate: binary columns", err)
		}
	}
	return nil
}

// baseOf returns a validated name without its qualifier.
func baseOf(name string) string { return name[strings.LastIndexByte(name, '.')+1:] }

// schemaOf returns the SQL expression for the schema of a validated table
// name: its qualifier, quoted, or DATABASE().
func schemaOf(table string) string {
	if i := strings.IndexByte(table, '.'); i >= 0 {
		return "'" + table[:i] + "'"
	}
	return "DATABASE()"
}

// inTx runs fn in a READ COMMITTED transaction (no gap locks; every
// statement reads what was committed before it) and commits unless fn
// returns an error. A deadlock or lock wait timeout rolls the whole
// transaction back, so it is retried a few times. An error before COMMIT
// was sent matches lease.ErrNotApplied (the transaction rolls back, on the
// server if the connection is gone); an error of the COMMIT itself is
// classified by afterCommit.
func (s *mysqlStore) inTx(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	if err := checkCtx(ctx, "mysql", op); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return storeerr.NotApplied(wrap(ctx, "mysql", op, err))
		}
		committing := false
		err = fn(tx)
		if err == nil {
			committing = true
			err = tx.Commit()
			if err == nil {
				return nil
			}
		} else {
			_ = tx.Rollback()
		}
		var me *mysql.MySQLError
		if errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205) && attempt < 3 && ctx.Err() == nil {
			continue
		}
		switch {
		case isRuleError(err):
			return err
		case committing:
			return afterCommit(wrap(ctx, "mysql", op, err), err)
		}
		return storeerr.NotApplied(wrap(ctx, "mysql", op, err))
	}
}

// isRuleError reports whether err is a rule outcome (changed nothing) that
// is returned as is.
func isRuleError(err error) bool {
	var re *lease.RejectedError
	return errors.As(err, &re) || errors.Is(err, lease.ErrNotFound) || errors.Is(err, lease.ErrExpired) ||
		errors.Is(err, lease.ErrInvalid) || errors.Is(err, lease.ErrWrongHolder)
}

// Grant implements lease.Store in one transaction: lock and bump the state
// row, read units and the holder's live lease, decide, insert, update the
// counter, commit. The units are the counter less the leases that expired
// since the last grant or sweep (see pgReclaimed): the read does not grow
// with the number of live leases.
func (s *mysqlStore) Grant(ctx context.Context, a lease.GrantArgs) (lease.Lease, error) {
	if err := a.Validate(); err != nil {
		return lease.Lease{}, err
	}
	if err := validText(a, maxMyField, "MySQL"); err != nil {
		return lease.Lease{}, err
	}
	var l lease.Lease
	err := s.inTx(ctx, "grant", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, s.q.lock, s.n.key)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("%w: no row %q in %s", ErrNotMigrated, s.n.key, s.n.state)
		}
		token, err := res.LastInsertId()
		if err != nil {
			return err
		}
		var (
			nowUS, used int64
			existing    string
			stored      string
		)
		if err := tx.QueryRowContext(ctx, s.q.read, a.Holder, a.ID, s.n.key).Scan(&nowUS, &used, &existing, &stored); err != nil {
			return err
		}
		if again, err := repeated(a, stored); err != nil {
			return err
		} else if again {
			// Read under the state row lock: no release commits meanwhile.
			if l, _, err = scanMy(tx.QueryRowContext(ctx, s.q.get, a.ID), &nowUS); err != nil {
				return err
			}
			return errRepeat // roll back the token bump
		}
		cost, err := decide(a, int(used), existing)
		if err != nil {
			return err
		}
		l = newLease(a, cost, uint64(token), time.UnixMicro(nowUS))
		_, err = tx.ExecContext(ctx, s.q.insert, l.ID, l.Holder, l.Resource, l.Cost, l.Token,
			l.CreatedAt.UnixMicro(), l.ExpiresAt.UnixMicro(), l.HeartbeatAt.UnixMicro(), int64(l.Grace),
			deadline(l).UnixMicro())
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, s.q.count, used+int64(cost), nowUS, s.n.key)
		return err
	})
	if errors.Is(err, errRepeat) {
		return l, nil
	}
	if err != nil {
		return lease.Lease{}, err
	}
	return l, nil
}

// lockLive takes a share lock on the state row, locks the row of id and
// returns the lease if it is live at the database's now and, unless holder
// is empty, holder's; else ErrWrongHolder, ErrExpired or ErrNotFound. The share lock orders heartbeats and releases with grants: a
// grant reads the units in use after every heartbeat and release before it
// has committed, and none commits between a grant's read and its commit.
// Without it a heartbeat that read its time just before a lease's deadline
// could commit after a grant had counted that lease as expired, and overfill
// the budget.
//
// With exclusive set it takes the state row exclusively instead (see
// settled), for a second look at a lease that looked expired.
func (s *mysqlStore) lockLive(ctx context.Context, tx *sql.Tx, id, holder string, exclusive bool) (lease.Lease, time.Time, error) {
	var one, nowUS int64
	lock := s.q.share
	if exclusive {
		lock = s.q.excl
	}
	if err := tx.QueryRowContext(ctx, lock, s.n.key).Scan(&one); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return lease.Lease{}, time.Time{}, err
	}
	l, dl, err := scanMy(tx.QueryRowContext(ctx, s.q.lockRow, id), &nowUS)
	if errors.Is(err, sql.ErrNoRows) {
		released, err := s.wasReleased(ctx, tx, id)
		if err != nil {
			return l, time.Time{}, err
		}
		return l, time.Time{}, notFound(id, released)
	}
	if err != nil {
		return l, time.Time{}, err
	}
	if holder != "" && l.Holder != holder {
		return l, time.Time{}, fmt.Errorf("%w: %s", lease.ErrWrongHolder, id)
	}
	now := time.UnixMicro(nowUS).UTC()
	if !dl.After(now) {
		return l, now, notFoundOrExpired(true, id)
	}
	return l, now, nil
}

// Heartbeat implements lease.Store in one transaction, and a second one,
// holding the state row exclusively, if the lease looked expired (see "Calls at a
// deadline" in the package documentation).
func (s *mysqlStore) Heartbeat(ctx context.Context, id, holder string) (lease.Lease, error) {
	if !storable(id, maxMyField) {
		return lease.Lease{}, notFoundOrExpired(false, id)
	}
	l, err := s.heartbeat(ctx, id, holder, false)
	if errors.Is(err, lease.ErrExpired) {
		l, err = s.heartbeat(ctx, id, holder, true)
	}
	return l, err
}

func (s *mysqlStore) heartbeat(ctx context.Context, id, holder string, exclusive bool) (lease.Lease, error) {
	var l lease.Lease
	err := s.inTx(ctx, "heartbeat", func(tx *sql.Tx) error {
		cur, now, err := s.lockLive(ctx, tx, id, holder, exclusive)
		if err != nil {
			return err
		}
		// Never move HeartbeatAt back (now was read before the lock wait).
		if now.After(cur.HeartbeatAt) {
			cur.HeartbeatAt = now
		}
		_, err = tx.ExecContext(ctx, s.q.heartbeat, cur.HeartbeatAt.UnixMicro(), deadline(cur).UnixMicro(), id)
		l = cur
		return err
	})
	if err != nil {
		return lease.Lease{}, err
	}
	return l, nil
}

// Release implements lease.Store in one transaction that holds the state
// row exclusively (it updates the counter, so releases wait for each other
// as grants do; and a lease that looks expired under that lock is).
func (s *mysqlStore) Release(ctx context.Context, id, holder string) (lease.Lease, error) {
	if !storable(id, maxMyField) {
		return lease.Lease{}, notFoundOrExpired(false, id)
	}
	var l lease.Lease
	err := s.inTx(ctx, "release", func(tx *sql.Tx) error {
		cur, _, err := s.lockLive(ctx, tx, id, holder, true)
		if err != nil {
			return err
		}
		if _, err = tx.ExecContext(ctx, s.q.release, id); err != nil {
			return err
		}
		if _, err = tx.ExecContext(ctx, s.q.subtract, cur.Cost, s.n.key, deadline(cur).UnixMicro()); err != nil {
			return err
		}
		l = cur
		_, err = tx.ExecContext(ctx, s.q.remember, id)
		return err
	})
	if err != nil {
		return lease.Lease{}, err
	}
	return l, nil
}

// wasReleased reports whether id was released recently.
func (s *mysqlStore) wasReleased(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, id string) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, s.q.released, id).Scan(&n)
	return n > 0, err
}

// settled runs fn in a transaction that holds the state row exclusively,
// so no heartbeat, release or grant is in flight and none starts before it
// commits. A call that meets an expired-looking row decides through it: a
// heartbeat reads its time after its share lock and commits a moment later,
// and a lease whose deadline falls in that moment must not be seen expired
// first and live after. Rows are expired for good once a sweep has them,
// so this path is taken only between a deadline and the next sweep.
func (s *mysqlStore) settled(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	return s.inTx(ctx, op, func(tx *sql.Tx) error {
		var one int64
		if err := tx.QueryRowContext(ctx, s.q.excl, s.n.key).Scan(&one); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		return fn(tx)
	})
}

// Get implements lease.Store in one statement, or, for a lease that looks
// expired, in a transaction that waits for writes in flight (see "Calls at
// a deadline" in the package documentation).
func (s *mysqlStore) Get(ctx context.Context, id string) (lease.Lease, error) {
	if err := checkCtx(ctx, "mysql", "get"); err != nil {
		return lease.Lease{}, err
	}
	if !storable(id, maxMyField) {
		return lease.Lease{}, notFoundOrExpired(false, id)
	}
	var nowUS int64
	l, dl, err := scanMy(s.db.QueryRowContext(ctx, s.q.get, id), &nowUS)
	if err == nil && !dl.After(time.UnixMicro(nowUS)) {
		err = s.settled(ctx, "get", func(tx *sql.Tx) error {
			var err error
			l, dl, err = scanMy(tx.QueryRowContext(ctx, s.q.get, id), &nowUS)
			return err
		})
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return lease.Lease{}, err
		}
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		released, err := s.wasReleased(ctx, s.db, id)
		if err != nil {
			return lease.Lease{}, storeerr.NotApplied(wrap(ctx, "mysql", "get", err))
		}
		return lease.Lease{}, notFound(id, released)
	case err != nil:
		return lease.Lease{}, storeerr.NotApplied(wrap(ctx, "mysql", "get", err))
	case !dl.After(time.UnixMicro(nowUS)):
		return lease.Lease{}, notFoundOrExpired(true, id)
	}
	return l, nil
}

// List implements lease.Store in one statement, or, when an expired row is
// still there, in a transaction that waits for writes in flight (see "Calls at a
// deadline" in the package documentation).
func (s *mysqlStore) List(ctx context.Context) ([]lease.Lease, error) {
	if err := checkCtx(ctx, "mysql", "list"); err != nil {
		return nil, err
	}
	out, expired, err := s.list(ctx, s.db)
	if err != nil {
		return nil, storeerr.NotApplied(wrap(ctx, "mysql", "list", err))
	}
	if expired {
		err = s.settled(ctx, "list", func(tx *sql.Tx) error {
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
func (s *mysqlStore) list(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) (out []lease.Lease, expired bool, err error) {
	rows, err := q.QueryContext(ctx, s.q.list)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var nowUS int64
		l, dl, err := scanMy(rows, &nowUS)
		if err != nil {
			return nil, false, err
		}
		if !dl.After(time.UnixMicro(nowUS)) {
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
func (s *mysqlStore) Usage(ctx context.Context) (units, leases int, err error) {
	if err := checkCtx(ctx, "mysql", "usage"); err != nil {
		return 0, 0, err
	}
	var u, n, expired int64
	if err := s.db.QueryRowContext(ctx, s.q.usage).Scan(&u, &n, &expired); err != nil {
		return 0, 0, storeerr.NotApplied(wrap(ctx, "mysql", "usage", err))
	}
	if expired > 0 {
		err := s.settled(ctx, "usage", func(tx *sql.Tx) error {
			return tx.QueryRowContext(ctx, s.q.usage).Scan(&u, &n, &expired)
		})
		if err != nil {
			return 0, 0, err
		}
	}
	return int(u), int(n), nil
}

// Sweep implements lease.Store in one transaction: lock the state row,
// take the leases expired since the horizon out of the counter and move
// the horizon to now (see pgReclaimed), lock up to limit rows expired by
// then with FOR UPDATE SKIP LOCKED, delete them, commit.
func (s *mysqlStore) Sweep(ctx context.Context, limit int) ([]lease.Lease, error) {
	if limit <= 0 {
		return nil, errs.Invalid(lease.ErrInvalid, "sqllease: sweep limit (%d) must be > 0", limit)
	}
	var out []lease.Lease
	err := s.inTx(ctx, "sweep", func(tx *sql.Tx) error {
		var one, nowUS, reclaimed int64
		if err := tx.QueryRowContext(ctx, s.q.excl, s.n.key).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: no row %q in %s", ErrNotMigrated, s.n.key, s.n.state)
		} else if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q.forget, storeerr.ReleasedRetention.Microseconds()); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, s.q.reclaimed, s.n.key).Scan(&nowUS, &reclaimed); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q.reclaim, reclaimed, nowUS, s.n.key); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, s.q.sweepSelect, nowUS, limit)
		if err != nil {
			return err
		}
		if out, err = collectMy(rows); err != nil || len(out) == 0 {
			return err
		}
		args := make([]any, len(out))
		for i, l := range out {
			args[i] = l.ID
		}
		in := "(?" + strings.Repeat(", ?", len(out)-1) + ")"
		_, err = tx.ExecContext(ctx, s.q.sweepDelete+in, args...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func collectMy(rows *sql.Rows) ([]lease.Lease, error) {
	defer rows.Close()
	var out []lease.Lease
	for rows.Next() {
		l, _, err := scanMy(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// myReclaimed is pgReclaimed in MySQL. The second range is read only when
// the clock went back: MariaDB scans it from its lower bound (all the live
// leases) rather than seeing at once that it is empty.
func myReclaimed(t, from, to string) string {
	return `(COALESCE((SELECT SUM(cost) FROM ` + t + ` WHERE deadline > ` + from + ` AND deadline <= ` + to + `), 0)
	- CASE WHEN ` + from + ` > ` + to + ` THEN COALESCE((SELECT SUM(cost) FROM ` + t + ` WHERE deadline > ` + to + ` AND deadline <= ` + from + `), 0) ELSE 0 END)`
}

// scanMy scans the myCols of one row, then extra, and returns the lease and
// its stored deadline.
func scanMy(r interface{ Scan(...any) error }, extra ...any) (lease.Lease, time.Time, error) {
	var (
		l                                    lease.Lease
		created, expires, hb, graceNS, dline int64
	)
	dest := append([]any{&l.ID, &l.Holder, &l.Resource, &l.Cost, &l.Token, &created, &expires, &hb, &graceNS, &dline}, extra...)
	if err := r.Scan(dest...); err != nil {
		return lease.Lease{}, time.Time{}, err
	}
	l.CreatedAt, l.ExpiresAt, l.HeartbeatAt = time.UnixMicro(created).UTC(), time.UnixMicro(expires).UTC(), time.UnixMicro(hb).UTC()
	l.Grace = time.Duration(graceNS)
	return l, time.UnixMicro(dline).UTC(), nil
}
