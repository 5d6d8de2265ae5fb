package redislease_test

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/internal/leasecheck"
	"github.com/ttlkit/ttlkit/lease/redislease"
)

// The tests below run on a Redis Cluster of their own (3 masters, a
// replica each, cluster-node-timeout 1 s) and move, fail over or kill the
// master of the store's slot under load.

const nodeTimeout = time.Second

// clientLag is how long after a replica took over from a master that died
// calls on its slots may still fail: the store has the ClusterClient
// reload the cluster's layout after every failed call (at most every
// 200 ms), so the client soon finds the new master. Before that, from the
// master's death until the promotion, calls fail while the cluster waits
// cluster-node-timeout and elects the replica, which takes Redis one to
// three seconds more (see "Redis Cluster" in the package documentation).
const clientLag = time.Second

// clusterStore returns a store on a client of its own of the cluster.
func clusterStore(t *testing.T, c *redistest.ClusterServer, o redislease.Options) *redislease.Store {
	t.Helper()
	s, err := redislease.New(c.Client(t, nil), o)
	require.NoError(t, err)
	return s
}

// TestClusterSlotMigration moves the store's slot from master to master,
// one key per MIGRATE with a pause in between (so that its keys are split
// between two nodes for most of the time), again and again while three
// Managers on clients of their own run the multi-instance workload. No
// call may fail (a cluster's TRYAGAIN and ASK are followed or repeated),
// the recorded history must be linearizable (nothing lost or applied
// twice), and a moved slot is no loss: no grant is refused as recovering,
// during the migrations or after them. (The old code took the new master
// for lost data and refused every grant after the first move.) The slot
// holds the store's keys and no others: receipts are fields of one hash,
// holding about one entry per call in flight.
func TestClusterSlotMigration(t *testing.T) {
	// No failover here: a node timeout no loaded machine reaches, so that
	// no master starved for a second is replaced under the migrations.
	c := redistest.StartRedisCluster(t, redistest.ClusterServerOptions{NodeTimeout: 30 * time.Second})
	var (
		stores     []lease.Store
		recovering atomic.Int64
	)
	for range 3 {
		// Writes through the cluster client, which follows ASK: a write
		// that waits for a replica goes to the slot's master itself and
		// cannot follow ASK while the slot migrates (it is sent again for
		// up to redisrun.RetryFor, which a slot that never stops moving,
		// as here, can outlast).
		o := redislease.Options{Prefix: "cams", MaxGrace: 10 * time.Minute, WaitReplicas: -1}
		stores = append(stores, recoveringStore{clusterStore(t, c, o), &recovering})
	}
	keys := stores[0].(recoveringStore).Store.(*redislease.Store).Keys()
	slot, err := c.Slot(ctx, keys[0])
	require.NoError(t, err)

	stop := make(chan struct{})
	done := make(chan struct{})
	var (
		moves int
		merr  error
	)
	go func() {
		defer close(done)
		moves, merr = c.MigrateUntil(ctx, slot, redistest.MigrateOptions{Batch: 1, Pause: 2 * time.Millisecond}, stop)
	}()
	leasecheck.ProveMultiInstance(t, stores, 6, 300)
	close(stop)
	<-done
	require.NoError(t, merr)
	t.Logf("%d migrations of slot %d during the workload", moves, slot)
	assert.GreaterOrEqual(t, moves, 2, "the workload ended before the slot moved twice")
	assert.Zero(t, recovering.Load(), "grants refused as recovering after a slot moved")
	for i, s := range stores {
		l, err := s.Grant(ctx, args(fmt.Sprint("after-", i), 100, time.Minute, time.Minute))
		require.NoError(t, err, "a grant after the migrations")
		_, err = s.Release(ctx, l.ID, "")
		require.NoError(t, err)
	}

	require.NoError(t, c.WaitStable(ctx))
	master, err := c.Master(ctx, slot)
	require.NoError(t, err)
	n, err := c.Do(ctx, master, "cluster", "countkeysinslot", slot)
	require.NoError(t, err)
	assert.LessOrEqual(t, n, int64(len(keys)), "keys in the store's slot")
	cl := c.Client(t, nil)
	receipts, err := cl.HLen(ctx, keys[6]).Result()
	require.NoError(t, err)
	t.Logf("%d keys in the slot, %d receipts kept", n, receipts)
	assert.LessOrEqual(t, receipts, int64(3*redisrunReceiptsPerStore), "receipts kept")
}

// redisrunReceiptsPerStore bounds the receipts a Store leaves undeleted
// when it stops: those of its calls after its last Release or Sweep, and
// of that call.
const redisrunReceiptsPerStore = 8

