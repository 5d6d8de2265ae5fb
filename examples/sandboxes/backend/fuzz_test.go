package backend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
	"github.com/ttlkit/ttlkit/examples/sandboxes/archive"
	"github.com/ttlkit/ttlkit/examples/sandboxes/backend"
	"github.com/ttlkit/ttlkit/examples/sandboxes/sandbox"
	"github.com/ttlkit/ttlkit/internal/httpfuzz"
	"github.com/ttlkit/ttlkit/pool/probe"
)

const fuzzKey = "fuzz-key"

// fuzzConversations are the only conversations the fuzz test lets get a
// sandbox: every other id could start one more agent process.
var fuzzConversations = []string{"fz-a", "fz-b"}

// fuzzSystem is one backend on process sandboxes with its state in
// memory, an API key and a small warm pool, behind its HTTP API.
type fuzzSystem struct {
	h        http.Handler
	reg      *prometheus.Registry
	entities entities.Store
	work     string // the sandboxes' work directories
}

func newFuzzSystem(f *testing.F) *fuzzSystem {
	dir := f.TempDir()
	const token = "fuzz-agent-token"
	// The label names this process: each fuzz worker runs a system.
	proc, err := sandbox.NewProcess(sandbox.ProcessOptions{
		Agent: []string{os.Args[0], "agent", "-max-output", "4096"}, Label: fmt.Sprintf("sbx-fuzz-%d", os.Getpid()),
		Root: filepath.Join(dir, "work"), StopGrace: time.Second, Env: []string{agent.EnvToken + "=" + token},
		Ready: probe.Options{Timeout: 30 * time.Second, AttemptTimeout: 2 * time.Second},
	})
	if err != nil {
		f.Fatal(err)
	}
	arch, err := archive.NewDir(filepath.Join(dir, "archive"))
	if err != nil {
		f.Fatal(err)
	}
	s := &fuzzSystem{reg: prometheus.NewRegistry(), entities: entities.NewMemoryStore(entities.MemoryStoreOptions{}), work: filepath.Join(dir, "work")}
	m := backend.NewMetrics()
	b, err := backend.New(backend.Config{
		Provisioner: proc, Assignments: backend.NewMemoryAssignments(nil), Entities: s.entities, Archive: arch,
		APIKey: fuzzKey, AgentToken: token, ExecTimeout: 10 * time.Second, Grace: time.Second,
		GCInterval: time.Hour, HealthInterval: time.Hour, MinWarm: 1, MaxWarm: 1, Metrics: m,
	})
	if err != nil {
		f.Fatal(err)
	}
	// Every sandbox goes with the backend (its state is in memory).
	f.Cleanup(func() {
		if err := b.Close(context.Background()); err != nil {
			f.Error(err)
		}
	})
	if err := m.Register(s.reg, b); err != nil {
		f.Fatal(err)
	}
	s.h = backend.NewServer(b, s.reg)
	return s
}

// effects sums up what requests leave behind: the assigned sandboxes, the
// files in their work directories, the execs run. (The warm pool's
// refills come and go on their own.)
func (s *fuzzSystem) effects(t *testing.T) string {
	ents, err := s.entities.List(context.Background(), entities.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range ents {
		fmt.Fprintln(&b, e.ID)
		_, id, _ := strings.Cut(e.ID, "/")
		_ = filepath.WalkDir(filepath.Join(s.work, id), func(p string, d fs.DirEntry, err error) error {
			if err == nil {
				info, _ := d.Info()
				fmt.Fprintln(&b, p, info.Size(), info.ModTime().UnixNano())
			}
			return nil
		})
	}
	mfs, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "sandboxes_exec_duration_seconds" {
			for _, m := range mf.GetMetric() {
				fmt.Fprintln(&b, m.GetLabel(), m.GetHistogram().GetSampleCount())
			}
		}
	}
	return b.String()
}

// route is what the API's mux makes of a request: its pattern and
// wildcards ("" when none matches).
type route struct{ pattern, id, path string }

// router matches requests the way NewServer's mux does.
func router() func(*http.Request) route {
	mux := http.NewServeMux()
	var got route
	for _, p := range []string{"POST /conversations/{id}/exec", "GET /conversations/{id}", "DELETE /conversations/{id}",
		"GET /conversations/{id}/files/{path...}", "PUT /conversations/{id}/files/{path...}"} {
		mux.HandleFunc(p, func(_ http.ResponseWriter, r *http.Request) {
			got = route{p, r.PathValue("id"), r.PathValue("path")}
		})
	}
	return func(r *http.Request) route {
		got = route{}
		mux.ServeHTTP(httptest.NewRecorder(), r)
		return got
	}
}

