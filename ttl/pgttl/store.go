package pgttl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ttlkit/ttlkit/internal/errs"
	"github.com/ttlkit/ttlkit/ttl"
)

// Store is a ttl.Store on a PostgreSQL table. Every method is one statement
// (Migrate: one transaction), decided with the server's now(), so any number
// of Stores on the same table, in any number of processes, act as one.
// A Store is safe for concurrent use.
type Store struct {
	pool  *pgxpool.Pool
	table string // quoted
	base  string // bare name, for index names

	insertSQL, selectSQL, updateSQL, existsSQL, mergeSQL string
	applySQL                                             [3]string // by ttl.Since
}

var _ ttl.Store = (*Store)(nil)

// columns lists the entity columns in the order scanEntity reads them.
const columns = "id, phase, desired_state, operation, last_activity_at, phase_changed_at, created_at, deleted_at"

// sinceColumn maps ttl.Since to its column.
var sinceColumn = [...]string{
	ttl.SinceLastActivity: "last_activity_at",
	ttl.SincePhaseChanged: "phase_changed_at",
	ttl.SinceCreated:      "created_at",
}

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
	s := &Store{pool: pool, table: table, base: base}
	s.insertSQL = `INSERT INTO ` + table + ` AS t (` + columns + `)
SELECT $1, $2, $3, $4,
       COALESCE($5::timestamptz, c.at), COALESCE($6::timestamptz, c.at), c.at, $8::timestamptz
FROM (SELECT COALESCE($7::timestamptz, now()) AS at) c
ON CONFLICT (id) DO NOTHING
RETURNING ` + columns
	s.selectSQL = `SELECT ` + columns + ` FROM ` + table + ` WHERE id = $1`
	s.existsSQL = `SELECT true FROM ` + table + ` WHERE id = $1`
	// In SET, phase is the value before the update.
	s.updateSQL = `UPDATE ` + table + ` SET
  operation = $3,
  phase = CASE WHEN $4 = '' THEN phase ELSE $4 END,
  phase_changed_at = CASE WHEN $4 <> '' AND phase <> $4 THEN now() ELSE phase_changed_at END,
  desired_state = CASE WHEN $5 = '' THEN desired_state ELSE $5 END,
  deleted_at = CASE WHEN $6 THEN COALESCE(deleted_at, now()) ELSE deleted_at END
WHERE id = $1 AND operation = $2
RETURNING ` + columns
	// The batch arrives deduplicated (one row per id, so the UPDATE never
	// meets a row twice) and sorted by id, so that concurrent batches tend
	// to lock rows in one order. Rows whose time would not grow are not
	// written at all.
	s.mergeSQL = `UPDATE ` + table + ` AS t
SET last_activity_at = GREATEST(t.last_activity_at, a.at)
FROM unnest($1::text[], $2::timestamptz[]) AS a(id, at)
WHERE t.id = a.id AND a.at > t.last_activity_at`
	for since, col := range sinceColumn {
		s.applySQL[since] = `UPDATE ` + table + `
SET desired_state = $1
WHERE phase = $2 AND operation = '' AND deleted_at IS NULL AND desired_state <> $1
  AND ` + col + ` < now() - make_interval(secs => $3)
RETURNING id`
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
// operation, not deleted): (phase, phase_changed_at) and (phase,
// created_at). last_activity_at is deliberately not indexed: it is the
// column every sync writes, and leaving it out of every index (with a
// fillfactor of 70 leaving room on each page) lets PostgreSQL update it in
// place (HOT), which makes a sync about three times cheaper. An idle rule
// then finds its phase through the phase prefix of either index and checks
// last_activity_at on those rows, which is cheap while a phase holds up to
// some hundred thousand entities. Beyond that, add
//
//	CREATE INDEX ON <table> (phase, last_activity_at) WHERE operation = '' AND deleted_at IS NULL
//
// and pay for it on every sync.
func (s *Store) Migrate(ctx context.Context) error {
	stmts := []string{
		`SELECT pg_advisory_xact_lock(hashtext('ttlkit.pgttl:' || $1))`,
		`CREATE TABLE IF NOT EXISTS ` + s.table + ` (
  id               text PRIMARY KEY,
  phase            text NOT NULL,
  desired_state    text NOT NULL DEFAULT '',
  operation        text NOT NULL DEFAULT '',
  last_activity_at timestamptz NOT NULL,
  phase_changed_at timestamptz NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  deleted_at       timestamptz
) WITH (fillfactor = 70)`,
	}
	for _, col := range sinceColumn[ttl.SincePhaseChanged:] {
		stmts = append(stmts, `CREATE INDEX IF NOT EXISTS "`+s.base+`_`+col+`" ON `+s.table+
			` (phase, `+col+`) WHERE operation = '' AND deleted_at IS NULL`)
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

// tsArg turns a zero time into SQL NULL.
func tsArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func scanEntity(row pgx.Row) (ttl.Entity, error) {
	var (
		e       ttl.Entity
		deleted *time.Time
	)
	err := row.Scan(&e.ID, &e.Phase, &e.DesiredState, &e.Operation,
		&e.LastActivityAt, &e.PhaseChangedAt, &e.CreatedAt, &deleted)
	if err != nil {
		return ttl.Entity{}, err
	}
	e.LastActivityAt = e.LastActivityAt.UTC()
	e.PhaseChangedAt = e.PhaseChangedAt.UTC()
	e.CreatedAt = e.CreatedAt.UTC()
	if deleted != nil {
		e.DeletedAt = deleted.UTC()
	}
	return e, nil
}

// storable reports whether a text column can hold v: PostgreSQL text is
// valid UTF-8 without NUL bytes.
func storable(v string) bool {
	return utf8.ValidString(v) && strings.IndexByte(v, 0) < 0
}

// Create inserts e (see ttl.Store.Create); a zero CreatedAt is the server's
// now(). Times are stored with microsecond precision. ID, Phase,
// DesiredState and Operation must be valid UTF-8 without NUL bytes, as
// PostgreSQL text requires, else Create fails with ttl.ErrInvalid.
func (s *Store) Create(ctx context.Context, e ttl.Entity) (ttl.Entity, error) {
	switch {
	case e.ID == "":
		return ttl.Entity{}, errs.Invalid(ttl.ErrInvalid, "pgttl: create: ID is empty")
	case e.Phase == "":
		return ttl.Entity{}, errs.Invalid(ttl.ErrInvalid, "pgttl: create %q: Phase is empty", e.ID)
	case !storable(e.ID) || !storable(e.Phase) || !storable(e.DesiredState) || !storable(e.Operation):
		return ttl.Entity{}, errs.Invalid(ttl.ErrInvalid, "pgttl: create %q: ID, Phase, DesiredState and Operation must be UTF-8 without NUL bytes", e.ID)
	}
	got, err := scanEntity(s.pool.QueryRow(ctx, s.insertSQL, e.ID, e.Phase, e.DesiredState, e.Operation,
		tsArg(e.LastActivityAt), tsArg(e.PhaseChangedAt), tsArg(e.CreatedAt), tsArg(e.DeletedAt)))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ttl.Entity{}, fmt.Errorf("pgttl: create %q: %w", e.ID, ttl.ErrExists)
	case err != nil:
		return ttl.Entity{}, errs.Wrap(ctx, "pgttl", "create "+e.ID, err)
	}
	return got, nil
}

// Get returns the entity with the given id, deleted or not, or an error
// wrapping ttl.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (ttl.Entity, error) {
	if !storable(id) {
		return ttl.Entity{}, fmt.Errorf("pgttl: get %q: %w", id, ttl.ErrNotFound)
	}
	e, err := scanEntity(s.pool.QueryRow(ctx, s.selectSQL, id))
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
	if !storable(id) {
		return ttl.Entity{}, fmt.Errorf("pgttl: update %q: %w", id, ttl.ErrNotFound)
	}
	if !storable(u.ExpectOperation) || !storable(u.Operation) || !storable(u.Phase) || !storable(u.DesiredState) {
		return ttl.Entity{}, errs.Invalid(ttl.ErrInvalid, "pgttl: update %q: Operation, Phase and DesiredState must be UTF-8 without NUL bytes", id)
	}
	e, err := scanEntity(s.pool.QueryRow(ctx, s.updateSQL, id, u.ExpectOperation, u.Operation,
		u.Phase, u.DesiredState, u.Delete))
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
	return ttl.Entity{}, fmt.Errorf("pgttl: update %q: operation is not %q: %w", id, u.ExpectOperation, ttl.ErrConflict)
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
	sorted := slices.DeleteFunc(slices.Clone(acts), func(a ttl.Activity) bool { return !storable(a.ID) })
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
//	RETURNING id
//
// Under concurrent Applies, the row lock and PostgreSQL's recheck of the
// WHERE clause give every id to exactly one of them.
func (s *Store) Apply(ctx context.Context, r ttl.Rule) ([]string, error) {
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("pgttl: apply: %w", err)
	}
	rows, err := s.pool.Query(ctx, s.applySQL[r.Since], r.Then, r.Phase, r.After.Seconds())
	if err != nil {
		return nil, errs.Wrap(ctx, "pgttl", "apply "+r.String(), err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, errs.Wrap(ctx, "pgttl", "apply "+r.String(), err)
	}
	return ids, nil
}
