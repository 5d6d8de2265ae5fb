package agent_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
	"github.com/ttlkit/ttlkit/internal/httpfuzz"
)

func tarOf(name, link string, typ byte, body string) string {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	_ = tw.WriteHeader(&tar.Header{Name: name, Linkname: link, Typeflag: typ, Size: int64(len(body)), Mode: 0o644})
	_, _ = tw.Write([]byte(body))
	_ = tw.Close()
	return b.String()
}

// FuzzFiles sends any request to the agent's files and archive endpoints
// (never /exec: the fuzzer would run its commands): whatever the path or
// the archive, nothing is written outside the work directory, and the
// agent answers with a client error, not a server error or a crash.
func FuzzFiles(f *testing.F) {
	for _, s := range []struct{ method, target, body string }{
		{"PUT", "/files/a/b.txt", "hello"},
		{"GET", "/files/a/b.txt", ""},
		{"GET", "/files/", ""},
		{"PUT", "/files/../outside/x", "x"},
		{"PUT", "/files/a%2F..%2F..%2Foutside%2Fx", "x"},
		{"GET", "/files/%2e%2e/outside/sentinel", ""},
		{"PUT", "/files/link/x", "x"},
		{"PUT", "/archive", tarOf("../outside/x", "", tar.TypeReg, "x")},
		{"PUT", "/archive", tarOf("/abs", "", tar.TypeReg, "x")},
		{"PUT", "/archive", tarOf("link", "../outside", tar.TypeSymlink, "")},
		{"PUT", "/archive", tarOf("d/", "", tar.TypeDir, "")},
		{"PUT", "/archive", "not a tar"},
		{"GET", "/archive", ""},
	} {
		f.Add(s.method, s.target, s.body)
	}
	base := f.TempDir()
	work, outside := filepath.Join(base, "work"), filepath.Join(base, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "sentinel"), []byte("secret"), 0o644); err != nil {
		f.Fatal(err)
	}
	srv, err := agent.New(agent.Options{Dir: work, MaxFile: 1 << 16, MaxArchive: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = srv.Close() })
	// A link out of the work directory, as a command could make one.
	if err := os.Symlink(outside, filepath.Join(work, "link")); err != nil {
		f.Fatal(err)
	}
	h := srv.Handler()
	f.Fuzz(func(t *testing.T, method, target, body string) {
		if !strings.HasPrefix(target, "/files/") && !strings.HasPrefix(target, "/archive") {
			return
		}
		req, ok := httpfuzz.Request(context.Background(), method, target, body)
		if !ok {
			return
		}
		rec := httptest.NewRecorder()
		func() {
			defer func() {
				// The export's way to break a stream it cannot finish.
				if v := recover(); v != nil && v != http.ErrAbortHandler {
					panic(v)
				}
			}()
			h.ServeHTTP(rec, req)
		}()
		if rec.Code >= 500 {
			t.Errorf("%s %s: %d %s", method, target, rec.Code, rec.Body)
		}
		ents, err := os.ReadDir(base)
		if err != nil || len(ents) != 2 {
			t.Fatalf("%s %s wrote beside the work directory: %v", method, target, ents)
		}
		out, err := os.ReadDir(outside)
		if err != nil || len(out) != 1 {
			t.Fatalf("%s %s wrote outside the work directory: %v", method, target, out)
		}
		if b, err := os.ReadFile(filepath.Join(outside, "sentinel")); err != nil || string(b) != "secret" {
			t.Fatalf("%s %s changed a file outside: %q %v", method, target, b, errors.Join(err))
		}
	})
}
