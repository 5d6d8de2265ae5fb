package main

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/expiry"
)

// pipeClient talks RESP to a server over net.Pipe, which works inside a
// synctest bubble where real sockets do not.
type pipeClient struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func servePipe(t *testing.T, srv *Server) *pipeClient {
	cli, conn := net.Pipe()
	go func() { _ = srv.ServeConn(conn) }()
	return &pipeClient{t: t, c: cli, r: bufio.NewReader(cli)}
}

// do sends an inline command and returns the first line of the reply.
func (p *pipeClient) do(cmd string) string {
	p.t.Helper()
	_, err := p.c.Write([]byte(cmd + "\r\n"))
	require.NoError(p.t, err)
	line, err := p.r.ReadString('\n')
	require.NoError(p.t, err)
	return strings.TrimSuffix(line, "\r\n")
}

// TestMiniRedisTimelineThroughServer is a mini Redis's expiry timeline through
// the server:
// 100 keys with a 10 s TTL, none read; active expiry alone removes them all
// soon after 10 s. Time is synctest's, so the figures are exact.
func TestMiniRedisTimelineThroughServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := New(Config{}) // the defaults: 1 s, 20 keys, 25 %
		require.NoError(t, err)
		defer func() { require.NoError(t, srv.Close()) }()
		p := servePipe(t, srv)
		defer p.c.Close()

		for i := range 100 {
			require.Equal(t, "+OK", p.do(fmt.Sprintf("SET key:%d value_%d EX 10", i, i)))
		}
		require.Equal(t, ":100", p.do("DBSIZE"))
		time.Sleep(3 * time.Second)
		require.Equal(t, ":7", p.do("TTL key:0"))
		require.Equal(t, ":7000", p.do("PTTL key:0"))
		require.Equal(t, ":100", p.do("DBSIZE"), "nothing expires early")

		time.Sleep(7*time.Second + 1100*time.Millisecond) // one cycle after the deadline
		synctest.Wait()
		require.Equal(t, ":0", p.do("DBSIZE"))
		st := srv.dbs[0].Stats()
		require.Equal(t, uint64(100), st.ExpiredActive)
		require.Zero(t, st.ExpiredPassive, "no key was read")
		require.Greater(t, st.Rounds, st.Cycles, "a cycle repeated its round while above the threshold")
		require.Equal(t, ":-2", p.do("TTL key:0"))
	})
}

// TestPassiveExpiryThroughServerSynctest: with active expiry off, a key read
// after its deadline is gone and counted as passive expiry.
func TestPassiveExpiryThroughServerSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := New(Config{Expiry: expiry.Options{Interval: -1}})
		require.NoError(t, err)
		defer func() { require.NoError(t, srv.Close()) }()
		p := servePipe(t, srv)
		defer p.c.Close()

		require.Equal(t, "+OK", p.do("SET k v PX 1500"))
		require.Equal(t, "+OK", p.do("SET stays v"))
		time.Sleep(1499 * time.Millisecond)
		require.Equal(t, ":1", p.do("PTTL k"))
		// As in Redis, a key expires once the clock in milliseconds is
		// past its expire time: it is still there at that millisecond.
		time.Sleep(time.Millisecond)
		require.Equal(t, ":0", p.do("PTTL k"))
		require.Equal(t, ":1", p.do("EXISTS k"), "not expired within its expire time's millisecond")
		require.Zero(t, srv.dbs[0].Stats().ExpiredPassive)
		time.Sleep(time.Millisecond)
		require.Equal(t, ":2", p.do("DBSIZE"), "not found yet, still counted")
		require.Equal(t, "$-1", p.do("GET k"))
		require.Equal(t, ":1", p.do("DBSIZE"))
		require.Equal(t, uint64(1), srv.dbs[0].Stats().ExpiredPassive)
		require.Equal(t, ":0", p.do("PERSIST k"), "an expired key cannot be persisted")
	})
}

