package sqllease_test

import (
	crand "crypto/rand"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/mysqltest"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/sqllease"
)

// TestPostgresHeartbeatCommitsAcrossDeadline: a heartbeat sent before the
// lease's deadline whose commit is delayed past it (a deferred trigger
// sleeps at commit). Calls made between the deadline and the commit wait
// for the heartbeat and see the lease live: a Get, another Heartbeat, and a
// Grant, which counts the lease against the budget. Nobody sees the lease
// expired and then live again.
func TestPostgresHeartbeatCommitsAcrossDeadline(t *testing.T) {
	pg := pgtest.OpenPostgres(t)
	s := newPG(t, pg.Pool, sqllease.Options{})
	for _, q := range []string{
		// Only the first heartbeat is slow.
		`CREATE TABLE slept (x int)`,
		`CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM slept) THEN
		INSERT INTO slept VALUES (1);
		PERFORM pg_sleep(3);
	END IF;
	RETURN NULL;
END$$`,
		`CREATE CONSTRAINT TRIGGER slow_commit AFTER UPDATE ON ttlkit_leases
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()`,
	} {
		_, err := pg.Pool.Exec(ctx, q)
		require.NoError(t, err)
	}
	testHeartbeatAcrossDeadline(t, s)
}

// testHeartbeatAcrossDeadline runs the scenario on a store whose first
// heartbeat takes 3 s between reading the time and committing.
func testHeartbeatAcrossDeadline(t *testing.T, s lease.Store) {
	args := func(holder string) lease.GrantArgs {
		return lease.GrantArgs{ID: crand.Text(), Holder: holder, Costs: []int{1}, TTL: time.Minute,
			Grace: 4 * time.Second, Budget: 1, OnePerHolder: true}
	}
	l, err := s.Grant(ctx, args("a"))
	require.NoError(t, err)
	granted := time.Now()

	// Deadline at 4 s. The heartbeat reads its time at 2 s (new deadline
	// 6 s) and commits at 5 s; the other calls come at 4.25 and 4.5 s.
	time.Sleep(2 * time.Second)
	var hbDone atomic.Bool
	hbErr := make(chan error, 1)
	go func() {
		_, err := s.Heartbeat(ctx, l.ID, "")
		hbDone.Store(true)
		hbErr <- err
	}()
	time.Sleep(time.Until(granted.Add(4250 * time.Millisecond)))
	require.False(t, hbDone.Load(), "the heartbeat committed too early: the machine is too slow for this test")
	getErr, hb2Err := make(chan error, 1), make(chan error, 1)
	go func() {
		_, err := s.Get(ctx, l.ID)
		getErr <- err
	}()
	go func() {
		_, err := s.Heartbeat(ctx, l.ID, "")
		hb2Err <- err
	}()
	listed, used := make(chan []string, 1), make(chan [2]int, 1)
	go func() {
		ls, err := s.List(ctx)
		assert.NoError(t, err)
		var ids []string
		for _, x := range ls {
			ids = append(ids, x.ID)
		}
		listed <- ids
	}()
	go func() {
		u, n, err := s.Usage(ctx)
		assert.NoError(t, err)
		used <- [2]int{u, n}
	}()
	time.Sleep(time.Until(granted.Add(4500 * time.Millisecond)))
	require.False(t, hbDone.Load(), "the heartbeat committed too early: the machine is too slow for this test")
	_, err = s.Grant(ctx, args("b"))
	require.NoError(t, <-hbErr, "the heartbeat was sent before the deadline")
	assert.NoError(t, <-getErr, "Get between the deadline and the heartbeat's commit")
	assert.NoError(t, <-hb2Err, "Heartbeat between the deadline and the first heartbeat's commit")
	assert.Equal(t, []string{l.ID}, <-listed, "List between the deadline and the heartbeat's commit")
	assert.Equal(t, [2]int{1, 1}, <-used, "Usage between the deadline and the heartbeat's commit")
	var re *lease.RejectedError
	require.True(t, errors.As(err, &re), "grant after the deadline, before the heartbeat's commit: %v", err)
	assert.Equal(t, lease.ErrOverCapacity, re.Err, "the grant counted the heartbeated lease")
	got, err := s.Get(ctx, l.ID)
	require.NoError(t, err)
	assert.True(t, got.HeartbeatAt.After(l.HeartbeatAt))
}

// TestMySQLHeartbeatCommitsAcrossDeadline: the same on MySQL, where a
// trigger sleeps inside the heartbeat's UPDATE, after it read the time.
func TestMySQLHeartbeatCommitsAcrossDeadline(t *testing.T) {
	my := mysqltest.OpenMySQL(t)
	s := newMy(t, my.DB, sqllease.Options{})
	for _, q := range []string{
		`CREATE TABLE slept (x int)`,
		// Only the first heartbeat is slow.
		`CREATE TRIGGER slow_heartbeat AFTER UPDATE ON ttlkit_leases FOR EACH ROW
BEGIN
	IF (SELECT COUNT(*) FROM slept) = 0 THEN
		INSERT INTO slept VALUES (1);
		DO SLEEP(3);
	END IF;
END`,
	} {
		_, err := my.DB.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	testHeartbeatAcrossDeadline(t, s)
}
