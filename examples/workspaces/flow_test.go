package main

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
	"github.com/ttlkit/ttlkit/examples/workspaces/host"
	"github.com/ttlkit/ttlkit/examples/workspaces/workspace"
)

// TestLifecycleKeepsFiles runs real workspace servers: a file saved
// through the proxy survives STANDBY (server stopped, directory kept) and
// ARCHIVED (directory packed and removed), and a request to the workspace
// in either brings it back, files and all.
func TestLifecycleKeepsFiles(t *testing.T) {
	cfg := fastConfig(t)
	sys := startSystem(t, cfg, Deps{})
	base := "http://" + sys.Addr()
	o := create(t, base, "demo")
	waitPhase(t, sys.store, "demo", catalog.Running, 10*time.Second)
	o.save("main.go", "package main\n")
	assert.Equal(t, "package main\n", o.read("main.go"))
	files := filepath.Join(cfg.DataDir, "files", "demo")

	e := waitPhase(t, sys.store, "demo", catalog.Standby, 10*time.Second)
	assert.Greater(t, e.PhaseChangedAt.Sub(e.LastActivityAt), cfg.Standby, "not before the TTL")
	_, err := sys.host.Route(context.Background(), "demo")
	assert.ErrorIs(t, err, host.ErrNoRoute, "the server is stopped")
	b, err := os.ReadFile(filepath.Join(files, "main.go"))
	require.NoError(t, err, "the files stay")
	assert.Equal(t, "package main\n", string(b))

	assert.Equal(t, "package main\n", o.read("main.go"), "a request brings it back from STANDBY")
	assert.Equal(t, catalog.Running, entity(t, sys.store, "demo").Phase)
	assert.EqualValues(t, 1, sys.proxy.Stats().Held)

	waitPhase(t, sys.store, "demo", catalog.Archived, 20*time.Second)
	_, err = os.Stat(files)
	assert.ErrorIs(t, err, fs.ErrNotExist, "the directory is removed")
	_, err = os.Stat(filepath.Join(cfg.DataDir, "archives", "demo.tar.gz"))
	require.NoError(t, err, "the files are in the archive")

	assert.Equal(t, "package main\n", o.read("main.go"), "a request brings it back from ARCHIVED")
	assert.Equal(t, catalog.Running, entity(t, sys.store, "demo").Phase)
	_, err = os.Stat(filepath.Join(cfg.DataDir, "archives", "demo.tar.gz"))
	assert.ErrorIs(t, err, fs.ErrNotExist, "restored: the archive is gone")
	assert.EqualValues(t, 2, sys.proxy.Stats().Held)
	st := sys.controller.Stats()
	assert.EqualValues(t, 3, st.Started)
	assert.EqualValues(t, 1, st.Restored)

	// /metrics says the same: the proxy's own counters, and the tracker's
	// and the runner's from the metrics package.
	m := scrapeMetrics(t, base)
	assert.Equal(t, 2.0, metricValue(t, m, "workspaces_proxy_held_requests_total"))
	assert.Equal(t, 1.0, metricValue(t, m, `workspaces_runner_expired_total{rule="archive"}`))
	assert.GreaterOrEqual(t, metricValue(t, m, `workspaces_runner_expired_total{rule="standby"}`), 2.0)
	assert.Positive(t, metricValue(t, m, "workspaces_runner_ticks_total"))
	assert.GreaterOrEqual(t, metricValue(t, m, "workspaces_runner_last_tick_duration_seconds"), 0.0)
	assert.Positive(t, metricValue(t, m, "workspaces_activity_records_total"))
	assert.Positive(t, metricValue(t, m, "workspaces_activity_flushes_total"))
}

// scrapeMetrics returns the text of the /metrics of the system at base.
func scrapeMetrics(t *testing.T, base string) string {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(b)
}

// metricValue returns the value of series (`name{label="value"}`) in the
// text of a /metrics page; the series must be there.
func metricValue(t *testing.T, text, series string) float64 {
	t.Helper()
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err, series)
			return f
		}
	}
	t.Fatalf("no series %s in /metrics:\n%s", series, text)
	return 0
}