// recoveringStore counts the grants refused with lease.ErrRecovering.
type recoveringStore struct {
	lease.Store
	n *atomic.Int64
}

func (s recoveringStore) Grant(ctx context.Context, a lease.GrantArgs) (lease.Lease, error) {
	l, err := s.Store.Grant(ctx, a)
	if errors.Is(err, lease.ErrRecovering) {
		s.n.Add(1)
	}
	return l, err
}

// timedStore records when calls of a Store fail with a store error (not a
// rule outcome).
type timedStore struct {
	lease.Store
	log *errorLog
}

type errorLog struct {
	mu   sync.Mutex
	errs []timedErr
}

type timedErr struct {
	at  time.Time
	err error
}

func (l *errorLog) note(err error) {
	if errors.Is(err, lease.ErrNotApplied) || errors.Is(err, lease.ErrUnknownOutcome) {
		l.mu.Lock()
		l.errs = append(l.errs, timedErr{time.Now(), err})
		l.mu.Unlock()
	}
}

func (l *errorLog) all() []timedErr {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]timedErr(nil), l.errs...)
}

func (s timedStore) Grant(ctx context.Context, a lease.GrantArgs) (lease.Lease, error) {
	l, err := s.Store.Grant(ctx, a)
	s.log.note(err)
	return l, err
}

func (s timedStore) Heartbeat(ctx context.Context, id, holder string) (lease.Lease, error) {
	l, err := s.Store.Heartbeat(ctx, id, holder)
	s.log.note(err)
	return l, err
}

func (s timedStore) Release(ctx context.Context, id, holder string) (lease.Lease, error) {
	l, err := s.Store.Release(ctx, id, holder)
	s.log.note(err)
	return l, err
}

func (s timedStore) Sweep(ctx context.Context, limit int) ([]lease.Lease, error) {
	ls, err := s.Store.Sweep(ctx, limit)
	s.log.note(err)
	return ls, err
}

// failoverRun is the load of a failover test: three Managers whose
// clients trust leases until their local deadlines (leasecheck.Views),
// and one that grants long leases, to check afterwards that each one
// acknowledged is still there, and keeps one alive with a KeepAlive whose
// grace exceeds the failover window.
type failoverRun struct {
	t       *testing.T
	c       *redistest.ClusterServer
	opts    redislease.Options // of the short leases' store; MaxGrace is their grace
	longOpt redislease.Options // of the long leases' store, in the same slot
	ms      []*lease.Manager
	long    *lease.Manager
	views   *leasecheck.Views
	errs    errorLog

	stop   chan struct{}
	wg     sync.WaitGroup
	failed int

	mu    sync.Mutex
	acked []string // long leases

	keep *lease.KeepAlive
}

// keptGrace is the grace of the lease a failoverRun keeps alive: above
// the time calls fail in a hard failover (cluster-node-timeout, the
// election, clientLag) plus the heartbeat interval.
const keptGrace = nodeTimeout + 5*time.Second

const failoverBudget = 6

