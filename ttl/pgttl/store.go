package pgttl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/internal/entitycheck"
)

// Store is a ttl.Store on a PostgreSQL table. Every method is one statement
// (Migrate: one transaction), decided with the server's now(), so any number
// of Stores on the same table, in any number of processes, act as one.
// A Store is safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	table   string // quoted
	base    string // bare name, for index names
	columns string // the entity columns, in the order scan reads them
	lastCol string // the column of LastActivityAt
	noOp    string // the operation column's value for none
	noOpLit string // noOp as an SQL literal

	insertSQL, insertManySQL, selectSQL, updateSQL, existsSQL, mergeSQL string
	applySQL                                                            [3]string // by ttl.Since
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
	noOp, noOpLit, err := opts.noOperation()
	if err != nil {
		return nil, err
	}
	s := &Store{pool: pool, table: table, base: base, lastCol: last, noOp: noOp, noOpLit: noOpLit}
	s.columns = "id, phase, desired_state, operation, " + last + ", phase_changed_at, created_at, deleted_at"
	columns := s.columns
	// sinceColumn maps ttl.Since to its column.
	sinceColumn := [...]string{
		ttl.SinceLastActivity: last,
		ttl.SincePhaseChanged: "phase_changed_at",
		ttl.SinceCreated:      "created_at",
	}
	s.insertSQL = `INSERT INTO ` + table + ` AS t (` + columns + `)
SELECT $1, $2, $3, $4,
       COALESCE($5::timestamptz, c.at), COALESCE($6::timestamptz, c.at), c.at, $8::timestamptz
FROM (SELECT COALESCE($7::timestamptz, now()) AS at) c
ON CONFLICT (id) DO NOTHING
RETURNING ` + columns
	// $5 to $8 are arrays of timestamps whose NULLs take the defaults;
	// now() is the transaction's start, one time for the whole batch.
	s.insertManySQL = `INSERT INTO ` + table + ` AS t (` + columns + `)
SELECT a.id, a.phase, a.desired_state, a.operation,
       COALESCE(a.last_activity_at, a.created_at, now()), COALESCE(a.phase_changed_at, a.created_at, now()),
       COALESCE(a.created_at, now()), a.deleted_at
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[],
            $5::timestamptz[], $6::timestamptz[], $7::timestamptz[], $8::timestamptz[])
  AS a(id, phase, desired_state, operation, last_activity_at, phase_changed_at, created_at, deleted_at)
ON CONFLICT (id) DO NOTHING
RETURNING ` + columns
	s.selectSQL = `SELECT ` + columns + ` FROM ` + table + ` WHERE id = $1`
	s.existsSQL = `SELECT true FROM ` + table + ` WHERE id = $1`
	// In SET, phase is the value before the update.
	s.updateSQL = `UPDATE ` + table + ` SET
  operation = $3,
  phase = CASE WHEN $4 = '' THEN phase ELSE $4 END,
  phase_changed_at = CASE WHEN $4 <> '' AND phase <> $4 THEN now() ELSE phase_changed_at END,
  desired_state = CASE WHEN $7 THEN '' WHEN $5 = '' THEN desired_state ELSE $5 END,
  deleted_at = CASE WHEN $6 THEN COALESCE(deleted_at, now()) ELSE deleted_at END
WHERE id = $1 AND operation = $2
  AND ($8 = '' OR phase = $8)
  AND ($9 = '' OR desired_state = $9)
  AND ($10::timestamptz IS NULL OR ` + last + ` <= $10)
RETURNING ` + columns
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

// Table returns the quoted name of the entity table.
func (s *Store) Table() string { return s.table }

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

// op returns what the operation column holds for the entity operation op:
// NoOperation for none.
func (s *Store) op(op string) string {
	if op == "" {
		return s.noOp
	}
	return op
}

// tsArg turns a zero time into SQL NULL.
func tsArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// scan reads one row of s.columns.
func (s *Store) scan(row pgx.Row) (ttl.Entity, error) {
	var (
		e       ttl.Entity
		deleted *time.Time
	)
	err := row.Scan(&e.ID, &e.Phase, &e.DesiredState, &e.Operation,
		&e.LastActivityAt, &e.PhaseChangedAt, &e.CreatedAt, &deleted)
	if err != nil {
		return ttl.Entity{}, err
	}
	if e.Operation == s.noOp {
		e.Operation = ""
	}
	e.LastActivityAt = e.LastActivityAt.UTC()
	e.PhaseChangedAt = e.PhaseChangedAt.UTC()
	e.CreatedAt = e.CreatedAt.UTC()
	if deleted != nil {
		e.DeletedAt = deleted.UTC()
	}
	return e, nil
}

