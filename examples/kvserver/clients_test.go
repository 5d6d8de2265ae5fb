package main

// kvserver with the Redis clients its users have, unchanged and with their
// default options: node-redis 4, 5 and 6 and ioredis 5 and 6 (Node.js, at
// the versions testdata/jsclients's lock file pins), redis-py (Debian's
// python3-redis) and redis-benchmark. go-redis is in server_test.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv"
)

// unavailable skips t, or fails it when TTLKIT_REQUIRE_BACKENDS=1 (CI
// installs every client).
func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	if testenv.Required() {
		t.Fatalf(format+" (and "+testenv.EnvRequire+"=1)", args...)
	}
	t.Skipf(format, args...)
}

// jsClients returns the directory of testdata/jsclients with its packages
// installed (npm ci, which .ci/run does), or skips.
func jsClients(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		unavailable(t, "no node on PATH")
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "jsclients"))
	require.NoError(t, err)
	for _, pkg := range []string{"redis", "redis4", "redis5", "ioredis", "ioredis5"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
			unavailable(t, "the Node.js clients are not installed: npm ci --prefix %s", dir)
		}
	}
	return dir
}

// runClient runs a client's script with args and decodes the one line of
// JSON it prints.
func runClient(t *testing.T, dir string, name string, args ...string) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, _ := cmd.Output()
	var r map[string]any
	require.NoError(t, json.Unmarshal(out, &r), "%s %q: %s\n%s", name, args, out, errOut.String())
	return r
}

// TestNodeClients runs each Node.js client through its connect sequence
// (node-redis 6 opens with HELLO 3; ioredis asks INFO) and a session.
func TestNodeClients(t *testing.T) {
	dir := jsClients(t)
	_, addr := startServer(t, Config{})
	for _, name := range []string{"redis4", "redis5", "redis", "ioredis5", "ioredis"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := runClient(t, dir, "node", "clients.mjs", name, "redis://"+addr, name+":")
			assert.Equal(t, map[string]any{
				"ping": "PONG", "set": "OK", "get": "v", "ttl": float64(100), "missing": nil,
				"incr": []any{float64(1), float64(10), float64(9)}, "incrbyfloat": "9.5",
				"multi": []any{"OK", float64(2)},
			}, r)
		})
	}
}

// python returns a Python 3 that can import redis (Debian's python3-redis
// is for the system's /usr/bin/python3, which PATH may not lead to first),
// or skips.
func python(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import redis").Run() == nil {
			return py
		}
	}
	unavailable(t, "no python3 with the redis package (Debian's python3-redis)")
	return ""
}

// TestRedisPy runs redis-py with its default options.
func TestRedisPy(t *testing.T) {
	py := python(t)
	_, addr := startServer(t, Config{})
	dir, err := filepath.Abs("testdata")
	require.NoError(t, err)
	r := runClient(t, dir, py, "redispy.py", "redis://"+addr+"/0", "py:")
	assert.Equal(t, map[string]any{
		"ping": true, "set": true, "get": "v", "ttl": float64(100), "missing": nil,
		"incr": []any{float64(1), float64(10), float64(9)}, "incrbyfloat": 9.5,
		"multi": []any{true, float64(2)},
	}, r)
}

// TestRedisBenchmark runs redis-benchmark's tests of the commands kvserver
// has (it stops at the first error reply, so each must work) to the end.
func TestRedisBenchmark(t *testing.T) {
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		unavailable(t, "no redis-benchmark on PATH (Debian's redis-tools)")
	}
	_, addr := startServer(t, Config{})
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "redis-benchmark", "-h", host, "-p", port,
		"-t", "set,get,incr,mset", "-n", "2000", "-q").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, test := range []string{"SET: ", "GET: ", "INCR: ", "MSET (10 keys): "} {
		assert.Contains(t, string(out), test, "%s", out)
	}
	assert.NotContains(t, string(out), "Error", "%s", out)
	assert.NotContains(t, string(out), "Could not fetch server CONFIG", "%s", out)
}
