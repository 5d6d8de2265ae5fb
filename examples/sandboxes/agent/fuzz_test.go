package agent_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// harmless reports whether a fuzzed command may run: "true", echo, or
// "touch ran" (the mark of a command that ran).
func harmless(command []string) bool {
	switch {
	case len(command) == 0:
		return true // refused
	case command[0] == "echo":
		return true
	case len(command) == 1 && command[0] == "true":
		return true
	}
	return len(command) == 2 && command[0] == "touch" && command[1] == "ran"
}

// FuzzExec sends any request with any Authorization to the agent's /exec
// (any other route is FuzzFiles'): without the token it is a 401 and runs
// nothing; with it, a body that is not one exec request, a bad command or
// an impossible timeout is a 400, and a good one runs and answers 200 with
// its result. Nothing is a server error or crashes the agent. Only
// harmless commands run: a body that decodes to any other is skipped.
func FuzzExec(f *testing.F) {
	const token = "fuzz-token"
	for _, s := range []struct{ method, target, body, authz string }{
		{"POST", "/exec", `{"command": ["true"]}`, "Bearer " + token},
		{"POST", "/exec", `{"command": ["echo", "hi"], "timeout_sec": 5}`, "Bearer " + token},
		{"POST", "/exec", `{"command": ["touch", "ran"]}`, "Bearer " + token},
		{"POST", "/exec", `{"command": ["touch", "ran"]}`, "Bearer wrong"},
		{"POST", "/exec", `{"command": ["touch", "ran"]}`, ""},
		{"POST", "/exec", `{"command": ["touch", "ran"]}`, "bearer " + token},
		{"POST", "/exec", `{"command": ["true"], "timeout_sec": 1e300}`, "Bearer " + token},
		{"POST", "/exec", `{"command": ["true"], "timeout_sec": -1}`, "Bearer " + token},
		{"POST", "/exec", `{"command": ["true"], "timeout_sec": 1e-12}`, "Bearer " + token},
		{"POST", "/exec", `{"command": []}`, "Bearer " + token},
		{"POST", "/exec", `{"command": [""]}`, "Bearer " + token},
		{"POST", "/exec", `{"command": ["echo", "a\u0000b"]}`, "Bearer " + token},
		{"POST", "/exec", `{"command": "true"}`, "Bearer " + token},
		{"POST", "/exec", `{"command": ["true"]} {"command": ["touch", "ran"]}`, "Bearer " + token},
		{"POST", "/exec", `not json`, "Bearer " + token},
		{"POST", "/exec?x=1", `{"command": ["true"], "extra": 1}`, "Bearer " + token},
		{"GET", "/exec", ``, "Bearer " + token},
		{"POST", "/exec/../exec", `{"command": ["touch", "ran"]}`, "Bearer " + token},
	} {
		f.Add(s.method, s.target, s.body, s.authz)
	}
	dir := f.TempDir()
	srv, err := agent.New(agent.Options{Dir: dir, Token: token, MaxOutput: 1 << 12})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = srv.Close() })
	h := srv.Handler()
	mark := filepath.Join(dir, "ran")
	f.Fuzz(func(t *testing.T, method, target, body, authz string) {
		if !strings.HasPrefix(target, "/exec") {
			return
		}
		// Decoded as the agent does, but to the end: a request whose
		// command is not harmless never reaches the agent.
		var ask agent.ExecRequest
		dec := json.NewDecoder(strings.NewReader(body))
		parsed := dec.Decode(&ask) == nil
		if parsed && !harmless(ask.Command) {
			return
		}
		_, tail := dec.Token()
		single := parsed && tail == io.EOF
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, ok := httpfuzz.Request(ctx, method, target, body)
		if !ok || !httpfuzz.SetHeader(req, "Authorization", authz) {
			return
		}
		defer os.Remove(mark)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		code := rec.Code
		if code >= 500 || rec.Body.Len() > 64<<10 {
			t.Fatalf("%s %q (%.100q): %d, %d bytes: %.300s", method, target, body, code, rec.Body.Len(), rec.Body)
		}
		_, err := os.Stat(mark)
		ran := err == nil
		if authz != "Bearer "+token {
			if code != http.StatusUnauthorized || ran {
				t.Fatalf("%s %q without the token (%q): %d, ran: %v", method, target, authz, code, ran)
			}
			return
		}
		if method != http.MethodPost || req.URL.Path != "/exec" {
			if ran {
				t.Fatalf("%s %q ran a command", method, target)
			}
			return
		}
		valid := single && agent.CheckCommand(ask.Command) == nil && ask.TimeoutSec >= 0 &&
			ask.TimeoutSec <= math.Floor(float64(math.MaxInt64)/float64(time.Second))
		if !valid {
			if code != http.StatusBadRequest || ran {
				t.Fatalf("POST %q (%.200q): %d, ran: %v, want a 400: %.300s", target, body, code, ran, rec.Body)
			}
			return
		}
		var res agent.ExecResult
		if code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &res) != nil {
			t.Fatalf("POST %q (%.200q): %d %.300s", target, body, code, rec.Body)
		}
		if res.TimedOut && (ask.TimeoutSec == 0 || ask.TimeoutSec >= 1) || !res.TimedOut && res.ExitCode != 0 {
			t.Fatalf("POST %q (%.200q): %+v", target, body, res)
		}
		if ask.Command[0] == "touch" && !res.TimedOut && !ran {
			t.Fatalf("POST %q (%.200q) did not run: %+v", target, body, res)
		}
	})
}
