package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/browsertest"
)

// syncBuffer is a log destination the server's goroutines and the test
// share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// resp encodes args as a RESP array, as a client sends a command.
func resp(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// TestCrossProtocol sends what a browser sends when a page aims a request at
// the server's port, with RESP after the headers in the same packet: the
// connection is closed, the attack logged, and nothing of it runs.
func TestCrossProtocol(t *testing.T) {
	logs := &syncBuffer{}
	_, addr := startServer(t, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ctx := testContext(t)
	c := newClient(t, addr)
	payload := resp("SET", "attacked", "1") + resp("FLUSHALL")
	cases := map[string]string{
		"POST":             "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n\r\n" + payload,
		"POST, lower case": "post /x HTTP/1.1\r\n\r\n" + payload,
		"GET request line": "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" + payload,
		"PUT request line": "PUT /k HTTP/1.0\r\n\r\n" + payload,
		"Host: first":      "Host: 127.0.0.1:6380\r\n" + payload,
		"Host: as RESP":    resp("Host:", "127.0.0.1") + payload,
		"POST as RESP":     resp("POST", "/") + payload,
		"HTTP/2 preface":   "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + payload,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, c.Set(ctx, "keep", "me", 0).Err())
			before := strings.Count(logs.String(), "SECURITY ATTACK")
			rc := dialRaw(t, addr)
			rc.send(in)
			b, err := io.ReadAll(rc.r)
			require.NoError(t, err, "the server closes the connection")
			assert.Empty(t, string(b), "no reply: nothing ran")
			assert.Equal(t, before+1, strings.Count(logs.String(), "SECURITY ATTACK"), "logged once")
			assert.EqualValues(t, 0, c.Exists(ctx, "attacked").Val(), "the command after the headers did not run")
			assert.Equal(t, "me", c.Get(ctx, "keep").Val(), "FLUSHALL did not run")
		})
	}
	// A key, value or argument that merely looks like HTTP is data.
	require.NoError(t, c.Set(ctx, "/", "HTTP/1.1", 0).Err())
	require.NoError(t, c.Set(ctx, "POST", "Host:", 0).Err())
	assert.Equal(t, "Host:", c.Get(ctx, "POST").Val())
	rc := dialRaw(t, addr)
	rc.send("SET / HTTP/1.1\r\nGET /\r\n")
	assert.Equal(t, "+OK", rc.line())
	assert.Equal(t, "$8", rc.line())
}

// TestBrowserPOST has a real browser, on a page of another site, send a
// no-cors fetch POST, a form and an image request to the server, each
// carrying RESP that would write a key: none is written.
func TestBrowserPOST(t *testing.T) {
	bctx := browsertest.New(t)
	logs := &syncBuffer{}
	_, addr := startServer(t, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ctx := testContext(t)
	c := newClient(t, addr)
	body := "\r\n" + resp("SET", "attacked", "1") + resp("SET", "also", "1")
	reqs := browsertest.CrossSiteKinds("http://"+addr+"/", body)
	reqs = append(reqs, browsertest.Request{Kind: "form", URL: "http://" + addr + "/",
		Body: "x=\r\n" + resp("SET", "urlencoded", "1"), ContentType: "application/x-www-form-urlencoded"})
	browsertest.Attack(t, bctx, reqs...)
	for _, k := range []string{"attacked", "also", "urlencoded"} {
		assert.EqualValues(t, 0, c.Exists(ctx, k).Val(), "key %s written by a page", k)
	}
	assert.Equal(t, len(reqs), strings.Count(logs.String(), "SECURITY ATTACK"), "each request logged as an attack")
	require.NoError(t, c.Ping(ctx).Err(), "the server goes on serving")
}
