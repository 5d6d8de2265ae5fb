package workspace_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/examples/workspaces/workspace"
	"github.com/ttlkit/ttlkit/internal/httpfuzz"
)

// FuzzServer sends arbitrary requests to a workspace's server, with and
// without its key: nothing panics, nothing answers 5xx, a bad file name
// gets a 4xx, and nothing is written outside its directory.
func FuzzServer(f *testing.F) {
	root := f.TempDir()
	dir := root + "/files"
	srv := newServer(f, dir)
	for _, s := range []struct {
		method, target, body string
		key                  bool
	}{
		{"GET", "/", "", true},
		{"GET", "/api/files", "", true},
		{"PUT", "/api/files/a.txt", "hello", true},
		{"GET", "/api/files/a.txt", "", true},
		{"DELETE", "/api/files/a.txt", "", true},
		{"PUT", "/api/files/..%2Fescape", "x", true},
		{"GET", "/api/files/%2e%2e", "", true},
		{"PUT", "/api/files/.hidden", "x", true},
		{"GET", "/terminal", "", true},
		{"GET", "/static/ide.js", "", true},
		{"GET", "/api/files", "", false},
	} {
		f.Add(s.method, s.target, s.body, s.key)
	}
	f.Fuzz(func(t *testing.T, method, target, body string, key bool) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		req, ok := httpfuzz.Request(ctx, method, target, body)
		if !ok {
			return
		}
		if key {
			req.Header.Set(workspace.KeyHeader, testKey)
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code >= 500 || rec.Code < 200 {
			t.Fatalf("%s %q: %d %s", method, target, rec.Code, rec.Body)
		}
		if !key && rec.Code != 403 {
			t.Fatalf("%s %q without the key: %d", method, target, rec.Code)
		}
		if name, isFile := strings.CutPrefix(req.URL.Path, "/api/files/"); isFile && !workspace.ValidName(name) && rec.Code < 300 {
			t.Fatalf("%s %q: file name %q accepted (%d)", method, target, name, rec.Code)
		}
		assertOnlyDir(t, root, dir)
	})
}
