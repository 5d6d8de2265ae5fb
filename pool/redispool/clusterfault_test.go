package redispool_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/pool"
	"github.com/ttlkit/ttlkit/pool/redispool"
)

// The tests below run a fleet of pool instances on a Redis Cluster of
// their own (3 masters, a replica each, cluster-node-timeout 1 s) and move,
// fail over or kill the master of the inventory's slot under load.

const nodeTimeout = time.Second

// clientLag is how long after a replica took over from a master that died
// calls on its slots may still fail: the store has the ClusterClient
// reload the cluster's layout after every failed call (at most every
// 200 ms), so the client soon finds the new master. Before that, from the
// master's death until the promotion, calls fail while the cluster waits
// cluster-node-timeout and elects the replica, which takes Redis one to
// three seconds more (see "Redis Cluster" in the package documentation).
const clientLag = time.Second

// warnLog is a slog.Handler that records the warnings of a pool (inventory
// calls that failed, in the janitor, a release or a create) in an errLog.
type warnLog struct{ log *errLog }

func (h warnLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h warnLog) Handle(_ context.Context, r slog.Record) error {
	var err error
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			err, _ = a.Value.Any().(error)
		}
		return true
	})
	h.log.note(r.Message, err)
	return nil
}

func (h warnLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h warnLog) WithGroup(string) slog.Handler      { return h }

// clusterFleet starts three pool instances on prov, each with a client of
// its own of the cluster and an Inventory with o; their warnings go to
// fails. Close is the caller's.
func clusterFleet(t *testing.T, c *redistest.ClusterServer, prov *provider, o redispool.Options, fails *errLog) ([]*pool.Pool[box], []*redispool.Inventory) {
	t.Helper()
	var invs []*redispool.Inventory
	for range 3 {
		inv, err := redispool.New(c.Client(t, nil), o)
		require.NoError(t, err)
		invs = append(invs, inv)
	}
	return startPools(t, prov, invs, pool.Options{
		MinIdle: minIdle, MaxIdle: maxIdle, MaxSize: 6,
		IdleTimeout:     200 * time.Millisecond,
		JanitorInterval: time.Second,
		// Longer than a call can wait while the slot migrates or its
		// master fails over (redisrun.RetryFor, 5 s), so that a new
		// item's record is in before reconciliation may call it an
		// orphan.
		OrphanGracePeriod:   6 * time.Second,
		HealthCheckInterval: -1,
		Logger:              slog.New(warnLog{fails}),
	}), invs
}

// reconciler runs Reconcile on p every 20 ms until stop is closed, its
// failures going to fails.
func reconciler(p *pool.Pool[box], stop <-chan struct{}, fails *errLog) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if err := errOf(p.Reconcile(ctx)); err != nil {
				fails.note("reconcile", err)
			}
		}
	})
	return &wg
}

// TestClusterSlotMigration moves the inventory's slot from master to
// master, one key per MIGRATE with a pause in between, again and again
// while the fleet hands items out. No call fails (before, 700-odd Pops and
// Adds failed with "Script attempted to access a non local key"), no item
// is handed to two holders or destroyed while held, and the slot holds the
// inventory's keys and no others.
func TestClusterSlotMigration(t *testing.T) {
	c := redistest.StartRedisCluster(t, redistest.ClusterServerOptions{NodeTimeout: nodeTimeout})
	prov := newProvider()
	var fails errLog
	pools, invs := clusterFleet(t, c, prov, redispool.Options{Prefix: "warm"}, &fails)
	defer closeAll(t, pools)
	keys := invs[0].Keys()
	slot, err := c.Slot(ctx, keys[0])
	require.NoError(t, err)

	stop := make(chan struct{})
	var (
		moves int
		merr  error
		mwg   sync.WaitGroup
	)
	mwg.Go(func() {
		moves, merr = c.MigrateUntil(ctx, slot, redistest.MigrateOptions{Batch: 1, Pause: 2 * time.Millisecond}, stop)
	})
	acquired := fleetLoad(pools, prov, 3, 50*time.Millisecond, stop, &fails)
	rwg := reconciler(pools[0], stop, &fails)
	time.Sleep(2 * time.Second)
	close(stop)
	n := acquired()
	rwg.Wait()
	mwg.Wait()
	require.NoError(t, merr)
	t.Logf("%d items acquired, %d migrations of slot %d", n, moves, slot)
	assert.GreaterOrEqual(t, moves, 2, "the load ended before the slot moved twice")
	assert.Greater(t, n, int64(100), "too little load to mean anything")
	fails.none(t)
	assert.Empty(t, prov.report())
	assert.Zero(t, prov.destroyedTwice(), prov.twiceHistory())

	require.NoError(t, c.WaitStable(ctx))
	master, err := c.Master(ctx, slot)
	require.NoError(t, err)
	k, err := c.Do(ctx, master, "cluster", "countkeysinslot", slot)
	require.NoError(t, err)
	assert.LessOrEqual(t, k, int64(len(keys)), "keys in the inventory's slot")
	replies, err := c.Client(t, nil).HLen(ctx, keys[4]).Result()
	require.NoError(t, err)
	t.Logf("%d keys in the slot, %d outcomes kept", k, replies)
	assert.LessOrEqual(t, replies, int64(3*8), "outcomes kept")
}

