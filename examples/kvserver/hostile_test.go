package main

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMalformedInputClosesConnection sends bad RESP over TCP: each gets
// Redis's protocol error and a closed connection, and the server goes on
// serving others.
func TestMalformedInputClosesConnection(t *testing.T) {
	_, addr := startServer(t, Config{Limits: Limits{MaxBulkLen: 1 << 10, MaxArgs: 16, MaxInline: 256}})
	cases := []struct{ in, want string }{
		{"*abc\r\n", "invalid multibulk length"},
		{"*17\r\n", "invalid multibulk length"},
		{"*9223372036854775808\r\n", "invalid multibulk length"},
		{"*1\r\n$1025\r\n", "invalid bulk length"},
		{"*1\r\n$536870912\r\n", "invalid bulk length"},
		{"*1\r\n$-2\r\n", "invalid bulk length"},
		{"*2\r\n$3\r\nGET\r\n:1\r\n", "expected '$', got ':'"},
		{"*1\r\n*1\r\n*1\r\n$1\r\nx\r\n", "expected '$', got '*'"},
		{"*1\r\n$4\r\nPINGxx\r\n", "bulk string not terminated by CRLF"},
		{"GET \"k\r\n", "unbalanced quotes in request"},
		{strings.Repeat("x", 300) + "\r\n", "too big inline request"},
	}
	for _, tc := range cases {
		rc := dialRaw(t, addr)
		rc.send(tc.in)
		require.Equal(t, "-ERR Protocol error: "+tc.want, rc.line(), "%q", tc.in)
		rc.closed()
	}
	rc := dialRaw(t, addr)
	rc.send("PING\r\n")
	require.Equal(t, "+PONG", rc.line())
}

// TestBadCommandsKeepConnection: unknown commands and wrong arity are
// ordinary errors; the connection stays usable.
func TestBadCommandsKeepConnection(t *testing.T) {
	_, addr := startServer(t, Config{})
	rc := dialRaw(t, addr)
	rc.send("*1\r\n$7\r\nNOTACMD\r\n*1\r\n$3\r\nSET\r\n*3\r\n$6\r\nEXPIRE\r\n$1\r\nk\r\n$1\r\nx\r\nPING\r\n")
	require.Equal(t, "-ERR unknown command 'NOTACMD', with args beginning with: ", rc.line())
	require.Equal(t, "-"+errArity("set"), rc.line())
	require.Equal(t, "-"+errNotInteger, rc.line())
	require.Equal(t, "+PONG", rc.line())
}

// TestTruncatedCommandThenClose: a client that stalls mid-command blocks no
// one, and when it vanishes nothing is left behind (goleak checks).
func TestTruncatedCommandThenClose(t *testing.T) {
	srv, addr := startServer(t, Config{})
	rc := dialRaw(t, addr)
	rc.send("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000000\r\npartial")
	// A stalled client holds no lock: others are served meanwhile.
	rc2 := dialRaw(t, addr)
	rc2.send("SET other v\r\nEXISTS k other\r\n")
	require.Equal(t, "+OK", rc2.line())
	require.Equal(t, ":1", rc2.line())
	require.NoError(t, rc.c.Close())
	require.NoError(t, srv.Close())
}

func TestMaxClients(t *testing.T) {
	_, addr := startServer(t, Config{MaxClients: 1})
	first := dialRaw(t, addr)
	first.send("PING\r\n")
	require.Equal(t, "+PONG", first.line())
	second := dialRaw(t, addr)
	require.Equal(t, "-ERR max number of clients reached", second.line())
	second.closed()
	require.NoError(t, first.c.Close())
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer c.Close()
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			return false
		}
		buf := make([]byte, 7)
		n, _ := io.ReadFull(c, buf)
		return string(buf[:n]) == "+PONG\r\n"
	}, 5*time.Second, 10*time.Millisecond)
}

// TestClientThatNeverReadsStallsNoOne: a client that pipelines GETs of a
// large value and never reads its replies fills the TCP buffers. Only its
// own connection may stall: replies are written outside the keyspace lock,
// so a writer behind it, and readers behind that writer, carry on. The test
// first checks that the stall really happened (the server stopped taking
// the hog's commands partway through its pipeline, blocked writing replies
// nobody reads); otherwise it would pass without testing anything.
func TestClientThatNeverReadsStallsNoOne(t *testing.T) {
	srv, addr := startServer(t, Config{})
	ctx := testContext(t)
	c := newClient(t, addr)
	big := strings.Repeat("v", 1<<20)
	require.NoError(t, c.Set(ctx, "big", big, 0).Err())

	const gets = 200 // 200 MB of replies, far beyond any socket buffers
	base := srv.commands.Load()
	hog := dialRaw(t, addr)
	req := strings.Repeat("*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n", gets)
	go func() { _, _ = hog.c.Write([]byte(req)) }()

	// The hog is stalled once the count of processed commands has started
	// and then stopped moving.
	last := base
	require.Eventually(t, func() bool {
		n := srv.commands.Load()
		stalled := n > base && n == last
		last = n
		return stalled
	}, 10*time.Second, 100*time.Millisecond, "the server never started on the hog's commands")
	require.Less(t, last-base, int64(gets),
		"the server answered the whole pipeline: the replies fit in the buffers and nothing stalled")

	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	require.NoError(t, c.Set(short, "k", "v", 0).Err(), "a SET behind the stalled client")
	other := newClient(t, addr)
	require.Equal(t, "v", other.Get(short, "k").Val(), "a GET behind that SET")
}
