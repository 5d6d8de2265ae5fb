package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/hysteresis/sysload"
	"github.com/ttlkit/ttlkit/internal/leakcheck"
	"github.com/ttlkit/ttlkit/lease"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(runChild())
	}
	leakcheck.VerifyTestMain(m)
}

// testKey signs the sessions of every test instance, so that a user's
// cookie is good on every instance of a test, as with a shared SESSION_KEY.
const testKey = "0123456789abcdef-test-session-key"

// testConfig is the design's configuration with a fixed session key.
func testConfig() Config {
	c := DefaultConfig()
	c.SessionKey = testKey
	return c
}

// fakeLoad is a sysload.Sampler whose figures the test sets.
type fakeLoad struct {
	mu          sync.Mutex
	cpu, memory float64
}

func (f *fakeLoad) Sample(context.Context) (sysload.Load, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sysload.Load{At: time.Now(), CPU: f.cpu, Memory: f.memory, CPULimit: 2}, nil
}

func (f *fakeLoad) set(cpu, memory float64) {
	f.mu.Lock()
	f.cpu, f.memory = cpu, memory
	f.mu.Unlock()
}

// newServer starts an instance on backend (zero: memory) with a calm fake
// load, closed when the test ends.
func newServer(t testing.TB, cfg Config, backend Backend) (*Server, *fakeLoad) {
	t.Helper()
	load := &fakeLoad{cpu: 20, memory: 40}
	srv, err := NewServer(cfg, Deps{Backend: backend, Sampler: load})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close(context.Background())) })
	// JPEG encoding is most of a stream's cost, and tests count frames,
	// not pixels.
	srv.streams.frames.draw = func(cam string, q Quality, t time.Time) []byte {
		return []byte(cam + " " + string(q) + " " + t.Format(time.RFC3339Nano))
	}
	return srv, load
}

// user is one browser session: a cookie jar, speaking to an instance either
// in process (h) or over the network (url).
type user struct {
	t      testing.TB
	h      http.Handler
	url    string
	client *http.Client
	mu     sync.Mutex
	cookie *http.Cookie
	// lang is the user's Accept-Language; empty sends none.
	lang string
}

// inProcess returns a user that calls h directly: no network, so it works
// inside a synctest bubble.
func inProcess(t testing.TB, h http.Handler) *user { return &user{t: t, h: h} }

// overHTTP returns a user with its own connections to the server at url.
func overHTTP(t testing.TB, url string) *user {
	jar, _ := cookiejar.New(nil)
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	t.Cleanup(tr.CloseIdleConnections)
	return &user{t: t, url: url, client: &http.Client{Jar: jar, Transport: tr, Timeout: 30 * time.Second}}
}

// on returns a user with the same session speaking to another instance.
func (u *user) on(url string) *user {
	v := overHTTP(u.t, url)
	v.client.Jar = u.client.Jar
	return v
}

// answer is one reply: status and JSON body.
type answer struct {
	Status int
	Body   map[string]any
	Header http.Header
}

func (a answer) str(k string) string { s, _ := a.Body[k].(string); return s }

func (u *user) do(method, path, ctype, body string) answer {
	u.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	var res *http.Response
	if u.h != nil {
		req := httptest.NewRequest(method, "http://127.0.0.1:8080"+path, rd)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if u.lang != "" {
			req.Header.Set("Accept-Language", u.lang)
		}
		u.mu.Lock()
		if u.cookie != nil {
			req.AddCookie(u.cookie)
		}
		u.mu.Unlock()
		rec := httptest.NewRecorder()
		u.h.ServeHTTP(rec, req)
		res = rec.Result()
		for _, c := range res.Cookies() {
			if c.Name == sessionCookie {
				u.mu.Lock()
				u.cookie = c
				u.mu.Unlock()
			}
		}
	} else {
		req, err := http.NewRequest(method, u.url+path, rd)
		require.NoError(u.t, err)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		if u.lang != "" {
			req.Header.Set("Accept-Language", u.lang)
		}
		res, err = u.client.Do(req)
		require.NoError(u.t, err)
	}
	defer res.Body.Close()
	a := answer{Status: res.StatusCode, Header: res.Header}
	b, err := io.ReadAll(res.Body)
	require.NoError(u.t, err)
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		require.NoError(u.t, json.Unmarshal(b, &a.Body), "%s %s: %s", method, path, b)
	}
	return a
}

