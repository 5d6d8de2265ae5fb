package redislease_test

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/internal/leasecheck"
	"github.com/ttlkit/ttlkit/lease/redislease"
)

// lossStore returns a store on its own client of srv with the given
// MaxGrace.
func lossStore(t *testing.T, srv *redistest.RedisServer, maxGrace time.Duration) *redislease.Store {
	t.Helper()
	s, err := redislease.New(srv.NewClient(t, nil), redislease.Options{Prefix: "cams", MaxGrace: maxGrace})
	require.NoError(t, err)
	return s
}

// TestStateLossDetected restarts a Redis of the test's own while a lease
// is held. Empty, the store notices (its state is gone), refuses grants
// with ErrRecovering for MaxGrace, which covers every lease granted
// before, and its tokens keep growing. On the old code the grant after the
// restart succeeded at once, over the budget the holder still trusted,
// with token 1. With every acknowledged write kept (appendfsync always),
// a restart loses nothing, and the store grants on.
func TestStateLossDetected(t *testing.T) {
	for _, c := range []struct {
		name string
		aof  bool
		hold bool
	}{
		{"empty", false, true},
		{"aof", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			const maxGrace = 800 * time.Millisecond
			srv := redistest.StartRedis(t, redistest.RedisServerOptions{AppendOnly: c.aof})
			s := lossStore(t, srv, maxGrace)
			m := newManager(t, 3, lease.Options{Store: s, TTL: time.Minute, Grace: maxGrace, SweepInterval: -1})
			alice, err := m.Grant(ctx, lease.Request{Holder: "alice", Cost: 2})
			require.NoError(t, err)

			srv.Restart(0)
			restarted := time.Now()
			_, err = m.Grant(ctx, lease.Request{Holder: "bob", Cost: 2}) // go-redis reconnects
			if !c.hold {
				// Persisted: alice's lease is still there.
				require.ErrorIs(t, err, lease.ErrOverCapacity)
				_, err = m.Heartbeat(ctx, alice.ID, "")
				require.NoError(t, err)
				return
			}
			var re *lease.RejectedError
			require.ErrorAs(t, err, &re, "a grant right after the loss")
			assert.Equal(t, lease.ErrRecovering, re.Err)
			require.ErrorIs(t, err, lease.ErrRecovering)
			assert.Positive(t, re.RetryAfter)
			assert.LessOrEqual(t, re.RetryAfter, maxGrace)
			assert.Equal(t, uint64(1), m.Stats().RejectedRecovering)

			// A second Store, new to this state, obeys the hold too.
			fresh := lossStore(t, srv, maxGrace)
			_, err = fresh.Grant(ctx, lease.GrantArgs{ID: crand.Text(), Holder: "carol", Costs: []int{1}, TTL: time.Minute,
				Grace: maxGrace, Budget: 3, OnePerHolder: true})
			require.ErrorIs(t, err, lease.ErrRecovering)

			// Until alice's lease must have lapsed for her, by her clock.
			var b lease.Lease
			require.Eventually(t, func() bool {
				b, err = m.Grant(ctx, lease.Request{Holder: "bob", Cost: 2})
				return err == nil
			}, 5*time.Second, 20*time.Millisecond, "grants never resumed: %v", err)
			assert.GreaterOrEqual(t, time.Since(restarted), maxGrace-50*time.Millisecond)
			assert.Greater(t, b.Token, alice.Token, "tokens keep growing across the loss")
			assert.GreaterOrEqual(t, b.Token, uint64(time.Now().Add(-time.Minute).UnixMicro()), "tokens never go below the server clock")
			assert.True(t, b.CreatedAt.After(alice.HeartbeatAt.Add(maxGrace)), "granted before alice's lease lapsed")
		})
	}
}

// TestStateLossClientViews is the proof with a store that fails: three
// Managers, each with its own client, serve clients that grant, heartbeat
// and release on a Redis of the test's own, which is killed and restarted
// twice during the run (empty without AOF; with AOF, appendfsync always,
// with every acknowledged write). At no instant may the leases that
// clients trust, each until its local deadline, exceed the budget or give
// a holder two leases, and every token must be greater than those
// acknowledged before its grant. An empty restart makes the store hold
// grants back; one that lost nothing does not. On the old code the grants
// after a restart filled the budget again at once and tokens restarted at
// 1.
func TestStateLossClientViews(t *testing.T) {
	for _, aof := range []bool{false, true} {
		t.Run(fmt.Sprint("aof=", aof), func(t *testing.T) {
			const (
				budget   = 6
				grace    = 400 * time.Millisecond
				interval = 60 * time.Millisecond
			)
			srv := redistest.StartRedis(t, redistest.RedisServerOptions{AppendOnly: aof})
			var ms []*lease.Manager
			for range 3 {
				ms = append(ms, newManager(t, budget, lease.Options{
					Store: lossStore(t, srv, grace), TTL: 600 * time.Millisecond, Grace: grace,
					SweepInterval: 100 * time.Millisecond,
				}))
			}
			v := leasecheck.NewViews()
			stop := make(chan struct{})
			done := make(chan int)
			go func() { done <- leasecheck.ViewLoad(ms, v, 8, 2, interval, stop) }()
			for range 2 {
				time.Sleep(1200 * time.Millisecond)
				srv.Restart(0)
			}
			time.Sleep(1200 * time.Millisecond)
			close(stop)
			failed := <-done

			var granted, recovering uint64
			for _, m := range ms {
				st := m.Stats()
				granted += st.Granted
				recovering += st.RejectedRecovering
			}
			t.Logf("%d grants, %d refused while recovering, %d calls failed", granted, recovering, failed)
			require.Greater(t, v.Len(), 25, "too few grants to prove anything")
			if aof {
				assert.Zero(t, recovering, "grants refused after a restart that lost nothing")
			} else {
				assert.Positive(t, recovering, "no grant met a recovering store")
			}
			v.Check(t, budget, true)
		})
	}
}