// TestWebSocketMessagesAreActivity opens two terminals through the proxy
// with a real WebSocket client: the one that types keeps its workspace
// RUNNING; the one that stays open and silent lets its workspace go to
// STANDBY, which closes it.
func TestWebSocketMessagesAreActivity(t *testing.T) {
	cfg := fastConfig(t)
	cfg.Archive = time.Minute
	sys := startSystem(t, cfg, Deps{})
	base := "http://" + sys.Addr()
	quiet, chatty := create(t, base, "quiet"), create(t, base, "chatty")
	waitPhase(t, sys.store, "quiet", catalog.Running, 10*time.Second)
	waitPhase(t, sys.store, "chatty", catalog.Running, 10*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	qc, cc := quiet.terminal(ctx), chatty.terminal(ctx)
	defer qc.CloseNow()
	defer cc.CloseNow()
	for _, c := range []*websocket.Conn{qc, cc} {
		_, banner, err := c.Read(ctx)
		require.NoError(t, err)
		require.Contains(t, string(banner), "type help")
	}
	// Output streamed by the workspace, not typed, is relayed as it comes.
	require.NoError(t, cc.Write(ctx, websocket.MessageText, []byte("count 3\r")))
	var out strings.Builder
	for !strings.Contains(out.String(), "3\r\n$ ") {
		_, b, err := cc.Read(ctx)
		require.NoError(t, err)
		out.Write(b)
	}
	assert.Contains(t, out.String(), "1\r\n2\r\n3\r\n")

	quietClosed := make(chan error, 1)
	go func() {
		_, _, err := qc.Read(ctx)
		quietClosed <- err
	}()
	deadline := time.Now().Add(cfg.Standby + 3*time.Second)
	for time.Now().Before(deadline) {
		require.NoError(t, cc.Write(ctx, websocket.MessageText, []byte("x")))
		_, echo, err := cc.Read(ctx)
		require.NoError(t, err)
		require.Equal(t, "x", string(echo))
		e := entity(t, sys.store, "chatty")
		require.Equal(t, catalog.Running, e.Phase, "a terminal in use keeps its workspace running")
		require.Empty(t, e.DesiredState)
		time.Sleep(300 * time.Millisecond)
	}
	e := waitPhase(t, sys.store, "quiet", catalog.Standby, 5*time.Second)
	assert.Greater(t, e.PhaseChangedAt.Sub(e.LastActivityAt), cfg.Standby)
	select {
	case err := <-quietClosed:
		require.Error(t, err, "the silent terminal is closed when its workspace stops")
	case <-time.After(5 * time.Second):
		t.Fatal("the silent terminal stayed open after its workspace stopped")
	}
	st := sys.proxy.Stats()
	assert.EqualValues(t, 2, st.WebSockets)
	assert.Greater(t, st.MessagesIn, uint64(3))
	assert.Greater(t, st.MessagesOut, st.MessagesIn, "banner, echoes and output")
	require.NoError(t, cc.Close(websocket.StatusNormalClosure, ""))
}

// TestHoldTimesOut: a workspace that cannot start holds its request for
// START_TIMEOUT_SECONDS, then answers a page that says so.
func TestHoldTimesOut(t *testing.T) {
	cfg := fastConfig(t)
	cfg.StartTimeout = 500 * time.Millisecond
	sys := startSystem(t, cfg, Deps{WorkspaceCommand: []string{"/bin/false"}})
	o := create(t, "http://"+sys.Addr(), "broken")
	req, err := http.NewRequest("GET", o.base+"/broken/", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+o.token)
	req.Header.Set("Accept", "text/html")
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.Equal(t, "5", res.Header.Get("Retry-After"))
	assert.GreaterOrEqual(t, time.Since(start), cfg.StartTimeout)
	body, _ := io.ReadAll(res.Body)
	assert.Contains(t, string(body), "did not start within 500ms")
	assert.EqualValues(t, 1, sys.proxy.Stats().HoldTimeouts)
}

// TestStaleRouteIsFoundAgain: the proxy reuses a route for a second; if in
// that second the workspace's server stopped and another workspace's
// server took its port, that server refuses the request (421, the key is
// not its own), and the proxy finds the workspace's new route and serves
// the request there.
func TestStaleRouteIsFoundAgain(t *testing.T) {
	right := &capture{}
	srv := httptest.NewServer(right)
	t.Cleanup(srv.Close)
	fake := newFakeHost(t, strings.TrimPrefix(srv.URL, "http://"), 0)
	var port atomic.Pointer[http.Handler] // what listens on the port ws-a had
	var old http.Handler = &capture{}
	port.Store(&old)
	shared := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*port.Load()).ServeHTTP(w, r) }))
	t.Cleanup(shared.Close)
	cfg := fastConfig(t)
	cfg.Standby = time.Hour
	sys := startSystem(t, cfg, Deps{Runtime: fake, Routes: fake})
	o := create(t, "http://"+sys.Addr(), "ws-a")
	waitPhase(t, sys.store, "ws-a", catalog.Running, 5*time.Second)
	fake.setRoute("ws-a", strings.TrimPrefix(shared.URL, "http://"))
	code, _ := o.do("GET", "/api/files", "")
	require.Equal(t, http.StatusOK, code)

	// ws-a's server moves; ws-b's takes the old port.
	other, err := workspace.New(workspace.Options{ID: "ws-b", Dir: t.TempDir(), Key: sys.keys.BackendKey("ws-b")})
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	var h http.Handler = other
	port.Store(&h)
	fake.setRoute("ws-a", "")
	before := right.count()
	code, body := o.do("GET", "/api/files", "")
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, before+1, right.count(), "served by ws-a's own server")
}