// TestClusterGracefulFailover has the replica of the inventory's master
// take over (CLUSTER FAILOVER) while the fleet hands items out: a manual
// failover loses nothing, and no call fails.
func TestClusterGracefulFailover(t *testing.T) {
	r := startFleetRun(t, redispool.Options{Prefix: "warm"})
	_, err := r.c.Do(ctx, r.replica, "cluster", "failover")
	require.NoError(t, err)
	require.NoError(t, r.c.WaitMaster(ctx, r.replica))
	t.Logf("%s took over from %s", r.replica, r.master)
	time.Sleep(time.Second)
	r.finish()
	r.fails.none(t)
}

// fleetRun is a fleet of three pool instances under load on a cluster of
// its own, with the master and a replica of the inventory's slot.
type fleetRun struct {
	t               *testing.T
	c               *redistest.ClusterServer
	prov            *provider
	fails           errLog
	master, replica string

	stop     chan struct{}
	acquired func() int64
	rwg      *sync.WaitGroup
}

// startFleetRun starts the fleet with Inventory options o and its load,
// and returns after a second of load.
func startFleetRun(t *testing.T, o redispool.Options) *fleetRun {
	r := &fleetRun{t: t, prov: newProvider(), stop: make(chan struct{})}
	r.c = redistest.StartRedisCluster(t, redistest.ClusterServerOptions{NodeTimeout: nodeTimeout})
	pools, invs := clusterFleet(t, r.c, r.prov, o, &r.fails)
	t.Cleanup(func() { closeAll(t, pools) })
	r.master, r.replica = slotMaster(t, r.c, invs[0])
	r.acquired = fleetLoad(pools, r.prov, 3, 300*time.Millisecond, r.stop, &r.fails)
	r.rwg = reconciler(pools[0], r.stop, &r.fails)
	time.Sleep(time.Second)
	return r
}

// finish stops the load and checks that it was enough to mean something
// and that no item was handed to two holders or destroyed while held.
func (r *fleetRun) finish() {
	close(r.stop)
	n := r.acquired()
	r.rwg.Wait()
	assert.Greater(r.t, n, int64(100), "too little load to mean anything")
	assert.Empty(r.t, r.prov.report())
}

// slotMaster returns the master of inv's slot and a replica of it.
func slotMaster(t *testing.T, c *redistest.ClusterServer, inv *redispool.Inventory) (master, replica string) {
	t.Helper()
	slot, err := c.Slot(ctx, inv.Keys()[0])
	require.NoError(t, err)
	master, err = c.Master(ctx, slot)
	require.NoError(t, err)
	replica, err = c.ReplicaOf(ctx, master)
	require.NoError(t, err)
	return master, replica
}

// TestClusterHardFailover kills the inventory's master while the fleet,
// with WaitReplicas 1, hands items out, after cutting its replica off
// (paused, its replication link closed) so that the master's last writes
// reach no replica; the replica takes over after cluster-node-timeout, and
// the dead master comes back empty as its replica. Without WaitReplicas a
// Pop acknowledged by the dead master alone is undone, and the item can be
// handed out again while its first holder uses it; with it, no item is
// ever handed to two holders or destroyed while held, and calls fail only
// from the cut until the replica took over (plus clientLag) and a replica
// acknowledges again.
func TestClusterHardFailover(t *testing.T) {
	r := startFleetRun(t, redispool.Options{Prefix: "warm", WaitReplicas: 1})
	c, master, replica := r.c, r.master, r.replica
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	f, err := c.HardFailover(wctx, master, replica, 300*time.Millisecond)
	require.NoError(t, err)
	cut, killed, promoted := f.Cut, f.Killed, f.Promoted
	t.Logf("%s took over from %s after %v", replica, master, promoted.Sub(killed))
	require.NoError(t, c.Rejoin(wctx, master, replica, "{warm}probe"))
	until := time.Now().Add(redispool.DefaultWaitTimeout + 100*time.Millisecond)
	if w := promoted.Add(clientLag); w.After(until) {
		until = w
	}
	t.Logf("%s acknowledges as a replica after %v", master, time.Since(killed))
	time.Sleep(time.Until(until) + time.Second)
	r.finish()

	var last time.Time
	errs := r.fails.all()
	for _, e := range errs {
		if e.at.Before(cut) || e.at.After(until) {
			t.Errorf("%s failed at %s, %v after the kill: %v", e.what, e.at.Format(time.StampMilli), e.at.Sub(killed), e.err)
		}
		last = e.at
	}
	if !last.IsZero() {
		t.Logf("%d calls failed, the last %v after the kill, %v after the promotion", len(errs), last.Sub(killed), last.Sub(promoted))
	}
}