// TestMultiInstance: three Managers with their own clients on one store;
// the recorded history is checked against the model.
func TestMultiInstance(t *testing.T) {
	r := redistest.OpenRedis(t)
	var stores []lease.Store
	for range 3 {
		stores = append(stores, newStore(t, r.NewClient(t), storePrefix(r)))
	}
	leasecheck.ProveMultiInstance(t, stores, 6, 500)
}

// TestMultiInstanceConnectionsKilled kills the stores' connections again
// and again during the multi-instance workload, with go-redis's retries off
// so that calls fail: CLIENT KILL of this test's clients every 20 ms, and
// about one reply in 30 lost (the client closes the connection after the
// server ran the script, the worst moment), so that some calls fail after
// taking effect.
func TestMultiInstanceConnectionsKilled(t *testing.T) {
	r := redistest.OpenRedis(t)
	var stores []lease.Store
	var name string
	var lost atomic.Int64
	var faulty atomic.Bool // replies are lost only while connections are killed
	for i := range 3 {
		var c *redis.Client
		c, name = r.NamedClient(t, "proof", -1)
		o := *c.Options()
		o.MaxRetries = -1 // normalized to 0 in c.Options(), which NewClient would read as the default
		rnd := rand.New(rand.NewPCG(uint64(i), 3))
		var mu sync.Mutex
		o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &droppingConn{Conn: conn, drop: func() bool {
				mu.Lock()
				defer mu.Unlock()
				return faulty.Load() && rnd.IntN(30) == 0
			}, lost: &lost}, nil
		}
		lossy := redis.NewClient(&o)
		t.Cleanup(func() { _ = lossy.Close() })
		stores = append(stores, newStore(t, lossy, storePrefix(r)))
	}
	leasecheck.ProveFault(t, stores, "redislease: ", 20*time.Millisecond, 400, func() (int, error) {
		faulty.Store(true)
		return r.KillClients(ctx, name)
	}, func() { faulty.Store(false) })
	t.Logf("%d replies lost", lost.Load())
}

// droppingConn closes itself instead of returning a reply when drop says
// so: the server has run the command, the client sees a broken connection.
type droppingConn struct {
	net.Conn
	drop func() bool
	lost *atomic.Int64
}

// SyscallConn lets go-redis check an idle connection before use (it finds
// the ones CLIENT KILL closed), as it does a plain TCP connection.
func (c *droppingConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}

func (c *droppingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.drop() {
		c.lost.Add(1)
		_ = c.Conn.Close()
		return 0, io.ErrUnexpectedEOF
	}
	return n, err
}

// snapshot copies the store's keys (DUMP) and returns a function that puts
// them back (RESTORE, deleting any key the copy did not hold): the store as
// a replica that lagged, or an append-only file that missed its last
// writes, would hand it back after a failover or a restart.
func snapshot(t *testing.T, c redis.UniversalClient, keys []string) func() {
	t.Helper()
	dumps := map[string]string{}
	for _, k := range keys {
		d, err := c.Dump(ctx, k).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		require.NoError(t, err)
		dumps[k] = d
	}
	return func() {
		t.Helper()
		for _, k := range keys {
			require.NoError(t, c.Del(ctx, k).Err())
			if d, ok := dumps[k]; ok {
				require.NoError(t, c.Restore(ctx, k, 0, d).Err())
			}
		}
	}
}

