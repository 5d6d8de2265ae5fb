// Package pgentities keeps an entities.Store in a PostgreSQL table: the
// table pgttl.Store.Migrate creates, whose activity merges and rules are
// pgttl's, with the creates, reads and compare-and-set writes of a
// controller beside them.
package pgentities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/ttl/pgttl"
)

// Store is an entities.Store on a PostgreSQL table. Every method is one
// statement (CreateMany: one transaction), decided with the server's
// now(), so any number of Stores on the same table, in any number of
// processes, act as one. A Store is safe for concurrent use.
type Store struct {
	*pgttl.Store // Add, Apply and Migrate

	pool    *pgxpool.Pool
	table   string // quoted
	columns string // the entity columns, in the order scan reads them
	noOp    string // the operation column's value for none

	insertSQL, insertManySQL, selectSQL, updateSQL, existsSQL string
}

var _ entities.Store = (*Store)(nil)

// New returns a Store on opts.Table through pool. It does not contact the
// server; call Migrate once to create the table.
func New(pool *pgxpool.Pool, opts pgttl.Options) (*Store, error) {
	ps, err := pgttl.New(pool, opts) // validates opts
	if err != nil {
		return nil, err
	}
	table := opts.Table
	if table == "" {
		table = "ttlkit_entities"
	}
	last := opts.LastActivityColumn
	if last == "" {
		last = "last_activity_at"
	}
	s := &Store{Store: ps, pool: pool, table: quote(table), noOp: opts.NoOperation}
	s.columns = "id, phase, desired_state, operation, " + last + ", phase_changed_at, created_at, deleted_at"
	columns := s.columns
	table = s.table
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
	return s, nil
}

// quote double-quotes every part of a validated name.
func quote(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = `"` + p + `"`
	}
	return strings.Join(parts, ".")
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
func (s *Store) scan(row pgx.Row) (entities.Entity, error) {
	var (
		e       entities.Entity
		deleted *time.Time
	)
	err := row.Scan(&e.ID, &e.Phase, &e.DesiredState, &e.Operation,
		&e.LastActivityAt, &e.PhaseChangedAt, &e.CreatedAt, &deleted)
	if err != nil {
		return entities.Entity{}, err
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

// Create inserts e (see entities.Store.Create); a zero CreatedAt is the server's
// now(). Times are stored with microsecond precision. ID, Phase,
// DesiredState and Operation must be valid UTF-8 without NUL bytes, as
// PostgreSQL text requires, else Create fails with ttl.ErrInvalid.
func (s *Store) Create(ctx context.Context, e entities.Entity) (entities.Entity, error) {
	if err := entities.CheckCreate("pgentities", e); err != nil {
		return entities.Entity{}, err
	}
	got, err := s.scan(s.pool.QueryRow(ctx, s.insertSQL, e.ID, e.Phase, e.DesiredState, s.op(e.Operation),
		tsArg(e.LastActivityAt), tsArg(e.PhaseChangedAt), tsArg(e.CreatedAt), tsArg(e.DeletedAt)))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return entities.Entity{}, fmt.Errorf("pgentities: create %q: %w", e.ID, entities.ErrExists)
	case err != nil:
		return entities.Entity{}, entities.Wrap(ctx, "pgentities", "create "+e.ID, err)
	}
	return got, nil
}

// createChunk bounds the rows of one INSERT in CreateMany.
const createChunk = 10000

// CreateMany inserts es in one transaction, with one INSERT ... SELECT
// FROM unnest(...) per 10,000 entities (see entities.Store.CreateMany): 100,000
// rows take about a second, where one Create each takes minutes' worth of
// round trips. Defaults and checks are Create's.
func (s *Store) CreateMany(ctx context.Context, es []entities.Entity) ([]entities.Entity, error) {
	seen := make(map[string]int, len(es))
	for i, e := range es {
		if err := entities.CheckCreate("pgentities", e); err != nil {
			return nil, err
		}
		if _, dup := seen[e.ID]; dup {
			return nil, entities.Invalid("pgentities: create %q: ID given twice", e.ID)
		}
		seen[e.ID] = i
	}
	if len(es) == 0 {
		return nil, nil
	}
	out := make([]entities.Entity, len(es))
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
			got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (entities.Entity, error) { return s.scan(row) })
			if err != nil {
				return err
			}
			for _, e := range got {
				out[seen[e.ID]] = e
			}
			if len(got) < n {
				for _, e := range part {
					if out[seen[e.ID]].ID == "" {
						return fmt.Errorf("pgentities: create %q: %w", e.ID, entities.ErrExists)
					}
				}
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, entities.ErrExists):
		return nil, err
	case err != nil:
		return nil, entities.Wrap(ctx, "pgentities", fmt.Sprintf("create %d entities", len(es)), err)
	}
	return out, nil
}

