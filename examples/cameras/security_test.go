package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// call sends one request straight to srv with the given cookie value (""
// for none) and headers, and returns the answer and its body's error_code.
func call(t *testing.T, srv http.Handler, method, path, cookie string, headers map[string]string) (*http.Response, string) {
	t.Helper()
	var body *strings.Reader
	if method == http.MethodPost && strings.HasSuffix(path, "/lease") {
		body = strings.NewReader(`{"camera_id":"cam_2f_19","quality":"sub"}`)
	} else {
		body = strings.NewReader("")
	}
	req := httptest.NewRequest(method, "http://127.0.0.1:8080"+path, body)
	req.Header.Set("Content-Type", "application/json")
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: cookie})
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	res := rec.Result()
	var problem struct {
		Code string `json:"error_code"`
	}
	_ = json.NewDecoder(res.Body).Decode(&problem)
	return res, problem.Code
}

// sessionOf returns the session cookie value an answer set.
func sessionOf(res *http.Response) string {
	for _, c := range res.Cookies() {
		if c.Name == sessionCookie {
			return c.Value
		}
	}
	return ""
}

// TestSessionCookies checks that a lease belongs to the session that took
// it, and that a session cannot be forged, borrowed under another key or
// kept alive past its lifetime: each such cookie is a new session, which
// holds none of the lease.
func TestSessionCookies(t *testing.T) {
	cfg := testConfig()
	srv, _ := newServer(t, cfg, Backend{})
	res, _ := call(t, srv, "POST", "/api/modal/lease", "", nil)
	require.Equal(t, http.StatusCreated, res.StatusCode)
	cookie := sessionOf(res)
	require.NotEmpty(t, cookie)
	id := strings.SplitN(cookie, ".", 2)[0]
	leases, err := srv.leaseStore.List(t.Context())
	require.NoError(t, err)
	require.Len(t, leases, 1)
	lease := leases[0].ID
	heartbeat := "/api/modal/lease/" + lease + "/heartbeat"

	res, _ = call(t, srv, "POST", heartbeat, cookie, nil)
	assert.Equal(t, http.StatusOK, res.StatusCode, "the session's own cookie")
	assert.Empty(t, sessionOf(res), "a young session is not reissued")

	other := NewSessions("another-key-of-sixteen-bytes", cfg.SessionTTL, time.Now)
	now := time.Now()
	for name, forged := range map[string]string{
		"no cookie":            "",
		"wrong MAC":            cookie[:len(cookie)-4] + "AAAA",
		"another key":          other.cookieValue(id, now),
		"expired":              srv.sessions.cookieValue(id, now.Add(-cfg.SessionTTL-time.Second)),
		"issued in future":     srv.sessions.cookieValue(id, now.Add(time.Hour)),
		"id without time":      id + "." + srv.sessions.mac(id),
		"stretched lifetime":   strings.Replace(cookie, ".", ".9", 1),
		"another session's id": srv.sessions.cookieValue("AAAAAAAAAAAAAAAAAAAAAA", now),
	} {
		res, code := call(t, srv, "POST", heartbeat, forged, nil)
		assert.Equal(t, http.StatusForbidden, res.StatusCode, name)
		assert.Equal(t, "NOT_YOUR_LEASE", code, name)
		res, code = call(t, srv, "DELETE", "/api/modal/lease/"+lease, forged, nil)
		assert.Equal(t, http.StatusForbidden, res.StatusCode, name)
		assert.Equal(t, "NOT_YOUR_LEASE", code, name)
		res, code = call(t, srv, "GET", "/stream/cam_2f_19?lease_id="+lease, forged, nil)
		assert.Equal(t, http.StatusForbidden, res.StatusCode, name)
		assert.Equal(t, "NOT_YOUR_LEASE", code, name)
	}
	_, err = srv.leases.Get(t.Context(), lease)
	require.NoError(t, err, "no forged cookie released the lease")

	// A session in use past half its lifetime gets a fresh cookie, with the
	// same id, and keeps its lease.
	aged := srv.sessions.cookieValue(id, now.Add(-cfg.SessionTTL/2-time.Minute))
	res, _ = call(t, srv, "POST", heartbeat, aged, nil)
	assert.Equal(t, http.StatusOK, res.StatusCode)
	fresh := sessionOf(res)
	require.NotEmpty(t, fresh, "reissued")
	assert.True(t, strings.HasPrefix(fresh, id+"."))
	c := res.Cookies()[0]
	assert.True(t, c.HttpOnly)
	assert.Equal(t, http.SameSiteLaxMode, c.SameSite)
	assert.Equal(t, int(cfg.SessionTTL/time.Second), c.MaxAge)
	res, _ = call(t, srv, "DELETE", "/api/modal/lease/"+lease, fresh, nil)
	assert.Equal(t, http.StatusOK, res.StatusCode)
}