// startFailoverRun starts the load with Options.WaitReplicas set to
// waitReplicas, and the default WaitTimeout (a second): a shorter one fails
// writes of a healthy replica on a busy machine.
func startFailoverRun(t *testing.T, c *redistest.ClusterServer, waitReplicas int) *failoverRun {
	r := &failoverRun{t: t, c: c, views: leasecheck.NewViews(), stop: make(chan struct{})}
	r.opts = redislease.Options{Prefix: "cams", MaxGrace: time.Second, WaitReplicas: waitReplicas}
	for range 3 {
		s := timedStore{clusterStore(t, c, r.opts), &r.errs}
		r.ms = append(r.ms, newManager(t, failoverBudget, lease.Options{
			Store: s, TTL: 500 * time.Millisecond, Grace: r.opts.MaxGrace, SweepInterval: 100 * time.Millisecond,
		}))
	}
	r.longOpt = r.opts
	r.longOpt.Prefix, r.longOpt.MaxGrace = "{cams}long:", 10*time.Minute
	r.long = newManager(t, 1<<20, lease.Options{
		Store: timedStore{clusterStore(t, c, r.longOpt), &r.errs},
		TTL:   10 * time.Minute, Grace: 10 * time.Minute, SweepInterval: -1,
	})
	// A lease whose grace exceeds the failover window plus the heartbeat
	// interval, kept alive across it.
	kept, err := r.long.Grant(ctx, lease.Request{Holder: "kept", Cost: 1, Grace: keptGrace})
	require.NoError(t, err)
	r.keep = r.long.KeepAlive(ctx, kept, 500*time.Millisecond)
	r.wg.Go(func() { r.failed = leasecheck.ViewLoad(r.ms, r.views, 8, 2, 100*time.Millisecond, r.stop) })
	r.wg.Go(func() {
		for {
			select {
			case <-r.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if l, err := r.long.Grant(ctx, lease.Request{Holder: crand.Text(), Cost: 1}); err == nil {
				r.mu.Lock()
				r.acked = append(r.acked, l.ID)
				r.mu.Unlock()
			}
		}
	})
	return r
}

// master returns the store's slot and the master and a replica that serve it.
func (r *failoverRun) master() (slot int, master, replica string) {
	slot, err := r.c.Slot(ctx, "{cams}:leases")
	require.NoError(r.t, err)
	master, err = r.c.Master(ctx, slot)
	require.NoError(r.t, err)
	replica, err = r.c.ReplicaOf(ctx, master)
	require.NoError(r.t, err)
	return slot, master, replica
}

// finish stops the load and checks what every run must hold: clients never
// trusted more than the budget or two leases for a holder, no token was
// issued twice, and each token is above those acknowledged before its
// grant. It returns how many acknowledged long leases are gone and how
// many grants were refused while the store recovered.
func (r *failoverRun) finish() (lost int, recovering uint64) {
	t := r.t
	close(r.stop)
	r.wg.Wait()
	select {
	case <-r.keep.Done():
		t.Errorf("the KeepAlive of a lease with %v of grace lost it: %v", keptGrace, r.keep.Err())
	default:
		require.NoError(t, r.keep.Close(ctx))
	}
	r.views.Check(t, failoverBudget, true)
	assert.Greater(t, r.views.Len(), 25, "too few grants to prove anything")
	fresh := clusterStore(t, r.c, r.longOpt)
	for _, id := range r.acked {
		_, err := fresh.Get(ctx, id)
		if errors.Is(err, lease.ErrNotFound) {
			lost++
		} else {
			require.NoError(t, err)
		}
	}
	for _, m := range append(r.ms, r.long) {
		recovering += m.Stats().RejectedRecovering
	}
	t.Logf("%d grants trusted by clients, %d long leases acknowledged, %d of them lost, %d grants refused while recovering, %d calls failed",
		r.views.Len(), len(r.acked), lost, recovering, len(r.errs.all()))
	return lost, recovering
}

// TestClusterGracefulFailover has the replica of the store's master take
// over (CLUSTER FAILOVER) under load. A manual failover loses nothing, and
// no call fails: the master pauses its clients until the replica has every
// write, then they follow the redirection. The replica has the state as
// the Stores left it, so no grant is refused, with the default options
// (which wait for the replica) or never waiting. (The old code saw another
// server and refused grants for MaxGrace unless the Stores waited for the
// replica.)
func TestClusterGracefulFailover(t *testing.T) {
	inModes(t, []int{0, -1}, func(t *testing.T, c *redistest.ClusterServer, r *failoverRun, _ int, master, replica string) {
		_, err := c.Do(ctx, replica, "cluster", "failover")
		require.NoError(t, err)
		require.NoError(t, c.WaitMaster(ctx, replica))
		t.Logf("%s took over from %s", replica, master)
		time.Sleep(3 * time.Second)
		lost, recovering := r.finish()
		assert.Zero(t, lost, "acknowledged long leases lost")
		for _, e := range r.errs.all() {
			t.Errorf("a call failed at %s: %v", e.at.Format(time.StampMilli), e.err)
		}
		assert.Zero(t, recovering, "grants refused after a failover that lost nothing")
	})
}

// inModes runs f for each of the WaitReplicas values, each on a cluster
// of its own under the load of a failoverRun that has run for a second,
// with the master and a replica of the store's slot.
func inModes(t *testing.T, waitReplicas []int,
	f func(t *testing.T, c *redistest.ClusterServer, r *failoverRun, waitReplicas int, master, replica string)) {
	for _, n := range waitReplicas {
		t.Run(fmt.Sprint("WaitReplicas=", n), func(t *testing.T) {
			c := redistest.StartRedisCluster(t, redistest.ClusterServerOptions{NodeTimeout: nodeTimeout})
			r := startFailoverRun(t, c, n)
			_, master, replica := r.master()
			time.Sleep(time.Second)
			f(t, c, r, n, master, replica)
		})
	}
}

// TestClusterHardFailover kills the store's master under load after
// cutting its replica off (paused, its replication link closed), so that
// the master's last writes reach no replica; the replica then takes over
// after cluster-node-timeout. Calls fail only from the cut (writes the
// replica does not acknowledge) or the kill (the master is gone) until
// clientLag after the promotion (with WaitReplicas 1: until the old
// master is back as a replica, as the new one has no replica to
// acknowledge writes; with the default, the Stores see that the new
// master never had one and write on). With the default options and with
// WaitReplicas 1, nothing acknowledged is lost and the promoted replica
// grants on at once. (On the old code, the default options lost
// acknowledged grants.) Never waiting, acknowledged grants are lost with
// the master, but the Stores that saw them notice that the state went
// back and refuse grants for the window, so clients never trust more than
// the budget and tokens never repeat.
func TestClusterHardFailover(t *testing.T) {
	inModes(t, []int{0, 1, -1}, func(t *testing.T, c *redistest.ClusterServer, r *failoverRun, n int, master, replica string) {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		f, err := c.HardFailover(wctx, master, replica, 300*time.Millisecond)
		require.NoError(t, err)
		cut, killed, promoted := f.Cut, f.Killed, f.Promoted
		t.Logf("%s took over from %s after %v", replica, master, promoted.Sub(killed))
		until := promoted.Add(clientLag)
		if n == 1 {
			// The new master has no replica to acknowledge writes until
			// the old one comes back (empty, as it has no persistence)
			// and syncs as its replica.
			require.NoError(t, c.Rejoin(wctx, master, replica, "{cams}probe"))
			synced := time.Now()
			t.Logf("%s is back as a replica after %v", master, synced.Sub(killed))
			until = later(until, synced.Add(time.Second+100*time.Millisecond))
		}
		time.Sleep(time.Until(until) + 2*time.Second)
		lost, recovering := r.finish()

		var last time.Time
		for _, e := range r.errs.all() {
			from := killed
			if n >= 0 && errors.Is(e.err, redislease.ErrNotReplicated) {
				from = cut
			}
			if e.at.Before(from) || e.at.After(until) {
				t.Errorf("a call failed at %s, %v after the kill: %v", e.at.Format(time.StampMilli), e.at.Sub(killed), e.err)
			}
			last = e.at
		}
		if !last.IsZero() {
			t.Logf("the last call failed %v after the kill, %v after the promotion", last.Sub(killed), last.Sub(promoted))
		}
		if n >= 0 {
			assert.Zero(t, lost, "acknowledged long leases lost")
			assert.Zero(t, recovering, "grants refused after a failover that lost nothing acknowledged")
		} else {
			assert.Positive(t, lost, "no acknowledged lease was lost: the test did not cut the replica off")
			assert.Positive(t, recovering, "no grant waited after a failover that lost grants")
		}
	})
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// TestClusterMasterRestart restarts the master of the store's slot before
// its replica can take over. With an append-only file (appendfsync
// always) it comes back with every write: nothing is lost, and the store
// grants on. Empty, it comes back without the store's keys (and its
// replica, syncing from it, loses them too): the store notices and holds
// grants back. (The old code held grants back in both cases: it saw
// another server run.)
func TestClusterMasterRestart(t *testing.T) {
	for _, aof := range []bool{true, false} {
		t.Run(fmt.Sprint("aof=", aof), func(t *testing.T) {
			c := redistest.StartRedisCluster(t, redistest.ClusterServerOptions{NodeTimeout: nodeTimeout, AppendOnly: aof})
			s := clusterStore(t, c, redislease.Options{Prefix: "cams", MaxGrace: 10 * time.Second, WaitReplicas: 1,
				WaitTimeout: 500 * time.Millisecond})
			a := args("alice", 10, time.Minute, 10*time.Second)
			_, err := s.Grant(ctx, a)
			require.NoError(t, err)
			slot, err := c.Slot(ctx, s.Keys()[0])
			require.NoError(t, err)
			master, err := c.Master(ctx, slot)
			require.NoError(t, err)
			c.Node(master).Restart(0)
			require.NoError(t, c.WaitStable(ctx))
			now, err := c.Master(ctx, slot)
			require.NoError(t, err)
			require.Equal(t, master, now, "the replica took over")

			_, err = s.Grant(ctx, args("bob", 10, time.Minute, 10*time.Second))
			_, herr := s.Heartbeat(ctx, a.ID, "")
			if aof {
				require.NoError(t, err)
				require.NoError(t, herr, "alice's lease survived the restart")
				return
			}
			require.ErrorIs(t, err, lease.ErrRecovering)
			require.ErrorIs(t, herr, lease.ErrNotFound, "alice's lease is gone")
		})
	}
}
