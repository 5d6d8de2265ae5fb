//go:build linux

package main

import (
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSilentConnectionsWaitWithoutGoroutines: a connection that has sent
// nothing waits in the server's epoll set, not on a goroutine of its own;
// it is served as soon as it sends a command, counted as connected, and
// closed by Close like any other.
func TestSilentConnectionsWaitWithoutGoroutines(t *testing.T) {
	srv, err := New(Config{})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	addr := ln.Addr().String()

	before := runtime.NumGoroutine()
	const n = 200
	conns := make([]*rawConn, n)
	for i := range conns {
		conns[i] = dialRaw(t, addr)
	}
	require.Eventually(t, func() bool {
		srv.connMu.Lock()
		defer srv.connMu.Unlock()
		return len(srv.conns) == n
	}, 5*time.Second, time.Millisecond, "every connection is accepted")
	assert.Less(t, runtime.NumGoroutine()-before, n/10, "silent connections have no goroutines")
	conns[0].send("INFO clients\r\n")
	size, err := strconv.Atoi(strings.TrimPrefix(conns[0].line(), "$"))
	require.NoError(t, err)
	info := make([]byte, size+2)
	_, err = io.ReadFull(conns[0].r, info)
	require.NoError(t, err)
	assert.Contains(t, string(info), "connected_clients:200\r\n", "silent connections are connected clients")

	for _, rc := range conns[:n/2] {
		rc.send("PING\r\n")
	}
	for _, rc := range conns[:n/2] {
		assert.Equal(t, "+PONG", rc.line())
	}
	// A client that hangs up without a word is let go too.
	_ = conns[n-1].c.Close()
	require.Eventually(t, func() bool {
		srv.connMu.Lock()
		defer srv.connMu.Unlock()
		return len(srv.conns) == n-1
	}, 5*time.Second, time.Millisecond)

	require.NoError(t, srv.Close())
	require.ErrorIs(t, <-done, ErrServerClosed)
	for _, rc := range conns[n/2 : n-1] {
		_, err := rc.c.Read(make([]byte, 1))
		assert.ErrorIs(t, err, io.EOF, "Close closes the silent connections")
	}
}
