package sqllease_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/mysqltest"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/sqllease"
)

// testAbandoned is a camera page's abandoned browser tab on a server store: a
// holder that stops heartbeating loses its lease once Grace has passed on the
// database clock, its units come back before any sweep, the sweep reports it
// once, and a holder kept alive by KeepAlive is untouched.
func testAbandoned(t *testing.T, s lease.Store) {
	const grace = 600 * time.Millisecond
	var (
		mu      sync.Mutex
		expired []string
	)
	m, err := lease.New(3, lease.Options{
		Store: s, TTL: time.Minute, Grace: grace, SweepInterval: -1,
		OnEvent: func(e lease.Event) {
			if e.Kind == lease.EventExpired {
				mu.Lock()
				expired = append(expired, e.Lease.ID)
				mu.Unlock()
			}
		},
	})
	require.NoError(t, err)
	defer func() { _ = m.Close(ctx) }()

	kept, err := m.Grant(ctx, lease.Request{Holder: "watching", Cost: 1})
	require.NoError(t, err)
	ka := m.KeepAlive(ctx, kept, grace/4)
	defer func() { _ = ka.Close(ctx) }()
	tab, err := m.Grant(ctx, lease.Request{Holder: "abandoned-tab", Cost: 2})
	require.NoError(t, err)
	_, err = m.Grant(ctx, lease.Request{Holder: "newcomer", Cost: 2, Fallback: []int{1}})
	require.ErrorIs(t, err, lease.ErrOverCapacity)

	// The tab sends nothing more. Before its grace has passed it is live.
	_, err = m.Get(ctx, tab.ID)
	require.NoError(t, err)
	start := time.Now()
	require.Eventually(t, func() bool {
		_, err := m.Get(ctx, tab.ID)
		return err != nil
	}, 10*grace, 20*time.Millisecond)
	assert.GreaterOrEqual(t, time.Since(start), grace/2, "lost long before its grace")
	_, err = m.Get(ctx, tab.ID)
	assert.ErrorIs(t, err, lease.ErrExpired)
	_, err = m.Heartbeat(ctx, tab.ID, "")
	assert.ErrorIs(t, err, lease.ErrExpired, "a late heartbeat does not bring it back")

	// Its units are back before any sweep.
	units, n, err := m.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, [2]int{1, 1}, [2]int{units, n}, "units and leases")
	assert.Equal(t, 2, m.Stats().Budget-units, "available")
	l, err := m.Grant(ctx, lease.Request{Holder: "newcomer", Cost: 2, Fallback: []int{1}})
	require.NoError(t, err)
	assert.Equal(t, 2, l.Cost)

	r, err := m.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, r.Expired)
	_, err = m.Get(ctx, tab.ID)
	assert.ErrorIs(t, err, lease.ErrNotFound)
	select {
	case <-ka.Done():
		t.Fatalf("KeepAlive of a heartbeating holder stopped: %v", ka.Err())
	default:
	}
	_, err = m.Get(ctx, kept.ID)
	assert.NoError(t, err, "the holder that kept heartbeating still has its lease")
	require.NoError(t, m.Close(ctx)) // delivers the queued events
	assert.Equal(t, []string{tab.ID}, expired)
}

func TestPostgresAbandonedHolder(t *testing.T) {
	testAbandoned(t, newPG(t, pgtest.OpenPostgres(t).Pool, sqllease.Options{}))
}

func TestMySQLAbandonedHolder(t *testing.T) {
	testAbandoned(t, newMy(t, mysqltest.OpenMySQL(t).DB, sqllease.Options{}))
}
