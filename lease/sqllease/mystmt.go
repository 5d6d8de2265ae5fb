package sqllease

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps a prepared statement per query text of a MySQL store.
//
// The driver runs a statement with arguments as a prepared statement (unless
// the DSN sets interpolateParams): prepare, execute and close, two round
// trips. Prepared once per connection and kept, a statement costs one. A
// grant or a release runs four or five of them in its transaction, so this
// halves the round trips a call waits for. database/sql prepares each
// statement again on every connection that runs it, once, and closes it with
// the connection.
type stmtCache struct {
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

// get returns the statement of q, prepared on db; nil if it cannot be
// prepared (the caller then runs q unprepared, which reports the error).
func (c *stmtCache) get(ctx context.Context, db *sql.DB, q string) *sql.Stmt {
	c.mu.Lock()
	st := c.m[q]
	c.mu.Unlock()
	if st != nil {
		return st
	}
	st, err := db.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[q]; old != nil {
		_ = st.Close()
		return old
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[q] = st
	return st
}

// queryRow runs q with args in tx (nil: outside a transaction), prepared if
// it has arguments.
func (c *stmtCache) queryRow(ctx context.Context, db *sql.DB, tx *sql.Tx, q string, args ...any) *sql.Row {
	if len(args) > 0 {
		if st := c.get(ctx, db, q); st != nil {
			if tx != nil {
				st = tx.StmtContext(ctx, st)
			}
			return st.QueryRowContext(ctx, args...)
		}
	}
	if tx != nil {
		return tx.QueryRowContext(ctx, q, args...)
	}
	return db.QueryRowContext(ctx, q, args...)
}

// myTx is a MySQL store's transaction: its statements with arguments run
// prepared, through the store's stmtCache.
type myTx struct {
	tx *sql.Tx
	db *sql.DB
	c  *stmtCache
}

func (t myTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if len(args) > 0 {
		if st := t.c.get(ctx, t.db, q); st != nil {
			return t.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
		}
	}
	return t.tx.ExecContext(ctx, q, args...)
}

func (t myTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.c.queryRow(ctx, t.db, t.tx, q, args...)
}

func (t myTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if len(args) > 0 {
		if st := t.c.get(ctx, t.db, q); st != nil {
			return t.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
		}
	}
	return t.tx.QueryContext(ctx, q, args...)
}
