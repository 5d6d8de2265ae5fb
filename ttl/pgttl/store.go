package pgttl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/internal/entitycheck"
)

// Store is a ttl.Store on a PostgreSQL table (see the package's
// documentation for its columns). Add and Apply are one statement each
// (Migrate: one transaction), decided with the server's now(), so any
// number of Stores on the same table, in any number of processes, act as
// one. A Store is safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	table   string // quoted
	base    string // bare name, for index names
	lastCol string // the column of the last activity
	noOpLit string // Options.NoOperation as an SQL literal

	mergeSQL string
	applySQL [3]string // by ttl.Since
}

var _ ttl.Store = (*Store)(nil)

// New returns a Store on opts.Table through pool. It does not contact the
// server; call Migrate once to create the table.
func New(pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, errs.Invalid(ttl.ErrInvalid, "pgttl: pool is nil")
	}
	table, base, err := opts.table()
	if err != nil {
		return nil, err
	}
	last, err := opts.lastActivity()
	if err != nil {
		return nil, err
	}
	_, noOpLit, err := opts.noOperation()
	if err != nil {
		return nil, err
	}
	s := &Store{pool: pool, table: table, base: base, lastCol: last, noOpLit: noOpLit}
	// sinceColumn maps ttl.Since to its column.
	sinceColumn := [...]string{
		ttl.SinceLastActivity: last,
		ttl.SincePhaseChanged: "phase_changed_at",
		ttl.SinceCreated:      "created_at",
	}
	// The batch arrives deduplicated (one row per id, so the UPDATE never
	// meets a row twice) and sorted by id, so that concurrent batches tend
	// to lock rows in one order. Rows whose time would not grow are not
	// written at all. t.id = ANY($1) gives the planner an index condition
	// on the primary key: without it, a batch of a thousand makes it hash
	// the whole table (40 ms at 100,000 rows, against 5 ms of lookups).
	s.mergeSQL = `UPDATE ` + table + ` AS t
SET ` + last + ` = GREATEST(t.` + last + `, a.at)
FROM unnest($1::text[], $2::timestamptz[]) AS a(id, at)
WHERE t.id = ANY($1::text[]) AND t.id = a.id AND a.at > t.` + last
	for since, col := range sinceColumn {
		cond := col + ` < now() - make_interval(secs => $3)`
		if ttl.Since(since) == ttl.SinceLastActivity {
			// The bucket is never after the last activity, so this only
			// narrows the rows through the index; the exact test follows.
			cond = `last_activity_bucket < now() - make_interval(secs => $3)
  AND ` + cond
		}
		s.applySQL[since] = `UPDATE ` + table + `
SET desired_state = $1
WHERE phase = $2 AND operation = ` + noOpLit + ` AND deleted_at IS NULL AND desired_state <> $1
  AND ` + cond + `
RETURNING id, ` + last + `, now()`
	}
	return s, nil
}