// tsNull turns a time into a timestamptz array element, NULL when zero.
func tsNull(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()}
}

// Get returns the entity with the given id, deleted or not, or an error
// wrapping entities.ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (entities.Entity, error) {
	if !entities.Storable(id) {
		return entities.Entity{}, fmt.Errorf("pgentities: get %q: %w", id, entities.ErrNotFound)
	}
	e, err := s.scan(s.pool.QueryRow(ctx, s.selectSQL, id))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return entities.Entity{}, fmt.Errorf("pgentities: get %q: %w", id, entities.ErrNotFound)
	case err != nil:
		return entities.Entity{}, entities.Wrap(ctx, "pgentities", "get "+id, err)
	}
	return e, nil
}

// Update applies u as one compare-and-set UPDATE ... WHERE id = $1 AND
// operation = $expect (see entities.Store.Update).
func (s *Store) Update(ctx context.Context, id string, u entities.Update) (entities.Entity, error) {
	if !entities.Storable(id) {
		return entities.Entity{}, fmt.Errorf("pgentities: update %q: %w", id, entities.ErrNotFound)
	}
	if err := u.Validate(); err != nil {
		return entities.Entity{}, fmt.Errorf("pgentities: update %q: %w", id, err)
	}
	if !entities.Storable(u.ExpectOperation) || !entities.Storable(u.Operation) || !entities.Storable(u.Phase) || !entities.Storable(u.DesiredState) ||
		!entities.Storable(u.ExpectPhase) || !entities.Storable(u.ExpectDesiredState) {
		return entities.Entity{}, entities.Invalid("pgentities: update %q: Operation, Phase and DesiredState must be UTF-8 without NUL bytes", id)
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
		return entities.Entity{}, entities.Wrap(ctx, "pgentities", "update "+id, err)
	}
	// Rows are never removed, so a row missing now was never there.
	var exists bool
	err = s.pool.QueryRow(ctx, s.existsSQL, id).Scan(&exists)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return entities.Entity{}, fmt.Errorf("pgentities: update %q: %w", id, entities.ErrNotFound)
	case err != nil:
		return entities.Entity{}, entities.Wrap(ctx, "pgentities", "update "+id, err)
	}
	return entities.Entity{}, fmt.Errorf("pgentities: update %q: not as expected (operation %q, phase %q, desired state %q, last activity at most %v): %w",
		id, u.ExpectOperation, u.ExpectPhase, u.ExpectDesiredState, u.ExpectLastActivityAt, entities.ErrConflict)
}

// List returns the entities f selects, in ID order (see entities.Store.List),
// with one SELECT ... WHERE ... AND id > $after ORDER BY id LIMIT $n,
// which walks the primary key. IDs compare by the id column's collation:
// byte-wise ("C") in a table Migrate created.
func (s *Store) List(ctx context.Context, f entities.Filter) ([]entities.Entity, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("pgentities: list: %w", err)
	}
	if f.Limit == 0 {
		f.Limit = entities.ListLimit
	}
	if !entities.Storable(f.Phase) || !entities.Storable(f.DesiredState) || !entities.Storable(f.After) {
		return nil, entities.Invalid("pgentities: list: Phase, DesiredState and After must be UTF-8 without NUL bytes")
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
		return nil, entities.Wrap(ctx, "pgentities", "list", err)
	}
	es, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (entities.Entity, error) { return s.scan(row) })
	if err != nil {
		return nil, entities.Wrap(ctx, "pgentities", "list", err)
	}
	return es, nil
}

// Purge removes the deleted entities among ids in one DELETE ... WHERE id
// = ANY($1) AND deleted_at IS NOT NULL; see entities.Store.Purge.
func (s *Store) Purge(ctx context.Context, ids []string) (int, error) {
	valid := make([]string, 0, len(ids))
	for _, id := range ids {
		if entities.Storable(id) { // others cannot be stored, so are unknown
			valid = append(valid, id)
		}
	}
	if len(valid) == 0 {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM `+s.table+` WHERE id = ANY($1) AND deleted_at IS NOT NULL`, valid)
	if err != nil {
		return 0, entities.Wrap(ctx, "pgentities", "purge", err)
	}
	return int(tag.RowsAffected()), nil
}
