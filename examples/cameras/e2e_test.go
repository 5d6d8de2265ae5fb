package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/internal/testenv/mysqltest"
)

// lineWriter hands each write to a channel: run prints the address it
// listens on to stdout.
type lineWriter struct {
	mu sync.Mutex
	ch chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.ch <- string(p):
	default:
	}
	return len(p), nil
}

// startRun runs the program as main does, with args and the environment
// vars, until the test ends; it returns the base URL and a stop function
// that cancels it (as SIGTERM does) and returns run's error.
func startRun(t *testing.T, args []string, vars map[string]string) (string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &lineWriter{ch: make(chan string, 1)}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), env(vars), strings.NewReader(""), out, io.Discard)
	}()
	var url string
	select {
	case line := <-out.ch:
		m := regexp.MustCompile(`open (http://\S+)`).FindStringSubmatch(line)
		require.NotNil(t, m, line)
		url = m[1]
	case err := <-done:
		cancel()
		t.Fatalf("run: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("run did not start")
	}
	var once sync.Once
	var err error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(15 * time.Second):
				t.Fatal("run did not return after the shutdown signal")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return url, stop
}

// TestRunServesThePageAndShutsDown starts the program on embedded defaults
// and drives it like a newcomer would: the page and its scripts, the API,
// a stream, /healthz and /metrics; then SIGTERM ends it gracefully even
// with a stream open.
func TestRunServesThePageAndShutsDown(t *testing.T) {
	url, stop := startRun(t, nil, map[string]string{"SESSION_KEY": testKey})
	u := overHTTP(t, url)
	for path, want := range map[string]string{
		"/":                    "カメラ監視",
		"/static/app.js":       "LeaseClient",
		"/static/style.css":    ".overlay",
		"/static/leasehttp.js": "export class LeaseClient",
		"/healthz":             "ok",
	} {
		res, err := u.client.Get(url + path)
		require.NoError(t, err)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		assert.Equal(t, http.StatusOK, res.StatusCode, path)
		assert.Contains(t, string(b), want, path)
	}
	cfg := u.do("GET", "/api/config", "", "")
	assert.Len(t, cfg.Body["cameras"], 12)
	assert.EqualValues(t, 30, cfg.Body["heartbeat_interval_sec"])

	id := u.mustGrant("cam_2f_19", "main")
	res, err := u.client.Get(url + "/stream/cam_2f_19?lease_id=" + id)
	require.NoError(t, err)
	defer res.Body.Close()
	buf := make([]byte, 1024)
	_, err = io.ReadFull(res.Body, buf)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(buf), "--frame\r\nContent-Type: image/jpeg"))

	m, err := u.client.Get(url + "/metrics")
	require.NoError(t, err)
	b, _ := io.ReadAll(m.Body)
	m.Body.Close()
	assert.Contains(t, string(b), "cameras_lease_grants_total 1")
	assert.Contains(t, string(b), `cameras_streams_active{kind="main"} 1`)
	assert.Contains(t, string(b), "go_goroutines")

	require.NoError(t, stop(), "a graceful shutdown")
	_, err = io.Copy(io.Discard, res.Body)
	assert.NoError(t, err, "the stream was ended, not cut")
	_, err = u.client.Get(url + "/healthz")
	assert.Error(t, err, "no longer listening")
}

func TestRunRefusesBadSettings(t *testing.T) {
	err := run(t.Context(), []string{"-store", "postgres"}, env(nil), nil, io.Discard, io.Discard)
	require.EqualError(t, err, "-store postgres needs -dsn (STORE_DSN)")
	err = run(t.Context(), nil, env(map[string]string{"MAX_UI_USERS": "many"}), nil, io.Discard, io.Discard)
	require.ErrorContains(t, err, "MAX_UI_USERS")
}

// TestRunSeveralInstancesOnMySQL starts the program twice on one MySQL
// database, as the README does: the instances share the tables, the budget
// and the sessions.
func TestRunSeveralInstancesOnMySQL(t *testing.T) {
	m := mysqltest.OpenMySQL(t)
	vars := map[string]string{
		"STORE": "mysql", "STORE_DSN": m.DSN, "SESSION_KEY": testKey,
		"TOTAL_STREAM_UNITS": "18", // a modal budget of 3 units
	}
	urlA, stopA := startRun(t, nil, vars)
	urlB, stopB := startRun(t, nil, vars)
	alice := overHTTP(t, urlA)
	id := alice.mustGrant("cam_2f_19", "main")
	bob := overHTTP(t, urlB)
	a := bob.grant("cam_1f_01", "main")
	require.Equal(t, http.StatusCreated, a.Status, a.Body)
	assert.Equal(t, "sub", a.Body["allowed_quality"], "one unit left, counted across instances")
	requireRefusal(t, overHTTP(t, urlB).grant("cam_1f_01", "sub"), http.StatusTooManyRequests, CodeOverCapacity, MsgOverCapacity)
	s := bob.status()
	assert.EqualValues(t, 2, s.Body["active_modals"])
	assert.EqualValues(t, 0, s.Body["modal_budget_remaining"])
	// alice's session is hers on instance B too.
	requireRefusal(t, alice.on(urlB).grant("cam_1f_02", "sub"), http.StatusConflict, CodeUserAlreadyHasModal, MsgUserAlreadyHasModal)
	// The design's modal_leases shows the live leases, column for column.
	var leaseID, userID, cameraID, quality string
	var created, expires, heartbeat time.Time
	require.NoError(t, m.DB.QueryRowContext(t.Context(),
		"SELECT lease_id, user_id, camera_id, quality, created_at, expires_at, last_heartbeat FROM modal_leases WHERE lease_id = ?", id).
		Scan(&leaseID, &userID, &cameraID, &quality, &created, &expires, &heartbeat))
	assert.Equal(t, id, leaseID)
	assert.NotEmpty(t, userID)
	assert.Equal(t, "cam_2f_19", cameraID)
	assert.Equal(t, "main", quality)
	assert.Equal(t, 5*time.Minute, expires.Sub(created).Round(time.Second), "TTL 300 s")
	require.Equal(t, http.StatusOK, alice.on(urlB).release(id).Status)
	var tables []string
	rows, err := m.DB.QueryContext(t.Context(), "SHOW TABLES")
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		tables = append(tables, name)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	assert.Subset(t, tables, []string{"modal_leases", "admission_metrics"})
	require.NoError(t, stopA())
	require.NoError(t, stopB())
}