// TestActiveExpiryThroughTCP uses real time: keys with a 50 ms TTL that
// nobody reads disappear through active expiry, and INFO reports it.
func TestActiveExpiryThroughTCP(t *testing.T) {
	_, addr := startServer(t, Config{Expiry: expiry.Options{Interval: 10 * time.Millisecond}})
	ctx := testContext(t)
	c := newClient(t, addr)
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 200 {
			p.Set(ctx, fmt.Sprint("k", i), "v", 50*time.Millisecond)
		}
		p.Set(ctx, "kept", "v", 0)
		return nil
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return c.DBSize(ctx).Val() == 1
	}, 3*time.Second, 10*time.Millisecond)
	info, err := c.Info(ctx, "expiry").Result()
	require.NoError(t, err)
	require.Contains(t, info, "\r\nexpired_active:200\r\n")
	require.Contains(t, info, "\r\nexpired_passive:0\r\n")
	require.Contains(t, info, "\r\ninterval_ms:10\r\n")
	stats, err := c.Info(ctx, "stats").Result()
	require.NoError(t, err)
	require.Contains(t, stats, "\r\nexpired_keys:200\r\n")
}

// TestMockClock proves that Config.Expiry.Clock reaches both the keyspace
// and the server's own reading of time (EXPIRE, TTL, SET EX).
func TestMockClock(t *testing.T) {
	mock := clock.NewMock()
	mock.Set(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	srv, err := New(Config{Expiry: expiry.Options{Clock: mock, Interval: -1}})
	require.NoError(t, err)
	defer func() { require.NoError(t, srv.Close()) }()
	p := servePipe(t, srv)
	defer p.c.Close()

	require.Equal(t, "+OK", p.do("SET k v EX 10"))
	require.Equal(t, fmt.Sprintf(":%d", mock.Now().Unix()+10), p.do("EXPIRETIME k"))
	mock.Add(4 * time.Second)
	require.Equal(t, ":6000", p.do("PTTL k"))
	require.Equal(t, ":1", p.do("EXPIRE k 2"))
	require.Equal(t, ":2000", p.do("PTTL k"))
	mock.Add(2 * time.Second)
	// As in Redis, a key expires once the clock in milliseconds is past
	// its expire time.
	require.Equal(t, ":0", p.do("PTTL k"))
	require.Equal(t, ":1", p.do("EXISTS k"))
	mock.Add(time.Millisecond)
	require.Equal(t, "$-1", p.do("GET k"))
	require.Equal(t, ":-2", p.do("TTL k"))
	require.Equal(t, "+OK", p.do(fmt.Sprintf("SET at v PXAT %d", mock.Now().UnixMilli()+1)))
	require.Equal(t, ":1", p.do("PTTL at"))
	mock.Add(time.Millisecond)
	require.Equal(t, ":0", p.do("PTTL at"))
	require.Equal(t, ":1", p.do("EXISTS at"))
	mock.Add(time.Millisecond)
	require.Equal(t, ":0", p.do("EXISTS at"))
	require.Equal(t, "+OK", p.do(fmt.Sprintf("SET now v PXAT %d", mock.Now().UnixMilli())))
	require.Equal(t, ":0", p.do("EXISTS now"), "an expire time not after now deletes at once, as in Redis")
}

// TestConfigSetHz checks that CONFIG SET hz changes the expiry cycle's
// rate at once: at the default 1 s interval a key is not expired actively
// within 400 ms; at hz 50 it is.
func TestConfigSetHz(t *testing.T) {
	ctx := testContext(t)
	_, addr := startServer(t, Config{})
	c := newClient(t, addr)
	require.Equal(t, "1", c.ConfigGet(ctx, "hz").Val()["hz"])
	require.NoError(t, c.ConfigSet(ctx, "hz", "50").Err())
	require.NoError(t, c.Set(ctx, "k", "v", 20*time.Millisecond).Err())
	require.Eventually(t, func() bool {
		return strings.Contains(c.Info(ctx, "expiry").Val(), "expired_active:1\r\n")
	}, 400*time.Millisecond, 10*time.Millisecond)
	require.Contains(t, c.Info(ctx, "server").Val(), "hz:50\r\n")
}