// Create inserts e (see ttl.Store.Create); a zero CreatedAt is the server's
// now(). Times are stored with microsecond precision. ID, Phase,
// DesiredState and Operation must be valid UTF-8 without NUL bytes, as
// PostgreSQL text requires, else Create fails with ttl.ErrInvalid.
func (s *Store) Create(ctx context.Context, e ttl.Entity) (ttl.Entity, error) {
	if err := entitycheck.Create("pgttl", e); err != nil {
		return ttl.Entity{}, err
	}
	got, err := s.scan(s.pool.QueryRow(ctx, s.insertSQL, e.ID, e.Phase, e.DesiredState, s.op(e.Operation),
		tsArg(e.LastActivityAt), tsArg(e.PhaseChangedAt), tsArg(e.CreatedAt), tsArg(e.DeletedAt)))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ttl.Entity{}, fmt.Errorf("pgttl: create %q: %w", e.ID, ttl.ErrExists)
	case err != nil:
		return ttl.Entity{}, errs.Wrap(ctx, "pgttl", "create "+e.ID, err)
	}
	return got, nil
}

// createChunk bounds the rows of one INSERT in CreateMany.
const createChunk = 10000

// CreateMany inserts es in one transaction, with one INSERT ... SELECT
// FROM unnest(...) per 10,000 entities (see ttl.Store.CreateMany): 100,000
// rows take about a second, where one Create each takes minutes' worth of
// round trips. Defaults and checks are Create's.
func (s *Store) CreateMany(ctx context.Context, es []ttl.Entity) ([]ttl.Entity, error) {
	seen := make(map[string]int, len(es))
	for i, e := range es {
		if err := entitycheck.Create("pgttl", e); err != nil {
			return nil, err
		}
		if _, dup := seen[e.ID]; dup {
			return nil, errs.Invalid(ttl.ErrInvalid, "pgttl: create %q: ID given twice", e.ID)
		}
		seen[e.ID] = i
	}
	if len(es) == 0 {
		return nil, nil
	}
	out := make([]ttl.Entity, len(es))
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for start := 0; start < len(es); start += createChunk {
			part := es[start:min(start+createChunk, len(es))]
			n := len(part)
			ids, phases, desired, ops := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			last, changed, created, deleted := make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n), make([]pgtype.Timestamptz, n)
			for i, e := range part {
				ids[i], phases[i], desired[i], ops[i] = e.ID, e.Phase, e.DesiredState, s.op(e.Operation)
				last[i], changed[i], created[i], deleted[i] = tsNull(e.LastActivityAt), tsNull(e.PhaseChangedAt), tsNull(e.CreatedAt), tsNull(e.DeletedAt)
			}
			rows, err := tx.Query(ctx, s.insertManySQL, ids, phases, desired, ops, last, changed, created, deleted)
			if err != nil {
				return err
			}
			got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ttl.Entity, error) { return s.scan(row) })
			if err != nil {
				return err
			}
			for _, e := range got {
				out[seen[e.ID]] = e
			}
			if len(got) < n {
				for _, e := range part {
					if out[seen[e.ID]].ID == "" {
						return fmt.Errorf("pgttl: create %q: %w", e.ID, ttl.ErrExists)
					}
				}
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, ttl.ErrExists):
		return nil, err
	case err != nil:
		return nil, errs.Wrap(ctx, "pgttl", fmt.Sprintf("create %d entities", len(es)), err)
	}
	return out, nil
}

// tsNull turns a time into a timestamptz array element, NULL when zero.
func tsNull(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()}
}

// Get returns the entity with the given id, deleted or not, or an error
// wrapping ttl.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (ttl.Entity, error) {
	if !entitycheck.Storable(id) {
		return ttl.Entity{}, fmt.Errorf("pgttl: get %q: %w", id, ttl.ErrNotFound)
	}
	e, err := s.scan(s.pool.QueryRow(ctx, s.selectSQL, id))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ttl.Entity{}, fmt.Errorf("pgttl: get %q: %w", id, ttl.ErrNotFound)
	case err != nil:
		return ttl.Entity{}, errs.Wrap(ctx, "pgttl", "get "+id, err)
	}
	return e, nil
}

