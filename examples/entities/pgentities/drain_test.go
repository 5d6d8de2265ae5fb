package pgentities_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/internal/testenv/pgtest"
	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/ttl"
	"github.com/ttlkit/ttlkit/ttl/pgttl"
	"github.com/ttlkit/ttlkit/ttl/redisttl"
)

// afterFirstMerge runs a hook once, after the first Add: that is
// between the Runner's first Peek and its Remove.
type afterFirstMerge struct {
	entities.Store
	once sync.Once
	hook func()
}

func (s *afterFirstMerge) Add(ctx context.Context, acts []ttl.Activity) error {
	err := s.Store.Add(ctx, acts)
	s.once.Do(s.hook)
	return err
}

// TestDrainStallReproduction is the drain stall on real Redis and
// PostgreSQL: 3,000 workspaces whose stored activity is 15 s old, fresher
// activity for all of them in the buffer, and one proxy flush that lands
// after the Runner's first Peek and refreshes every entry. Remove then
// deletes nothing from the first batch. The tick must still bring every
// buffered activity into PostgreSQL before the standby rule runs, and so
// expire nothing. Before, the tick stopped after the first 1,000 (synced
// 1000) and the rule set the other 2,000 to STANDBY, with no error and no
// rule skipped.
func TestDrainStallReproduction(t *testing.T) {
	ctx := context.Background()
	pg := pgtest.OpenPostgres(t)
	rd := redistest.OpenRedis(t)
	store := newStore(t, pg.Pool, pgttl.Options{Table: "workspaces"})
	buf, err := redisttl.New(rd.Client, redisttl.Options{Prefix: rd.Prefix + "codehub"})
	require.NoError(t, err)
	proxyBuf, err := redisttl.New(rd.NewClient(t), redisttl.Options{Prefix: rd.Prefix + "codehub"})
	require.NoError(t, err)
	now := serverNow(t, pg.Pool)
	// The proxy's clock stands a second before the server's now.
	proxyClock := clock.NewMock()
	proxyClock.Set(now.Add(-time.Second))
	proxy, err := ttl.NewTracker(proxyBuf, ttl.TrackerOptions{FlushInterval: time.Hour, Resolution: -1, Clock: proxyClock})
	require.NoError(t, err)
	defer proxy.Close(ctx)

	const n = 3000
	_, err = pg.Pool.Exec(ctx, `INSERT INTO workspaces (id, phase, last_activity_at, phase_changed_at, created_at)
SELECT format('ws-%s', lpad(i::text, 4, '0')), 'RUNNING', $1, $1, $1 FROM generate_series(0, $2 - 1) i`, now.Add(-15*time.Second), n)
	require.NoError(t, err)
	older := make([]ttl.Activity, n)
	for i := range older {
		older[i] = ttl.Activity{ID: fmt.Sprintf("ws-%04d", i), At: now.Add(-3 * time.Second)}
	}
	require.NoError(t, buf.Add(ctx, older))

	st := &afterFirstMerge{Store: store, hook: func() {
		for _, a := range older {
			proxy.Record(a.ID)
		}
		_, err := proxy.Flush(ctx)
		require.NoError(t, err)
	}}
	r, err := ttl.NewRunner(st, workspaceRules(10*time.Second, time.Hour), ttl.RunnerOptions{Interval: time.Hour, Buffer: buf})
	require.NoError(t, err)
	defer r.Close(ctx)

	res, err := r.Tick(ctx)
	require.NoError(t, err)
	assert.Empty(t, res.Expired, "workspaces with fresh buffered activity set to STANDBY")
	assert.Empty(t, res.Skipped)
	assert.Equal(t, n+1000, res.Synced, "the first batch, then all %d at their newer time", n)
	left, err := bufLen(ctx, buf)
	require.NoError(t, err)
	assert.Zero(t, left, "the drain reached the end of the buffer")
	var stale int
	require.NoError(t, pg.Pool.QueryRow(ctx, `SELECT count(*) FROM workspaces WHERE last_activity_at < $1`, now.Add(-time.Second).Truncate(time.Millisecond)).Scan(&stale))
	assert.Zero(t, stale, "workspaces whose newest activity did not reach PostgreSQL")
}