// canonicalPath reports whether p has no ".", ".." or empty segments.
func canonicalPath(p string) bool {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// execBody decodes body as the exec handler does, and says whether it
// holds one exec request and nothing more.
func execBody(body string) (backend.ExecRequest, bool) {
	var req backend.ExecRequest
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if dec.Decode(&req) != nil {
		return req, false
	}
	_, err := dec.Token()
	return req, err == io.EOF
}

// FuzzAPI sends any request (method, path and query, body, the key in
// either header; oversize pads the body past the exec limit) to the
// backend's HTTP API: nothing panics or answers 5xx, and no answer is
// large. Without the key a request is refused (401 or 403; /healthz is
// open) and changes nothing. With it, a path with dot or empty segments, a
// bad conversation id, a file path out of the work directory, an exec body
// that is not one exec request or whose command or timeout is bad, each
// gets its 4xx; a good exec answers 200, a good write says what it wrote.
// Only fz-a and fz-b get sandboxes, and only "true" and "echo" run.
func FuzzAPI(f *testing.F) {
	s := newFuzzSystem(f)
	match := router()
	for _, seed := range []struct {
		method, target, body, key, authz string
		oversize                         bool
	}{
		{"POST", "/conversations/fz-a/exec", `{"command": ["echo", "hi"]}`, fuzzKey, "", false},
		{"POST", "/conversations/fz-a/exec", `{"command": ["true"], "timeout_sec": 2}`, "", "Bearer " + fuzzKey, false},
		{"POST", "/conversations/fz-a/exec", `{"command": ["true"], "timeout_sec": 1e300}`, fuzzKey, "", false},
		{"POST", "/conversations/fz-a/exec", `{"command": ["true"], "timeout_sec": -1}`, fuzzKey, "", false},
		{"POST", "/conversations/fz-a/exec", `{"command": ["true"]} {"command": ["true"]}`, fuzzKey, "", false},
		{"POST", "/conversations/fz-a/exec", `{"command": ["true"], "x": 1}`, fuzzKey, "", false},
		{"POST", "/conversations/fz-a/exec", `{"command": ["true"]}`, fuzzKey, "", true},
		{"POST", "/conversations/fz-a/exec", `{"command": "true"}`, fuzzKey, "", false},
		{"POST", "/conversations/fz-a/exec", `{"command": ["touch", "x"]}`, "", "", false},
		{"POST", "/conversations/fz-a/exec", `{"command": ["touch", "x"]}`, "wrong", "Bearer " + fuzzKey, false},
		{"POST", "/conversations/other/exec", `{"command": ["true"]}`, "", "Bearer wrong", false},
		{"POST", "/conversations/bad%20id/exec", `{"command": ["true"]}`, fuzzKey, "", false},
		{"POST", "/conversations/!00/exec", ` `, fuzzKey, "", true},
		{"PUT", "/conversations/fz-a/files/src/a.txt", "hello", fuzzKey, "", false},
		{"PUT", "/conversations/fz-b/files/a%2F%2Fb", "x", fuzzKey, "", false},
		{"PUT", "/conversations/fz-a/files/..%2Fx", "x", fuzzKey, "", false},
		{"PUT", "/conversations/fz-a/files/", "x", fuzzKey, "", false},
		{"GET", "/conversations/fz-a/files/src/a.txt", "", fuzzKey, "", false},
		{"GET", "/conversations/fz-a/files/", "", "", "bearer " + fuzzKey, false},
		{"GET", "/conversations/fz-a/files/../../fz-b/files/x", "", fuzzKey, "", false},
		{"GET", "/conversations/fz-a/files/%2e%2e/x", "", fuzzKey, "", false},
		{"GET", "/conversations/fz-a/files//etc/passwd", "", fuzzKey, "", false},
		{"GET", "/conversations/fz-a/files", "", fuzzKey, "", false},
		{"GET", "/conversations/fz-a", "", fuzzKey, "", false},
		{"GET", "/conversations/nobody/files/x", "", fuzzKey, "", false},
		{"DELETE", "/conversations/fz-b", "", fuzzKey, "", false},
		{"PATCH", "/conversations/fz-a", "", fuzzKey, "", false},
		{"GET", "/healthz", "", "", "", false},
		{"GET", "/metrics", "", "", "", false},
		{"GET", "/metrics", "", fuzzKey, "", false},
	} {
		f.Add(seed.method, seed.target, seed.body, seed.key, seed.authz, seed.oversize)
	}
	f.Fuzz(func(t *testing.T, method, target, body, key, authz string, oversize bool) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, ok := httpfuzz.Request(ctx, method, target, body)
		if !ok || !httpfuzz.SetHeader(req, "X-Api-Key", key) || !httpfuzz.SetHeader(req, "Authorization", authz) {
			return
		}
		authorized := httpfuzz.CarriesKey(key, authz, fuzzKey)
		rt := match(req.Clone(ctx))
		convOK := backend.CheckConversation(rt.id) == nil
		ask, single := execBody(body)
		if authorized && convOK {
			creates := rt.pattern == "POST /conversations/{id}/exec" || rt.pattern == "PUT /conversations/{id}/files/{path...}"
			if creates && !slices.Contains(fuzzConversations, rt.id) {
				return
			}
			// Whatever the handler would decode, with or without what
			// follows it, must be harmless.
			var first backend.ExecRequest
			if rt.pattern == "POST /conversations/{id}/exec" && json.NewDecoder(strings.NewReader(body)).Decode(&first) == nil &&
				len(first.Command) > 0 && first.Command[0] != "echo" && !slices.Equal(first.Command, []string{"true"}) {
				return
			}
		}
		if oversize {
			httpfuzz.Pad(req, body, backend.MaxExecBody+1)
		}
		var before string
		if !authorized {
			before = s.effects(t)
		}
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, req)
		code := rec.Code
		fail := func(want string) {
			t.Helper()
			t.Fatalf("%s %q (%.100q, oversize %v, key %q, authorization %q): %d %.300s; want %s",
				method, target, body, oversize, key, authz, code, rec.Body, want)
		}
		if code < 200 || code >= 500 {
			fail("no server error")
		}
		if rec.Body.Len() > 1<<20 {
			fail("a small answer")
		}
		if !authorized {
			if req.Method == http.MethodGet && req.URL.Path == "/healthz" {
				return
			}
			if code != http.StatusUnauthorized && code != http.StatusForbidden {
				fail("401 or 403 without the key")
			}
			if after := s.effects(t); after != before {
				t.Fatalf("%s %q without the key changed the system:\n%s\nto\n%s", method, target, before, after)
			}
			return
		}
		if code >= 300 && code < 400 {
			// Only the mux's redirect from ".../files" to ".../files/".
			if loc, err := url.Parse(rec.Header().Get("Location")); err != nil || loc.Path != req.URL.Path+"/" {
				fail("no redirect but to the path with a trailing slash")
			}
			return
		}
		switch {
		case !canonicalPath(req.URL.Path):
			if code != http.StatusBadRequest {
				fail("400 for dot or empty segments")
			}
		case rt.pattern == "":
		case !convOK:
			if code != http.StatusBadRequest {
				fail("400 for a bad conversation id")
			}
		case rt.pattern == "POST /conversations/{id}/exec":
			valid := !oversize && single && agent.CheckCommand(ask.Command) == nil && ask.TimeoutSec >= 0 && ask.TimeoutSec <= 10
			var res agent.ExecResult
			switch {
			case oversize && code != http.StatusRequestEntityTooLarge && code != http.StatusBadRequest:
				fail("413 (or 400 for what precedes the padding)")
			case !oversize && !valid && code != http.StatusBadRequest:
				fail("400 for a bad exec request")
			case valid && (code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &res) != nil || res.ExitCode != 0 && !res.TimedOut):
				fail("200 and the result of a harmless command")
			}
		case rt.pattern == "PUT /conversations/{id}/files/{path...}":
			p, err := agent.CleanPath(rt.path)
			if err != nil || p == "." {
				if code != http.StatusBadRequest {
					fail("400 for a path that names no file in the work directory")
				}
				return
			}
			var wrote struct {
				Path string
				Size int
			}
			size := len(body)
			if oversize {
				size += backend.MaxExecBody + 1
			}
			// JSON text: bytes that are not UTF-8 come back as U+FFFD.
			name, _ := json.Marshal(p)
			_ = json.Unmarshal(name, &p)
			if code == http.StatusOK && (json.Unmarshal(rec.Body.Bytes(), &wrote) != nil || wrote.Path != p || wrote.Size != size) {
				fail(fmt.Sprintf(`{"path": %q, "size": %d}`, p, size))
			}
		case rt.pattern == "GET /conversations/{id}/files/{path...}":
			if _, err := agent.CleanPath(rt.path); err != nil && code != http.StatusBadRequest {
				fail("400 for a path out of the work directory")
			}
		}
	})
}
