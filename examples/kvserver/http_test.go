package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetricsAndHealth: /metrics shows each database's keyspace through
// the metrics package, and the server's connections and commands; both
// endpoints answer loopback names and the configured hosts only, and no
// other site's page.
func TestMetricsAndHealth(t *testing.T) {
	srv, addr := startServer(t, Config{})
	ctx := context.Background()
	c0 := newClient(t, addr)
	c3 := newClient(t, addr, func(o *redis.Options) { o.DB = 3 })
	require.NoError(t, c0.Do(ctx, "DEBUG", "SET-ACTIVE-EXPIRE", "0").Err()) // only a lookup expires "short"
	require.NoError(t, c0.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, c0.Set(ctx, "short", "v", time.Millisecond).Err())
	require.NoError(t, c3.Set(ctx, "in3", "v", time.Hour).Err())
	time.Sleep(5 * time.Millisecond)
	require.ErrorIs(t, c0.Get(ctx, "short").Err(), redis.Nil, "found expired on access")

	reg, err := srv.Registry()
	require.NoError(t, err)
	problems, err := testutil.GatherAndLint(reg)
	require.NoError(t, err)
	assert.Empty(t, problems)

	h, err := srv.httpHandler([]string{"kv.example"})
	require.NoError(t, err)
	get := func(path string, header map[string]string) (int, string) {
		req := httptest.NewRequest("GET", path, nil)
		req.Host = "127.0.0.1:9380"
		for k, v := range header {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, string(b)
	}
	code, body := get("/metrics", nil)
	require.Equal(t, http.StatusOK, code)
	for _, want := range []string{
		`kvserver_keyspace_keys{db="0"} 1`,
		`kvserver_keyspace_keys{db="3"} 1`,
		`kvserver_keyspace_keys_with_deadline{db="3"} 1`,
		`kvserver_keyspace_expired_total{db="0",reason="passive"} 1`,
	} {
		assert.Contains(t, body, want)
	}
	assert.Regexp(t, `kvserver_connected_clients [1-9]`, body)
	assert.Regexp(t, `kvserver_commands_processed_total [1-9]`, body)
	code, body = get("/healthz", nil)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)

	code, _ = get("/metrics", map[string]string{"Host": "kv.example:9380"})
	assert.Equal(t, http.StatusOK, code, "a configured name")
	code, _ = get("/metrics", map[string]string{"Host": "rebind.example:9380"})
	assert.Equal(t, http.StatusForbidden, code, "a DNS rebinding name")
	code, _ = get("/metrics", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"})
	assert.Equal(t, http.StatusForbidden, code, "another site's page")
}

// TestRunServesHTTP: the command serves /metrics on its -http address and
// stops it with the server.
func TestRunServesHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	httpAddr := hln.Addr().String()
	require.NoError(t, hln.Close())
	ctx, cancel := context.WithCancel(context.Background())
	var logs strings.Builder
	done := make(chan error, 1)
	go func() { done <- run(ctx, ln, Config{HTTPAddr: httpAddr}, newTextLogger(&logs)) }()
	var res *http.Response
	require.Eventually(t, func() bool {
		res, err = http.Get("http://" + httpAddr + "/metrics")
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	assert.Contains(t, string(b), "kvserver_connected_clients")
	cancel()
	require.NoError(t, <-done)
	_, err = http.Get("http://" + httpAddr + "/healthz")
	assert.Error(t, err, "the HTTP server stopped with the server")
}

func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
