package sqllease

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
)

// stmtCache keeps a prepared statement per query text of a MySQL store.
//
// The driver runs a statement with arguments as a prepared statement (unless
// the DSN sets interpolateParams): prepare, execute and close, two round
// trips. Prepared once per connection and kept, a statement costs one. A
// grant or a release runs four or five of them in its transaction, so this
// halves the round trips a call waits for. database/sql prepares each
// statement again on every connection that runs it, once, on that
// connection, and closes it with the connection.
//
// Statements are prepared on the *sql.DB only outside a transaction (see
// ready): preparing takes a connection, and a transaction that waited for
// a second one while holding its own could wait forever on a pool whose
// connections are all held by such transactions.
type stmtCache struct {
	mu    sync.Mutex
	m     map[string]*sql.Stmt
	ready atomic.Bool // every query of the store is in m
}

// lookup returns the statement of q, or nil.
func (c *stmtCache) lookup(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[q]
}

// get returns the statement of q, prepared on db if it was not; nil if it
// cannot be prepared (the caller then runs q unprepared, which reports the
// error). Never call it while holding a connection of db.
func (c *stmtCache) get(ctx context.Context, db *sql.DB, q string) *sql.Stmt {
	if st := c.lookup(q); st != nil {
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

// prepare makes sure every query in qs has its statement, once: a store
// calls it before it begins a transaction. A query that cannot be prepared
// (the tables are not migrated yet) is tried again on the next call.
func (c *stmtCache) prepare(ctx context.Context, db *sql.DB, qs []string) {
	if c.ready.Load() {
		return
	}
	for _, q := range qs {
		if c.get(ctx, db, q) == nil {
			return
		}
	}
	c.ready.Store(true)
}

// queryRow runs q with args in tx (nil: outside a transaction), prepared if
// it has arguments and its statement is ready.
func (c *stmtCache) queryRow(ctx context.Context, db *sql.DB, tx *sql.Tx, q string, args ...any) *sql.Row {
	if tx != nil {
		if st := c.lookup(q); st != nil && len(args) > 0 {
			return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
		}
		return tx.QueryRowContext(ctx, q, args...)
	}
	if len(args) > 0 {
		if st := c.get(ctx, db, q); st != nil {
			return st.QueryRowContext(ctx, args...)
		}
	}
	return db.QueryRowContext(ctx, q, args...)
}

// myTx is a MySQL store's transaction: its statements with arguments run
// prepared, through the store's stmtCache, once their statements are
// ready; it never prepares one on the *sql.DB.
type myTx struct {
	tx *sql.Tx
	db *sql.DB
	c  *stmtCache
}

func (t myTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if len(args) > 0 {
		if st := t.c.lookup(q); st != nil {
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
		if st := t.c.lookup(q); st != nil {
			return t.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
		}
	}
	return t.tx.QueryContext(ctx, q, args...)
}