// TestStateRollbackDetected puts the store back to an earlier copy of its
// keys after an acknowledged grant or heartbeat: the state has gone back in
// time, as after a failover to a replica that missed the last writes. The
// Store that saw the later state notices it on its next grant and refuses
// grants for the store's window; a copy that has every acknowledged write
// (a replica in sync) is no loss. On the old code (which compared server
// identities, unchanged here) the rollback went unnoticed and the grant
// succeeded over a lease its holder still trusted.
func TestStateRollbackDetected(t *testing.T) {
	for _, lost := range []string{"grant", "heartbeat"} {
		t.Run(lost, func(t *testing.T) {
			const grace = 300 * time.Millisecond
			r := redistest.OpenRedis(t)
			store := func(c redis.UniversalClient) *redislease.Store {
				s, err := redislease.New(c, redislease.Options{Prefix: storePrefix(r), MaxGrace: 2 * grace})
				require.NoError(t, err)
				return s
			}
			s := store(r.Client)
			alice, err := s.Grant(ctx, args("alice", 2, time.Minute, grace))
			require.NoError(t, err)

			// A copy with every acknowledged write: nothing lost.
			snapshot(t, r.Client, s.Keys())()
			_, err = s.Heartbeat(ctx, alice.ID, "alice")
			require.NoError(t, err)

			back := snapshot(t, r.Client, s.Keys())
			var last lease.Lease
			switch lost {
			case "grant":
				last, err = s.Grant(ctx, args("bob", 2, time.Minute, grace))
			case "heartbeat":
				last, err = s.Heartbeat(ctx, alice.ID, "alice")
			}
			require.NoError(t, err)
			back()
			lostAt := time.Now()

			_, err = s.Grant(ctx, args("carol", 2, time.Minute, grace))
			var re *lease.RejectedError
			require.ErrorAs(t, err, &re, "a grant after the state went back")
			require.ErrorIs(t, err, lease.ErrRecovering)
			assert.Positive(t, re.RetryAfter)

			// Another Store, new to the state, obeys the hold.
			_, err = store(r.NewClient(t)).Grant(ctx, args("dave", 2, time.Minute, grace))
			require.ErrorIs(t, err, lease.ErrRecovering)

			var c lease.Lease
			require.Eventually(t, func() bool {
				c, err = s.Grant(ctx, args("carol", 2, time.Minute, grace))
				return err == nil || !errors.Is(err, lease.ErrRecovering)
			}, 5*time.Second, 20*time.Millisecond)
			require.NoError(t, err, "alice's lease lapsed with the hold")
			assert.GreaterOrEqual(t, time.Since(lostAt), grace-50*time.Millisecond, "the hold covers the lost write")
			assert.True(t, c.CreatedAt.After(last.HeartbeatAt.Add(grace)), "granted before the lost write's lease lapsed")
			assert.Greater(t, c.Token, last.Token, "tokens keep growing")
		})
	}
}

// TestLossHoldsForTheWindow: after an empty restart the store holds grants
// back for as long as the leases granted before can stay live for their
// holders (the largest of the smaller of TTL and Grace, its window: here a
// Grace of 300 ms), not for MaxGrace (45 s by default), however many
// Stores saw the loss. On the old code grants were refused for MaxGrace.
func TestLossHoldsForTheWindow(t *testing.T) {
	const grace = 300 * time.Millisecond
	srv := redistest.StartRedis(t, redistest.RedisServerOptions{})
	var ms []*lease.Manager
	for range 2 {
		s, err := redislease.New(srv.NewClient(t, nil), redislease.Options{Prefix: "cams"})
		require.NoError(t, err)
		ms = append(ms, newManager(t, 2, lease.Options{Store: s, TTL: time.Minute, Grace: grace, SweepInterval: -1}))
	}
	alice, err := ms[0].Grant(ctx, lease.Request{Holder: "alice", Cost: 1})
	require.NoError(t, err)
	// A lease whose TTL is below its Grace lapses at its TTL at the latest.
	_, err = ms[1].Grant(ctx, lease.Request{Holder: "bob", Cost: 1, TTL: 200 * time.Millisecond, Grace: time.Minute})
	require.NoError(t, err)

	srv.Restart(0)
	restarted := time.Now()
	for _, m := range ms {
		_, err = m.Grant(ctx, lease.Request{Holder: "carol", Cost: 2})
		var re *lease.RejectedError
		require.ErrorAs(t, err, &re, "a grant right after the loss")
		require.ErrorIs(t, err, lease.ErrRecovering)
		assert.LessOrEqual(t, re.RetryAfter, grace, "the hold outlasts the leases")
	}
	var c lease.Lease
	require.Eventually(t, func() bool {
		c, err = ms[1].Grant(ctx, lease.Request{Holder: "carol", Cost: 2})
		return err == nil
	}, 5*time.Second, 20*time.Millisecond, "grants never resumed: %v", err)
	assert.GreaterOrEqual(t, time.Since(restarted), grace-50*time.Millisecond)
	assert.Less(t, time.Since(restarted), 5*grace, "held back longer than the window")
	assert.True(t, c.CreatedAt.After(alice.HeartbeatAt.Add(grace)), "granted before alice's lease lapsed")
	assert.Greater(t, c.Token, alice.Token)
}
