package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/workspaces/admin"
	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
	"github.com/ttlkit/ttlkit/internal/leakcheck"
	"github.com/ttlkit/ttlkit/ttl"
)

// TestMain runs the tests, or, when the controller starts this binary as a
// workspace's server ("workspace ...") or a test starts it as a component
// ("proxy ..."), the program itself.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && slices.Contains([]string{"workspace", "proxy", "runner", "controller"}, os.Args[1]) {
		sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
		if os.Args[1] == "workspace" {
			// Workspace servers that make a controller's operation last,
			// for a test to kill the controller in the middle of it.
			if os.Getenv(envTestIgnoreTerm) != "" {
				signal.Ignore(syscall.SIGTERM)
				sigs = sigs[:1]
			}
			if os.Getenv(envTestHangStart) != "" {
				signal.Ignore(syscall.SIGTERM)
				time.Sleep(time.Hour) // never listens
				os.Exit(1)
			}
		}
		ctx, stop := signal.NotifyContext(context.Background(), sigs...)
		err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "workspaces:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The workspace servers this binary starts are race-enabled too: let
	// them exit at once, not after the race detector's default second.
	_ = os.Setenv("GORACE", "atexit_sleep_ms=0")
	leakcheck.VerifyTestMain(m)
}

// Credentials of every test system, so that several instances of one test
// accept each other's tokens, as a shared WORKSPACES_SECRET does.
const (
	testSecret = "test-secret-of-at-least-16-bytes"
	testAdmin  = "test-admin-token-16-bytes"
)

// fastConfig is the design's system with seconds for minutes: standby after
// 1.5 s idle, archived 1.5 s later, flushes and ticks every 100 ms.
func fastConfig(t testing.TB) Config {
	c := DefaultConfig()
	c.Addr = "127.0.0.1:0"
	c.DataDir = t.TempDir()
	c.Secret, c.AdminToken = testSecret, testAdmin
	c.Standby, c.Archive = 1500*time.Millisecond, 1500*time.Millisecond
	c.FlushInterval, c.TickInterval = 100*time.Millisecond, 100*time.Millisecond
	c.ReconcileInterval = time.Second
	c.StartTimeout = 20 * time.Second
	return c
}

// testLogger writes the system's logs to the test's log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startSystem starts cfg's components in this process, shut down when the
// test ends.
func startSystem(t testing.TB, cfg Config, deps Deps) *System {
	t.Helper()
	log := testLogger(t)
	if _, fuzz := t.(*testing.F); fuzz {
		log = slog.New(slog.DiscardHandler) // f.Log may not be called while fuzzing
	}
	return startLogged(t, cfg, deps, log)
}

// startLogged is startSystem with the system's logs going to log.
func startLogged(t testing.TB, cfg Config, deps Deps, log *slog.Logger) *System {
	t.Helper()
	sys, err := Start(context.Background(), cfg, deps, log)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, sys.Shutdown(ctx))
		if sys.host != nil {
			require.NoError(t, sys.host.StopAll(ctx)) // also on PostgreSQL, where Shutdown leaves them
		}
	})
	return sys
}

// adminCall sends an admin API request and decodes the answer into out.
func adminCall(t testing.TB, base, method, path string, body, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+"/admin/api/"+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+testAdmin)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	if out != nil && res.StatusCode < 300 {
		require.NoError(t, json.NewDecoder(res.Body).Decode(out))
	}
	return res.StatusCode
}

// owner is a workspace's owner: the base URL of a proxy and the token of
// the workspace.
type owner struct {
	t     testing.TB
	base  string
	id    string
	token string
}

// create creates workspace id through the admin API of the proxy at base.
func create(t testing.TB, base, id string) *owner {
	t.Helper()
	var made admin.Created
	require.Equal(t, http.StatusCreated, adminCall(t, base, "POST", "workspaces", map[string]string{"id": id}, &made))
	return &owner{t: t, base: base, id: id, token: made.Token}
}

// via returns the owner speaking to another proxy.
func (o *owner) via(base string) *owner {
	c := *o
	c.base = base
	return &c
}

