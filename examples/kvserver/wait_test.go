package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWaitEndsWithItsClient: a WAIT that would block for ever (no
// replicas, no timeout) ends when its client hangs up or is killed: its
// connection is gone at once, not at shutdown. A command pipelined behind
// a WAIT with a timeout is answered after it, and the connection serves on.
func TestWaitEndsWithItsClient(t *testing.T) {
	srv, addr := startServer(t, Config{})
	conns := func() int {
		srv.connMu.Lock()
		defer srv.connMu.Unlock()
		return len(srv.conns)
	}

	hangs := dialRaw(t, addr)
	hangs.send(encodeCommand("WAIT", "1", "0"))
	require.Eventually(t, func() bool { return conns() == 1 }, 5*time.Second, time.Millisecond)
	time.Sleep(50 * time.Millisecond) // the WAIT is blocked
	require.NoError(t, hangs.c.Close())
	assert.Eventually(t, func() bool { return conns() == 0 }, 5*time.Second, time.Millisecond, "the hung-up client's connection is gone")

	killed := dialRaw(t, addr)
	killed.send(encodeCommand("CLIENT", "SETNAME", "waiter"))
	require.Equal(t, "+OK\r\n", killed.reply())
	killed.send(encodeCommand("WAIT", "1", "0"))
	admin := dialRaw(t, addr)
	list := admin.do("CLIENT", "LIST")
	var waiterID string
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, "name=waiter") {
			waiterID = strings.TrimPrefix(strings.Fields(line)[0], "id=")
		}
	}
	require.NotEmpty(t, waiterID, "%s", list)
	assert.Equal(t, ":1\r\n", admin.do("CLIENT", "KILL", "ID", waiterID))
	killed.closed()
	assert.Eventually(t, func() bool { return conns() == 1 }, 5*time.Second, time.Millisecond, "only the admin connection is left")

	// A pipelined command waits behind a WAIT with a timeout, and the
	// connection then reads on as before.
	c := dialRaw(t, addr)
	start := time.Now()
	c.send(encodeCommand("WAIT", "1", "300") + encodeCommand("PING"))
	assert.Equal(t, ":0\r\n", c.reply())
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	assert.Equal(t, "+PONG\r\n", c.reply())
	assert.Equal(t, "$3\r\nyes\r\n", c.do("ECHO", "yes"))
}