// TestCrossSiteRequestsRefused checks that another site's page cannot use
// a visitor's session to take or release a lease: the browser sends the
// Lax cookie on top-level navigations only, and the server refuses every
// state-changing request a browser marks as cross-site.
func TestCrossSiteRequestsRefused(t *testing.T) {
	srv, _ := newServer(t, testConfig(), Backend{})
	res, _ := call(t, srv, "GET", "/api/system/status", "", nil)
	cookie := sessionOf(res)
	for name, h := range map[string]map[string]string{
		"Sec-Fetch-Site cross-site": {"Sec-Fetch-Site": "cross-site"},
		"Sec-Fetch-Site same-site":  {"Sec-Fetch-Site": "same-site"},
		"foreign Origin":            {"Origin": "https://evil.example"},
	} {
		res, code := call(t, srv, "POST", "/api/modal/lease", cookie, h)
		assert.Equal(t, http.StatusForbidden, res.StatusCode, name)
		assert.Equal(t, "CROSS_ORIGIN", code, name)
	}
	leases, err := srv.leaseStore.List(t.Context())
	require.NoError(t, err)
	assert.Empty(t, leases, "nothing was granted")

	res, _ = call(t, srv, "POST", "/api/modal/lease", cookie, map[string]string{"Sec-Fetch-Site": "same-origin"})
	require.Equal(t, http.StatusCreated, res.StatusCode, "the page's own request")
	leases, err = srv.leaseStore.List(t.Context())
	require.NoError(t, err)
	require.Len(t, leases, 1)
	res, code := call(t, srv, "DELETE", "/api/modal/lease/"+leases[0].ID, cookie, map[string]string{"Sec-Fetch-Site": "cross-site"})
	assert.Equal(t, http.StatusForbidden, res.StatusCode)
	assert.Equal(t, "CROSS_ORIGIN", code)
	_, err = srv.leases.Get(t.Context(), leases[0].ID)
	assert.NoError(t, err, "a cross-site release released nothing")
	// A read is refused too: the status call counts its caller as a UI
	// user (a session, and a suggest unit), which no other site may do.
	users := srv.sessions.Active()
	res, code = call(t, srv, "GET", "/api/system/status", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"})
	assert.Equal(t, http.StatusForbidden, res.StatusCode)
	assert.Equal(t, "CROSS_ORIGIN", code)
	assert.Empty(t, sessionOf(res), "no session was made")
	assert.Equal(t, users, srv.sessions.Active(), "no UI user was counted")
	// Following a link from another site opens the page.
	res, _ = call(t, srv, "GET", "/", "", map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"})
	assert.Equal(t, http.StatusOK, res.StatusCode)
}

// TestForeignHostRefused: a request under a name the server was not told it
// has — a page under a DNS-rebinding name, whose requests look same-origin
// to the browser — is refused before anything runs, on every path; a name
// in ALLOWED_HOSTS is answered.
func TestForeignHostRefused(t *testing.T) {
	cfg := testConfig()
	cfg.Hosts = []string{"cams.example"}
	srv, _ := newServer(t, cfg, Backend{})
	for _, path := range []string{"/", "/api/system/status", "/api/modal/lease", "/metrics", "/healthz", "/stream/suggest"} {
		for _, method := range []string{"GET", "POST"} {
			req := httptest.NewRequest(method, "http://evil.example:8080"+path, strings.NewReader(`{"camera_id":"cam_a","quality":"sub"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			req.Header.Set("Origin", "http://evil.example:8080")
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			assert.Equal(t, http.StatusForbidden, rec.Code, "%s %s", method, path)
			assert.Contains(t, rec.Body.String(), "UNKNOWN_HOST", "%s %s", method, path)
			assert.Empty(t, rec.Result().Cookies(), "no session for %s %s", method, path)
		}
	}
	leases, err := srv.leaseStore.List(t.Context())
	require.NoError(t, err)
	assert.Empty(t, leases, "nothing was granted")
	assert.Zero(t, srv.sessions.Active())

	req := httptest.NewRequest("GET", "http://cams.example/api/system/status", nil)
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusOK, rec.Code, "a configured name")
}
