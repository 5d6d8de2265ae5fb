package redislease_test

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/redistest"
	"github.com/ttlkit/ttlkit/lease"
)

// lossyConn loses the first reply that arrives after arm is set: the server
// ran the command, but the client sees a broken connection, and go-redis
// sends the same command again on a new one.
type lossyConn struct {
	net.Conn
	arm *atomic.Bool
}

func (c lossyConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.arm.CompareAndSwap(true, false) {
		_ = c.Conn.Close()
		return 0, io.ErrUnexpectedEOF
	}
	return n, err
}

// TestRepeatAfterLostReply checks what go-redis's repeat of a Release or a
// Sweep whose reply was lost returns: the lease released, the batch swept,
// as the first attempt did; a separate call afterwards sees nothing.
func TestRepeatAfterLostReply(t *testing.T) {
	r := redistest.OpenRedis(t)
	var arm atomic.Bool
	o := *r.Client.Options()
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return lossyConn{c, &arm}, nil
	}
	c := redis.NewClient(&o)
	t.Cleanup(func() { _ = c.Close() })
	s := newStore(t, c, storePrefix(r))

	l, err := s.Grant(ctx, args("alice", 10, time.Minute, time.Minute, 1))
	require.NoError(t, err)
	arm.Store(true)
	got, err := s.Release(ctx, l.ID, "")
	require.False(t, arm.Load(), "no reply was lost")
	require.NoError(t, err, "the repeat of a release that took effect")
	assert.Equal(t, l, got)
	_, err = s.Release(ctx, l.ID, "")
	require.ErrorIs(t, err, lease.ErrNotFound, "a second, separate release")
	u, n, err := s.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, [2]int{0, 0}, [2]int{u, n})

	e, err := s.Grant(ctx, args("bob", 10, time.Minute, 50*time.Millisecond, 1))
	require.NoError(t, err)
	time.Sleep(150 * time.Millisecond)
	arm.Store(true)
	swept, err := s.Sweep(ctx, 10)
	require.False(t, arm.Load(), "no reply was lost")
	require.NoError(t, err)
	require.Len(t, swept, 1, "the repeat of a sweep that took effect")
	assert.Equal(t, e.ID, swept[0].ID)
	swept, err = s.Sweep(ctx, 10)
	require.NoError(t, err)
	assert.Empty(t, swept, "a second, separate sweep")
}
