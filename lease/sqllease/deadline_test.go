package sqllease_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/sqllease"
)

// TestPostgresHeartbeatCommitsAcrossDeadline: a heartbeat sent before the
// lease's deadline whose commit is delayed past it (a deferred trigger
// sleeps at commit). A grant made between the deadline and the commit waits
// for the heartbeat and counts the lease: the budget never sees the lease
// expired and then live again (see "Reads at a deadline" in the package
// doc).
func TestPostgresHeartbeatCommitsAcrossDeadline(t *testing.T) {
	pg := testenv.OpenPostgres(t)
	s := newPG(t, pg.Pool, sqllease.Options{})
	for _, q := range []string{
		`CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN PERFORM pg_sleep(3); RETURN NULL; END$$`,
		`CREATE CONSTRAINT TRIGGER slow_commit AFTER UPDATE ON ttlkit_leases
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()`,
	} {
		_, err := pg.Pool.Exec(ctx, q)
		require.NoError(t, err)
	}
	args := func(holder string) lease.GrantArgs {
		return lease.GrantArgs{ID: lease.NewID(), Holder: holder, Costs: []int{1}, TTL: time.Minute,
			Grace: 4 * time.Second, Budget: 1, OnePerHolder: true}
	}
	l, err := s.Grant(ctx, args("a"))
	require.NoError(t, err)
	granted := time.Now()

	// Deadline at 4 s. The heartbeat reads its time at 2 s (new deadline
	// 6 s) and commits at 5 s; the grant comes at 4.5 s.
	time.Sleep(2 * time.Second)
	var hbDone atomic.Bool
	hbErr := make(chan error, 1)
	go func() {
		_, err := s.Heartbeat(ctx, l.ID)
		hbDone.Store(true)
		hbErr <- err
	}()
	time.Sleep(time.Until(granted.Add(4250 * time.Millisecond)))
	// A plain read does not wait for the heartbeat (documented).
	_, err = s.Get(ctx, l.ID)
	t.Logf("Get between the deadline and the heartbeat's commit: %v", err)
	_, err = s.Heartbeat(ctx, l.ID)
	t.Logf("Heartbeat between the deadline and the heartbeat's commit: %v", err)
	time.Sleep(time.Until(granted.Add(4500 * time.Millisecond)))
	require.False(t, hbDone.Load(), "the heartbeat committed before the grant: the machine is too slow for this test")
	_, err = s.Grant(ctx, args("b"))
	require.NoError(t, <-hbErr, "the heartbeat was sent before the deadline")
	var re *lease.RejectedError
	require.True(t, errors.As(err, &re), "grant after the deadline, before the heartbeat's commit: %v", err)
	assert.Equal(t, lease.OverCapacity, re.Reason, "the grant counted the heartbeated lease")
	got, err := s.Get(ctx, l.ID)
	require.NoError(t, err)
	assert.True(t, got.HeartbeatAt.After(l.HeartbeatAt))
}
