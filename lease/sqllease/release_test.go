package sqllease_test

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"database/sql"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/mysqltest"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/sqllease"
)

// commitLoser loses the reply to the first COMMIT sent after arm is set:
// the server commits, the client sees its connection break.
type commitLoser struct {
	arm, lose atomic.Bool
	// reply, if set, is what the reply to lose contains (PostgreSQL's
	// CommandComplete "COMMIT"); else the first reply after the COMMIT.
	reply []byte
}

func (c *commitLoser) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &losingConn{Conn: conn, c: c}, nil
}

type losingConn struct {
	net.Conn
	c *commitLoser
}

func (l *losingConn) Write(p []byte) (int, error) {
	// "COMMIT", not "READ COMMITTED" of a MySQL transaction's start.
	if bytes.Contains(p, []byte("COMMIT")) && !bytes.Contains(p, []byte("COMMITTED")) && l.c.arm.CompareAndSwap(true, false) {
		l.c.lose.Store(true)
	}
	return l.Conn.Write(p)
}

func (l *losingConn) Read(p []byte) (int, error) {
	n, err := l.Conn.Read(p) // the reply has arrived: the commit is done
	if n > 0 && (l.c.reply == nil || bytes.Contains(p[:n], l.c.reply)) && l.c.lose.CompareAndSwap(true, false) {
		_ = l.Conn.Close()
		return 0, io.ErrUnexpectedEOF
	}
	return n, err
}

// testReleaseRetry: a Release whose COMMIT reply is lost fails with
// ErrUnknownOutcome although it took effect; the caller's retry says
// ErrReleased (and ErrNotFound), not a bare ErrNotFound that an expired and
// swept lease would give.
func testReleaseRetry(t *testing.T, s lease.Store, loser *commitLoser) {
	a := lease.GrantArgs{ID: crand.Text(), Holder: "alice", Costs: []int{2}, TTL: time.Hour, Grace: time.Hour,
		Budget: 5, OnePerHolder: true}
	l, err := s.Grant(ctx, a)
	require.NoError(t, err)
	loser.arm.Store(true)
	_, err = s.Release(ctx, l.ID, "alice")
	require.False(t, loser.arm.Load(), "no COMMIT was sent")
	require.Error(t, err, "the reply was lost")
	assert.ErrorIs(t, err, lease.ErrUnknownOutcome)
	assert.NotErrorIs(t, err, lease.ErrNotFound)

	_, err = s.Release(ctx, l.ID, "alice") // the retry
	require.ErrorIs(t, err, lease.ErrNotFound)
	require.ErrorIs(t, err, lease.ErrReleased, "the retry must tell that the release took effect")
	units, n, err := s.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, [2]int{0, 0}, [2]int{units, n})
}

func TestPostgresReleaseRetryAfterLostReply(t *testing.T) {
	pg := pgtest.OpenPostgres(t)
	cfg, err := pgxpool.ParseConfig(pg.URL())
	require.NoError(t, err)
	loser := &commitLoser{reply: []byte("COMMIT\x00")}
	cfg.ConnConfig.DialFunc = loser.dial
	// Send every statement's text, so that the loser sees the COMMIT.
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeDescribeExec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	testReleaseRetry(t, newPG(t, pool, sqllease.Options{}), loser)
}

func TestMySQLReleaseRetryAfterLostReply(t *testing.T) {
	my := mysqltest.OpenMySQL(t)
	loser := &commitLoser{}
	dialer := "ttlkit-commit-loser-" + my.Database
	mysql.RegisterDialContext(dialer, func(ctx context.Context, addr string) (net.Conn, error) {
		return loser.dial(ctx, "tcp", addr)
	})
	cfg, err := mysql.ParseDSN(my.DSN)
	require.NoError(t, err)
	cfg.Net = dialer
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	testReleaseRetry(t, newMy(t, db, sqllease.Options{}), loser)
}
