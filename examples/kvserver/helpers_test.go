package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// startServer serves a new Server on a loopback port until the test ends.
func startServer(t testing.TB, cfg Config) (*Server, string) {
	t.Helper()
	srv, err := New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-done, ErrServerClosed)
	})
	return srv, ln.Addr().String()
}

// newClient returns a go-redis client of addr, closed when the test ends.
func newClient(t *testing.T, addr string, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: addr, MaxRetries: -1}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// rawConn is a bare TCP connection for protocol-level tests.
type rawConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

func (rc *rawConn) send(s string) {
	rc.t.Helper()
	_, err := rc.c.Write([]byte(s))
	require.NoError(rc.t, err)
}

// line reads one reply line without its CRLF.
func (rc *rawConn) line() string {
	rc.t.Helper()
	l, err := rc.r.ReadString('\n')
	require.NoError(rc.t, err, "reading a reply line")
	return strings.TrimSuffix(l, "\r\n")
}

// closed asserts that the server closed the connection.
func (rc *rawConn) closed() {
	rc.t.Helper()
	_, err := rc.r.ReadByte()
	require.Error(rc.t, err, "the server should have closed the connection")
}

// reply reads one whole reply, RESP2 or RESP3, and returns it as sent.
func (rc *rawConn) reply() string {
	rc.t.Helper()
	var b strings.Builder
	rc.readReply(&b)
	return b.String()
}

func (rc *rawConn) readReply(b *strings.Builder) {
	l := rc.line()
	b.WriteString(l + "\r\n")
	n, _ := strconv.Atoi(l[1:])
	switch l[0] {
	case '$', '=', '!':
		if n >= 0 {
			buf := make([]byte, n+2)
			_, err := io.ReadFull(rc.r, buf)
			require.NoError(rc.t, err)
			b.Write(buf)
		}
	case '*', '~', '>', '%', '|':
		if l[0] == '%' || l[0] == '|' {
			n *= 2
		}
		for range max(n, 0) {
			rc.readReply(b)
		}
	}
}

// do sends a command as a RESP array and returns its reply as sent.
func (rc *rawConn) do(args ...string) string {
	rc.t.Helper()
	rc.send(encodeCommand(args...))
	return rc.reply()
}

func encodeCommand(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}