// do sends a request to the workspace through the proxy.
func (o *owner) do(method, path, body string) (int, string) {
	o.t.Helper()
	req, err := http.NewRequest(method, o.base+"/"+o.id+path, strings.NewReader(body))
	require.NoError(o.t, err)
	req.Header.Set("Authorization", "Bearer "+o.token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(o.t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// save writes a file through the proxy.
func (o *owner) save(name, content string) {
	o.t.Helper()
	code, body := o.do("PUT", "/api/files/"+name, content)
	require.Equal(o.t, http.StatusOK, code, body)
}

// read reads a file through the proxy.
func (o *owner) read(name string) string {
	o.t.Helper()
	code, body := o.do("GET", "/api/files/"+name, "")
	require.Equal(o.t, http.StatusOK, code, body)
	return body
}

// terminal opens the workspace's terminal through the proxy with a real
// WebSocket client.
func (o *owner) terminal(ctx context.Context) *websocket.Conn {
	o.t.Helper()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(o.base, "http")+"/"+o.id+"/terminal", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + o.token}},
	})
	require.NoError(o.t, err)
	return c
}

// entity reads workspace id from the store.
func entity(t testing.TB, st entities.Store, id string) entities.Entity {
	t.Helper()
	e, err := st.Get(context.Background(), id)
	require.NoError(t, err)
	return e
}

// waitPhase waits until workspace id is in phase with nothing left to do,
// and returns it.
func waitPhase(t testing.TB, st entities.Store, id, phase string, within time.Duration) entities.Entity {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		e := entity(t, st, id)
		if e.Phase == phase && e.Operation == "" && e.DesiredState == "" {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("workspace %s did not reach %s within %v; it is %+v", id, phase, within, e)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fakeHost is workspaces that are not processes: for tests of thousands
// of them. Every started workspace answers at one shared backend. It
// fails the test if two operations ever run on one workspace at once.
type fakeHost struct {
	t       testing.TB
	addr    string
	opDelay time.Duration

	mu       sync.Mutex
	routeTo  map[string]string // a workspace's own address, instead of addr
	running  map[string]bool
	archived map[string]bool
	busy     map[string]string // workspace → operation in progress
	ops      map[string][]string
	overlaps []string
}

func newFakeHost(t testing.TB, addr string, opDelay time.Duration) *fakeHost {
	return &fakeHost{t: t, addr: addr, opDelay: opDelay, routeTo: map[string]string{}, running: map[string]bool{}, archived: map[string]bool{},
		busy: map[string]string{}, ops: map[string][]string{}}
}

// op runs one operation, recording it and any overlap with another one on
// the same workspace.
func (h *fakeHost) op(ctx context.Context, id, name string, apply func()) error {
	h.mu.Lock()
	if other, ok := h.busy[id]; ok {
		h.overlaps = append(h.overlaps, fmt.Sprintf("%s: %s while %s", id, name, other))
	}
	h.busy[id] = name
	h.ops[id] = append(h.ops[id], name)
	h.mu.Unlock()
	var err error
	if h.opDelay > 0 {
		select {
		case <-time.After(h.opDelay):
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	h.mu.Lock()
	if err == nil {
		apply()
	}
	delete(h.busy, id)
	h.mu.Unlock()
	return err
}

func (h *fakeHost) Start(ctx context.Context, id string) error {
	return h.op(ctx, id, "start", func() { h.running[id] = true })
}

func (h *fakeHost) Stop(ctx context.Context, id string) error {
	return h.op(ctx, id, "stop", func() { delete(h.running, id) })
}

func (h *fakeHost) Archive(ctx context.Context, id string) error {
	return h.op(ctx, id, "archive", func() { h.archived[id] = true })
}

func (h *fakeHost) Restore(ctx context.Context, id string) error {
	return h.op(ctx, id, "restore", func() { delete(h.archived, id) })
}

func (h *fakeHost) Alive(_ context.Context, id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.running[id]
}

func (h *fakeHost) Route(_ context.Context, id string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.running[id] {
		return "", catalog.ErrNotFound
	}
	if a := h.routeTo[id]; a != "" {
		return a, nil
	}
	return h.addr, nil
}

// setRoute gives workspace id an address of its own ("" for the shared one).
func (h *fakeHost) setRoute(id, addr string) {
	h.mu.Lock()
	h.routeTo[id] = addr
	h.mu.Unlock()
}

// setRunning marks workspace id as running, as if started before the test.
func (h *fakeHost) setRunning(id string) {
	h.mu.Lock()
	h.running[id] = true
	h.mu.Unlock()
}

// opsOf returns the operations run on workspace id.
func (h *fakeHost) opsOf(id string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops[id])
}

func (h *fakeHost) overlapping() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.overlaps)
}

// sinkFunc adapts a function to a ttl.Sink.
type sinkFunc func(ctx context.Context, acts []ttl.Activity) error

func (f sinkFunc) Add(ctx context.Context, acts []ttl.Activity) error { return f(ctx, acts) }
