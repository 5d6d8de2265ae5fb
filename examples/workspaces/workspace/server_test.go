package workspace_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/workspaces/workspace"
	"github.com/ttlkit/ttlkit/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

const testKey = "backend-key"

func newServer(t testing.TB, dir string) *workspace.Server {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	srv, err := workspace.New(workspace.Options{ID: "demo", Dir: dir, Key: testKey})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// assertOnlyDir fails if root holds anything but dir.
func assertOnlyDir(t testing.TB, root, dir string) {
	t.Helper()
	ents, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, e := range ents {
		if filepath.Join(root, e.Name()) != dir {
			t.Fatalf("%s was written outside the workspace", e.Name())
		}
	}
}

func call(t *testing.T, h http.Handler, method, path, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, "http://127.0.0.1:35973"+path, strings.NewReader(body)) // as the proxy sends it
	req.Header.Set(workspace.KeyHeader, testKey)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	srv := newServer(t, dir)
	code, _ := call(t, srv, "PUT", "/api/files/main.go", "package main\n")
	require.Equal(t, http.StatusOK, code)
	b, err := os.ReadFile(filepath.Join(dir, "main.go"))
	require.NoError(t, err)
	assert.Equal(t, "package main\n", string(b))
	code, body := call(t, srv, "GET", "/api/files", "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"name":"main.go"`)
	code, body = call(t, srv, "GET", "/api/files/main.go", "")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "package main\n", body)
	code, _ = call(t, srv, "PUT", "/api/files/big", strings.Repeat("x", workspace.MaxFile+1))
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)
	code, _ = call(t, srv, "DELETE", "/api/files/main.go", "")
	assert.Equal(t, http.StatusNoContent, code)
	code, _ = call(t, srv, "GET", "/api/files/main.go", "")
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = call(t, srv, "GET", "/api/files/.hidden", "")
	assert.Equal(t, http.StatusBadRequest, code)
}

// TestForeignHostRefused: a request for a name (a page under a DNS-rebinding
// name, which may send the key header as its own origin's) is refused before
// the key is looked at or anything runs, even with the right key; the
// proxy's address, any IP address and a loopback name are answered.
func TestForeignHostRefused(t *testing.T) {
	dir := t.TempDir()
	srv := newServer(t, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("mine"), 0o644))
	for _, r := range []struct{ method, path, body string }{
		{"PUT", "/api/files/pwned.txt", "pwned"},
		{"DELETE", "/api/files/keep.txt", ""},
		{"GET", "/api/files", ""},
		{"GET", "/", ""},
		{"GET", "/terminal", ""},
		{"GET", "/healthz", ""},
	} {
		for _, key := range []string{testKey, "", "another-key"} {
			req := httptest.NewRequest(r.method, "http://evil.example:35973"+r.path, strings.NewReader(r.body))
			req.Header.Set(workspace.KeyHeader, key)
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			assert.Equal(t, http.StatusForbidden, rec.Code, "%s %s, key %q", r.method, r.path, key)
			assert.NotContains(t, rec.Body.String(), "proxy", "refused for its Host, not its key")
		}
	}
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1, "nothing was written")
	b, err := os.ReadFile(filepath.Join(dir, "keep.txt"))
	require.NoError(t, err, "nothing was deleted")
	assert.Equal(t, "mine", string(b))

	for _, host := range []string{"127.0.0.1:35973", "[::1]:35973", "localhost:35973", "10.0.0.7:8080"} {
		req := httptest.NewRequest("PUT", "http://"+host+"/api/files/a.txt", strings.NewReader(host))
		req.Header.Set(workspace.KeyHeader, testKey)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusOK, rec.Code, host)
	}
}

// TestTerminal: keys are echoed, Enter runs the line, output streams.
func TestTerminal(t *testing.T) {
	dir := t.TempDir()
	srv := newServer(t, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hi\n"), 0o644))
	hs := httptest.NewServer(srv)
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/terminal",
		&websocket.DialOptions{HTTPHeader: http.Header{workspace.KeyHeader: {testKey}}})
	require.NoError(t, err)
	defer c.CloseNow()
	var screen strings.Builder
	until := func(s string) {
		t.Helper()
		for !strings.Contains(screen.String(), s) {
			_, b, err := c.Read(ctx)
			require.NoError(t, err, "screen so far: %q", screen.String())
			screen.Write(b)
		}
	}
	until(workspace.Prompt)
	for _, k := range []string{"l", "s", "\r"} {
		require.NoError(t, c.Write(ctx, websocket.MessageText, []byte(k)))
	}
	until("notes.txt")
	require.NoError(t, c.Write(ctx, websocket.MessageText, []byte("cat notes.txt\r")))
	until("hi\r\n")
	require.NoError(t, c.Write(ctx, websocket.MessageText, []byte("count 1000\r")))
	until("3\r\n")
	require.NoError(t, c.Write(ctx, websocket.MessageText, []byte{3})) // Ctrl-C
	until("^C")
	require.NoError(t, c.Close(websocket.StatusNormalClosure, ""))
}