func (u *user) grant(camera, quality string) answer {
	u.t.Helper()
	return u.do("POST", "/api/modal/lease", "application/json", `{"camera_id":"`+camera+`","quality":"`+quality+`"}`)
}

func (u *user) heartbeat(id string) answer {
	u.t.Helper()
	return u.do("POST", "/api/modal/lease/"+id+"/heartbeat", "", "")
}

func (u *user) release(id string) answer {
	u.t.Helper()
	return u.do("DELETE", "/api/modal/lease/"+id, "", "")
}

func (u *user) status() answer {
	u.t.Helper()
	return u.do("GET", "/api/system/status", "", "")
}

// mustGrant grants and returns the lease id.
func (u *user) mustGrant(camera, quality string) string {
	u.t.Helper()
	a := u.grant(camera, quality)
	require.Equal(u.t, http.StatusCreated, a.Status, a.Body)
	return a.str("lease_id")
}

// requireRefusal checks an error answer: status, error_code, and message.
func requireRefusal(t testing.TB, a answer, status int, code, message string) {
	t.Helper()
	require.Equal(t, status, a.Status, a.Body)
	require.Equal(t, code, a.Body["error_code"], a.Body)
	if message != "" {
		require.Equal(t, message, a.Body["message"])
	} else {
		require.NotEmpty(t, a.Body["message"])
	}
}

// streamWriter is an http.ResponseWriter for a stream served in process:
// it counts frames and bytes and keeps nothing.
type streamWriter struct {
	mu     sync.Mutex
	header http.Header
	status int
	frames int
	bytes  int
	last   time.Time
	first  []byte
}

func newStreamWriter() *streamWriter { return &streamWriter{header: http.Header{}} }

func (w *streamWriter) Header() http.Header { return w.header }
func (w *streamWriter) WriteHeader(code int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status == 0 {
		w.status = code
	}
}
func (w *streamWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if bytes.HasPrefix(b, []byte("--frame")) {
		w.frames++
		w.last = time.Now()
		if w.first == nil {
			w.first = append([]byte(nil), b...)
		}
	}
	w.bytes += len(b)
	return len(b), nil
}
func (w *streamWriter) Flush() {}

func (w *streamWriter) snapshot() (status, frames int, last time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status, w.frames, w.last
}

// openStream serves the modal stream of lease id to u in process, on a
// goroutine; done is closed when the handler returns.
func (u *user) openStream(ctx context.Context, camera, id string) (w *streamWriter, done chan struct{}) {
	return u.openPath(ctx, "/stream/"+camera+"?lease_id="+id)
}

// openPath serves path (a stream) to u in process, on a goroutine; done is
// closed when the handler returns.
func (u *user) openPath(ctx context.Context, path string) (w *streamWriter, done chan struct{}) {
	req := httptest.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:8080"+path, nil)
	u.mu.Lock()
	if u.cookie != nil {
		req.AddCookie(u.cookie)
	}
	u.mu.Unlock()
	w, done = newStreamWriter(), make(chan struct{})
	go func() {
		defer close(done)
		u.h.ServeHTTP(w, req)
	}()
	return w, done
}

// use is the budget of a lease Manager as seen at one moment.
type use struct{ Units, Leases int }

// usageOf returns m's units in use and live leases.
func usageOf(ctx context.Context, m *lease.Manager) (use, error) {
	units, n, err := m.Usage(ctx)
	return use{Units: units, Leases: n}, err
}