// Update applies u as one compare-and-set UPDATE ... WHERE id = $1 AND
// operation = $expect (see ttl.Store.Update).
func (s *Store) Update(ctx context.Context, id string, u ttl.Update) (ttl.Entity, error) {
	if !entitycheck.Storable(id) {
		return ttl.Entity{}, fmt.Errorf("pgttl: update %q: %w", id, ttl.ErrNotFound)
	}
	if err := u.Validate(); err != nil {
		return ttl.Entity{}, fmt.Errorf("pgttl: update %q: %w", id, err)
	}
	if !entitycheck.Storable(u.ExpectOperation) || !entitycheck.Storable(u.Operation) || !entitycheck.Storable(u.Phase) || !entitycheck.Storable(u.DesiredState) ||
		!entitycheck.Storable(u.ExpectPhase) || !entitycheck.Storable(u.ExpectDesiredState) {
		return ttl.Entity{}, errs.Invalid(ttl.ErrInvalid, "pgttl: update %q: Operation, Phase and DesiredState must be UTF-8 without NUL bytes", id)
	}
	var expectLast any
	if !u.ExpectLastActivityAt.IsZero() {
		// Stored times have microseconds; the server would round the
		// argument, possibly up past a later activity.
		expectLast = u.ExpectLastActivityAt.Truncate(time.Microsecond)
	}
	e, err := s.scan(s.pool.QueryRow(ctx, s.updateSQL, id, s.op(u.ExpectOperation), s.op(u.Operation),
		u.Phase, u.DesiredState, u.Delete, u.ClearDesiredState, u.ExpectPhase, u.ExpectDesiredState, expectLast))
	if err == nil {
		return e, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return ttl.Entity{}, errs.Wrap(ctx, "pgttl", "update "+id, err)
	}
	// Rows are never removed, so a row missing now was never there.
	var exists bool
	err = s.pool.QueryRow(ctx, s.existsSQL, id).Scan(&exists)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ttl.Entity{}, fmt.Errorf("pgttl: update %q: %w", id, ttl.ErrNotFound)
	case err != nil:
		return ttl.Entity{}, errs.Wrap(ctx, "pgttl", "update "+id, err)
	}
	return ttl.Entity{}, fmt.Errorf("pgttl: update %q: not as expected (operation %q, phase %q, desired state %q, last activity at most %v): %w",
		id, u.ExpectOperation, u.ExpectPhase, u.ExpectDesiredState, u.ExpectLastActivityAt, ttl.ErrConflict)
}

// List returns the entities f selects, in ID order (see ttl.Store.List),
// with one SELECT ... WHERE ... AND id > $after ORDER BY id LIMIT $n,
// which walks the primary key. IDs compare by the id column's collation:
// byte-wise ("C") in a table Migrate created.
func (s *Store) List(ctx context.Context, f ttl.Filter) ([]ttl.Entity, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("pgttl: list: %w", err)
	}
	if f.Limit == 0 {
		f.Limit = ttl.DefaultListLimit
	}
	if !entitycheck.Storable(f.Phase) || !entitycheck.Storable(f.DesiredState) || !entitycheck.Storable(f.After) {
		return nil, errs.Invalid(ttl.ErrInvalid, "pgttl: list: Phase, DesiredState and After must be UTF-8 without NUL bytes")
	}
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if f.Phase != "" {
		where = append(where, "phase = "+arg(f.Phase))
	}
	if f.DesiredState != "" {
		where = append(where, "desired_state = "+arg(f.DesiredState))
	}
	if f.HasDesiredState {
		where = append(where, "desired_state <> ''")
	}
	if !f.Deleted {
		where = append(where, "deleted_at IS NULL")
	}
	if f.After != "" {
		where = append(where, "id > "+arg(f.After))
	}
	q := `SELECT ` + s.columns + ` FROM ` + s.table
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY id LIMIT ` + arg(f.Limit)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, errs.Wrap(ctx, "pgttl", "list", err)
	}
	es, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ttl.Entity, error) { return s.scan(row) })
	if err != nil {
		return nil, errs.Wrap(ctx, "pgttl", "list", err)
	}
	return es, nil
}

// maxDeadlockRetries bounds how often MergeActivity reruns a batch that the
// server aborted as a deadlock victim. Rerunning is safe: the merge is
// greater-wins, and the aborted statement changed nothing.
const maxDeadlockRetries = 5

// MergeActivity merges acts with one UPDATE ... FROM unnest(...) that sets
// last_activity_at = GREATEST(last_activity_at, at) (see
// ttl.Store.MergeActivity). Repeated ids are reduced to their greatest time
// first, so the statement touches each row at most once. An id no row can
// have (not UTF-8, or holding a NUL byte) is ignored like any unknown id,
// rather than failing the batch, and with it every later sync of the
// activity buffered beside it.
func (s *Store) MergeActivity(ctx context.Context, acts []ttl.Activity) error {
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
// ttl.Store.Apply), for a workspace system's standby rule:
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
