package main

import (
	"io"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRequirePass is requirepass from the outside, with go-redis: no
// credentials, a wrong password and the right one, with and without the
// "default" username.
func TestRequirePass(t *testing.T) {
	_, addr := startServer(t, Config{RequirePass: "s3cret"})

	t.Run("no credentials", func(t *testing.T) {
		ctx := testContext(t)
		c := newClient(t, addr)
		assert.EqualError(t, c.Ping(ctx).Err(), errNoAuth)
		assert.EqualError(t, c.Set(ctx, "k", "v", 0).Err(), errNoAuth)
		assert.EqualError(t, c.Get(ctx, "k").Err(), errNoAuth)
	})
	t.Run("wrong password", func(t *testing.T) {
		ctx := testContext(t)
		c := newClient(t, addr, func(o *redis.Options) { o.Password = "guess" })
		assert.ErrorContains(t, c.Ping(ctx).Err(), "WRONGPASS")
	})
	t.Run("wrong user", func(t *testing.T) {
		ctx := testContext(t)
		c := newClient(t, addr, func(o *redis.Options) { o.Username, o.Password = "admin", "s3cret" })
		assert.ErrorContains(t, c.Ping(ctx).Err(), "WRONGPASS")
	})
	for name, user := range map[string]string{"password only": "", "default user": "default"} {
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			c := newClient(t, addr, func(o *redis.Options) { o.Username, o.Password = user, "s3cret" })
			require.NoError(t, c.Set(ctx, "k:"+name, "v", 0).Err())
			assert.Equal(t, "v", c.Get(ctx, "k:"+name).Val())
		})
	}
	t.Run("raw protocol", func(t *testing.T) {
		rc := dialRaw(t, addr)
		rc.send("GET k\r\nHELLO 2\r\nAUTH nope\r\nAUTH default nope\r\nAUTH a b c\r\nQUIT\r\n")
		assert.Equal(t, "-"+errNoAuth, rc.line())
		assert.Contains(t, rc.line(), "-NOAUTH HELLO must be called with the client already authenticated")
		assert.Equal(t, "-"+errWrongPass, rc.line())
		assert.Equal(t, "-"+errWrongPass, rc.line())
		assert.Equal(t, "-"+errSyntax, rc.line())
		assert.Equal(t, "+OK", rc.line(), "QUIT needs no AUTH")

		rc = dialRaw(t, addr)
		rc.send("HELLO 2 AUTH default s3cret\r\nPING\r\nAUTH wrong\r\nPING\r\n")
		assert.Equal(t, "*14", rc.line())
		for l := rc.line(); l != "+PONG"; l = rc.line() {
			assert.NotEqual(t, "-", l[:1], "an error before PONG: %s", l)
		}
		assert.Equal(t, "-"+errWrongPass, rc.line())
		assert.Equal(t, "+PONG", rc.line(), "a failed AUTH keeps the client authenticated, as in Redis")

		rc = dialRaw(t, addr)
		rc.send("AUTH s3cret\r\nSET a 1\r\nGET a\r\n")
		assert.Equal(t, "+OK", rc.line())
		assert.Equal(t, "+OK", rc.line())
		assert.Equal(t, "$1", rc.line())
	})
}

// remoteListener makes its connections report a client address on another
// host, as a server bound to a public interface would see them.
type remoteListener struct {
	net.Listener
	from net.Addr
}

type remoteConn struct {
	net.Conn
	from net.Addr
}

func (l remoteListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return remoteConn{c, l.from}, nil
}

func (c remoteConn) RemoteAddr() net.Addr { return c.from }

// startRemoteServer serves cfg on a listener whose clients appear to come
// from 203.0.113.7 (a documentation address).
func startRemoteServer(t *testing.T, cfg Config) string {
	t.Helper()
	srv, err := New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	from := &net.TCPAddr{IP: net.IPv4(203, 0, 113, 7), Port: 50000}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(remoteListener{ln, from}) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-done, ErrServerClosed)
	})
	return ln.Addr().String()
}

// TestProtectedMode: without a password, a client from another host gets
// Redis's DENIED error and is disconnected; with a password it gets in (and
// must AUTH); with protected mode off it gets in.
func TestProtectedMode(t *testing.T) {
	t.Run("no password: refused", func(t *testing.T) {
		addr := startRemoteServer(t, Config{})
		ctx := testContext(t)
		// go-redis drops a new connection that has data waiting before
		// its handshake, so it reports the closed connection, as it does
		// against Redis; the raw connection below reads the error.
		c := newClient(t, addr)
		assert.Error(t, c.Ping(ctx).Err())
		assert.Error(t, c.Set(ctx, "k", "v", 0).Err())
		rc := dialRaw(t, addr)
		assert.Equal(t, "-"+errDenied, rc.line())
		rc.closed()
	})
	t.Run("password: admitted after AUTH", func(t *testing.T) {
		addr := startRemoteServer(t, Config{RequirePass: "pw"})
		ctx := testContext(t)
		assert.EqualError(t, newClient(t, addr).Ping(ctx).Err(), errNoAuth)
		c := newClient(t, addr, func(o *redis.Options) { o.Password = "pw" })
		assert.Equal(t, "PONG", c.Ping(ctx).Val())
	})
	t.Run("protected mode off: admitted", func(t *testing.T) {
		addr := startRemoteServer(t, Config{DisableProtectedMode: true})
		ctx := testContext(t)
		assert.Equal(t, "PONG", newClient(t, addr).Ping(ctx).Val())
	})
	t.Run("loopback: admitted", func(t *testing.T) {
		_, addr := startServer(t, Config{})
		ctx := testContext(t)
		assert.Equal(t, "PONG", newClient(t, addr).Ping(ctx).Val())
	})
}

// TestProtectedModeOnARealInterface repeats the refusal with a real
// connection to one of this host's non-loopback addresses, when it has one.
func TestProtectedModeOnARealInterface(t *testing.T) {
	var ip net.IP
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			ip = n.IP
			break
		}
	}
	if ip == nil {
		t.Skip("this host has no non-loopback IPv4 address")
	}
	srv, err := New(Config{})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Skipf("cannot listen on %v: %v", ip, err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		<-done
	})
	rc := dialRaw(t, ln.Addr().String())
	assert.Equal(t, "-"+errDenied, rc.line())
	rc.closed()
}

// TestDefaultAddressIsLoopback: with no -addr, kvserver listens on the
// loopback interface only.
func TestDefaultAddressIsLoopback(t *testing.T) {
	addr, cfg, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	host, _, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	assert.True(t, net.ParseIP(host).IsLoopback(), "default address %s", addr)
	assert.False(t, cfg.DisableProtectedMode)
	assert.Empty(t, cfg.RequirePass)
	_, cfg, err = parseFlags([]string{"-requirepass", "pw", "-protected-mode=false"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "pw", cfg.RequirePass)
	assert.True(t, cfg.DisableProtectedMode)
}