// Migrate creates the table and its indexes if they do not exist. It is
// safe to call from several processes at once: a transaction-scoped
// advisory lock on the table name serialises them.
//
// The partial indexes cover exactly the rows rules may change (no
// operation, not deleted), one per timestamp a rule can measure from, so a
// rule reads the entities it expires rather than the whole table: (phase,
// phase_changed_at), (phase, created_at) and (phase,
// last_activity_bucket). The last is last_activity_at rounded down to the
// minute, a generated column: the sync writes last_activity_at for every
// active entity on every tick, and an index on it would make each of those
// writes a new row version in every index of the table. Its bucket changes
// at most once a minute, so most syncs still update rows in place (HOT,
// with a fillfactor of 70 leaving room on each page), and an idle rule
// scans its index for the buckets older than its TTL, then checks
// last_activity_at itself. A table made by an older Migrate gets the
// column (a table rewrite) and the index. PostgreSQL 14 or later is
// required (date_bin). bench/README.md has the figures.
func (s *Store) Migrate(ctx context.Context) error {
	stmts := []string{
		`SELECT pg_advisory_xact_lock(hashtext('ttlkit.pgttl:' || $1))`,
		`CREATE TABLE IF NOT EXISTS ` + s.table + ` (
  id               text COLLATE "C" PRIMARY KEY,
  phase            text NOT NULL,
  desired_state    text NOT NULL DEFAULT '',
  operation        text NOT NULL DEFAULT ` + s.noOpLit + `,
  ` + s.lastCol + ` timestamptz NOT NULL,
  phase_changed_at timestamptz NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  deleted_at       timestamptz
) WITH (fillfactor = 70)`,
		`ALTER TABLE ` + s.table + ` ADD COLUMN IF NOT EXISTS last_activity_bucket timestamptz
  GENERATED ALWAYS AS (date_bin('1 minute', ` + s.lastCol + `, TIMESTAMPTZ '2000-01-01 00:00:00+00')) STORED`,
	}
	for _, col := range []string{"last_activity_bucket", "phase_changed_at", "created_at"} {
		stmts = append(stmts, `CREATE INDEX IF NOT EXISTS "`+s.base+`_`+col+`" ON `+s.table+
			` (phase, `+col+`) WHERE operation = `+s.noOpLit+` AND deleted_at IS NULL`)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for i, q := range stmts {
			var args []any
			if i == 0 {
				args = []any{s.table}
			}
			if _, err := tx.Exec(ctx, q, args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return errs.Wrap(ctx, "pgttl", "migrate", err)
	}
	return nil
}

// maxDeadlockRetries bounds how often Add reruns a batch that the
// server aborted as a deadlock victim. Rerunning is safe: the merge is
// greater-wins, and the aborted statement changed nothing.
const maxDeadlockRetries = 5

// Add merges acts with one UPDATE ... FROM unnest(...) that sets
// last_activity_at = GREATEST(last_activity_at, at) (see ttl.Store.Add). Repeated ids are reduced to their greatest time
// first, so the statement touches each row at most once. An id no row can
// have (not UTF-8, or holding a NUL byte) is ignored like any unknown id,
// rather than failing the batch, and with it every later sync of the
// activity buffered beside it.
func (s *Store) Add(ctx context.Context, acts []ttl.Activity) error {
	ids, ats := dedupe(acts)
	if len(ids) == 0 {
		return nil
	}
	var err error
	for range maxDeadlockRetries {
		if _, err = s.pool.Exec(ctx, s.mergeSQL, ids, ats); !isDeadlock(err) {
			break
		}
	}
	if err != nil {
		return errs.Wrap(ctx, "pgttl", fmt.Sprintf("merge %d activities", len(ids)), err)
	}
	return nil
}

// dedupe returns the distinct storable ids of acts, sorted, with each id's
// greatest time.
func dedupe(acts []ttl.Activity) ([]string, []time.Time) {
	sorted := slices.DeleteFunc(slices.Clone(acts), func(a ttl.Activity) bool { return !entitycheck.Storable(a.ID) })
	slices.SortFunc(sorted, func(a, b ttl.Activity) int {
		if c := cmp.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return b.At.Compare(a.At) // greatest first within an id
	})
	ids := make([]string, 0, len(sorted))
	ats := make([]time.Time, 0, len(sorted))
	for i, a := range sorted {
		if i > 0 && a.ID == sorted[i-1].ID {
			continue
		}
		ids = append(ids, a.ID)
		ats = append(ats, a.At)
	}
	return ids, ats
}

func isDeadlock(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40P01"
}

// Apply applies r as one conditional UPDATE on the server's clock (see
// ttl.Store.Apply), for an idle rule:
//
//	UPDATE t SET desired_state = 'STANDBY'
//	WHERE phase = 'RUNNING' AND operation = '' AND deleted_at IS NULL
//	  AND desired_state <> 'STANDBY'
//	  AND last_activity_at < now() - make_interval(secs => 600)
//	RETURNING id, last_activity_at, now()
//
// Under concurrent Applies, the row lock and PostgreSQL's recheck of the
// WHERE clause give every id to exactly one of them.
func (s *Store) Apply(ctx context.Context, r ttl.Rule) ([]ttl.Expiry, error) {
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("pgttl: apply: %w", err)
	}
	rows, err := s.pool.Query(ctx, s.applySQL[r.Since], r.Then, r.Phase, r.After.Seconds())
	if err != nil {
		return nil, errs.Wrap(ctx, "pgttl", "apply "+r.String(), err)
	}
	exps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ttl.Expiry, error) {
		x := ttl.Expiry{Rule: r.String(), Then: r.Then}
		err := row.Scan(&x.ID, &x.LastActivityAt, &x.DecidedAt)
		x.LastActivityAt, x.DecidedAt = x.LastActivityAt.UTC(), x.DecidedAt.UTC()
		return x, err
	})
	if err != nil {
		return nil, errs.Wrap(ctx, "pgttl", "apply "+r.String(), err)
	}
	return exps, nil
}
