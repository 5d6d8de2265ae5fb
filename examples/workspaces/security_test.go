package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/workspaces/admin"
	"github.com/ttlkit/ttlkit/examples/workspaces/auth"
	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
	"github.com/ttlkit/ttlkit/examples/workspaces/host"
	"github.com/ttlkit/ttlkit/examples/workspaces/proxy"
	"github.com/ttlkit/ttlkit/examples/workspaces/workspace"
)

// capture is a workspace server that records what reaches it.
type capture struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (c *capture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.reqs = append(c.reqs, r.Clone(context.Background()))
	c.mu.Unlock()
	if r.Header.Get("Upgrade") == "websocket" {
		conn, err := websocket.Accept(w, r, nil)
		if err == nil {
			_ = conn.Close(websocket.StatusNormalClosure, "")
		}
		return
	}
	_, _ = w.Write([]byte("ok"))
}

func (c *capture) last() *http.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.reqs) == 0 {
		return nil
	}
	return c.reqs[len(c.reqs)-1]
}

func (c *capture) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.reqs)
}

// secured starts a system whose workspaces "ws-a" and "ws-b" run (not as
// processes) behind a capturing server, and returns it with the base URL.
func secured(t *testing.T) (*System, string, *capture) {
	t.Helper()
	cap := &capture{}
	srv := httptest.NewServer(cap)
	t.Cleanup(srv.Close)
	fake := newFakeHost(t, strings.TrimPrefix(srv.URL, "http://"), 0)
	cfg := fastConfig(t)
	cfg.Standby = time.Hour
	cfg.AllowedOrigins = []string{"https://ide.example"}
	cfg.AllowedHosts = []string{"ide.example"}
	sys := startSystem(t, cfg, Deps{Runtime: fake, Routes: fake})
	base := "http://" + sys.Addr()
	for _, id := range []string{"ws-a", "ws-b"} {
		create(t, base, id)
		waitPhase(t, sys.store, id, catalog.Running, 5*time.Second)
	}
	return sys, base, cap
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func send(t *testing.T, method, u string, header http.Header, body string) *http.Response {
	t.Helper()
	res, _ := exchange(t, method, u, header, body)
	return res
}

// exchange is send that returns the answer's body too.
func exchange(t *testing.T, method, u string, header http.Header, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	if h := header.Get("Host"); h != "" {
		req.Host = h // a client sends req.Host, never a Host header of its own
	}
	res, err := noRedirect.Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	_ = res.Body.Close()
	return res, string(b)
}

func bearer(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }

// TestOnlyTheOwnerReachesAWorkspace: a workspace answers only its own
// token, unexpired and unforged; everything else is refused before it
// counts as activity or wakes anything.
func TestOnlyTheOwnerReachesAWorkspace(t *testing.T) {
	sys, base, cap := secured(t)
	keys := sys.keys
	other, err := auth.New("another-secret-of-16-bytes", testAdmin, nil)
	require.NoError(t, err)
	good := keys.WorkspaceToken("ws-a", time.Now().Add(time.Hour))
	exp, mac, _ := strings.Cut(good, ".")
	records := sys.tracker.Stats().Records
	before := cap.count()
	for name, h := range map[string]http.Header{
		"no token":                 nil,
		"another workspace's":      bearer(keys.WorkspaceToken("ws-b", time.Now().Add(time.Hour))),
		"expired":                  bearer(keys.WorkspaceToken("ws-a", time.Now().Add(-time.Second))),
		"another secret's":         bearer(other.WorkspaceToken("ws-a", time.Now().Add(time.Hour))),
		"tampered MAC":             bearer(exp + "." + strings.Repeat("A", len(mac))),
		"stretched expiry":         bearer("9" + good),
		"the admin token":          bearer(testAdmin),
		"a cookie of another path": {"Cookie": {proxy.TokenCookie + "=" + keys.WorkspaceToken("ws-b", time.Now().Add(time.Hour))}},
		"garbage":                  bearer("x.y.z"),
	} {
		res := send(t, "GET", base+"/ws-a/api/files", h, "")
		want := http.StatusForbidden
		if name == "no token" {
			want = http.StatusUnauthorized
		}
		assert.Equal(t, want, res.StatusCode, name)
	}
	assert.Equal(t, before, cap.count(), "nothing reached the workspace")
	assert.Equal(t, records, sys.tracker.Stats().Records, "a refused request is not activity")
	assert.EqualValues(t, 9, sys.proxy.Stats().Refused)

	res := send(t, "GET", base+"/ws-a/api/files", bearer(good), "")
	assert.Equal(t, http.StatusOK, res.StatusCode, "the owner")
	assert.Equal(t, records+1, sys.tracker.Stats().Records)
	res = send(t, "GET", base+"/ws-nobody/", bearer(keys.WorkspaceToken("ws-nobody", time.Now().Add(time.Hour))), "")
	assert.Equal(t, http.StatusNotFound, res.StatusCode, "a token minted for a workspace that does not exist")

	// A deleted workspace is gone for its owner too.
	require.Equal(t, http.StatusOK, adminCall(t, base, "DELETE", "workspaces/ws-b", nil, nil))
	res = send(t, "GET", base+"/ws-b/", bearer(keys.WorkspaceToken("ws-b", time.Now().Add(time.Hour))), "")
	assert.Equal(t, http.StatusGone, res.StatusCode)
}

// TestTokenLinkBecomesCookie: the admin API's link sets a cookie that only
// the workspace's paths get, that no script reads, and that other sites'
// requests do not carry; the token leaves the address at once; and the
// workspace's server never sees the token.
func TestTokenLinkBecomesCookie(t *testing.T) {
	sys, base, cap := secured(t)
	var link admin.Created
	require.Equal(t, http.StatusOK, adminCall(t, base, "POST", "workspaces/ws-a/link", nil, &link))
	res := send(t, "GET", base+link.URL+"&x=1", nil, "")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	assert.Equal(t, "/ws-a/?x=1", res.Header.Get("Location"), "the token is gone from the address")
	var c *http.Cookie
	for _, k := range res.Cookies() {
		if k.Name == proxy.TokenCookie {
			c = k
		}
	}
	require.NotNil(t, c)
	assert.Equal(t, "/ws-a/", c.Path, "only this workspace's paths")
	assert.True(t, c.HttpOnly, "no script reads it")
	assert.Equal(t, http.SameSiteLaxMode, c.SameSite)
	assert.WithinDuration(t, link.ExpiresAt, c.Expires, time.Second)

	h := http.Header{"Cookie": {c.Name + "=" + c.Value + "; theme=dark"}}
	res = send(t, "GET", base+"/ws-a/api/files?token="+url.QueryEscape(link.Token)+"&q=1", h, "")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	res = send(t, "GET", base+"/ws-a/api/files?q=1", h, "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	got := cap.last()
	require.NotNil(t, got)
	assert.Equal(t, "/api/files", got.URL.Path)
	assert.Equal(t, "q=1", got.URL.RawQuery)
	assert.Equal(t, "theme=dark", got.Header.Get("Cookie"), "the workspace's token cookie is not passed on")
	assert.Empty(t, got.Header.Get("Authorization"))
	assert.Equal(t, sys.keys.BackendKey("ws-a"), got.Header.Get(workspace.KeyHeader))
	res = send(t, "GET", base+"/ws-a/", bearer(link.Token), "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Empty(t, cap.last().Header.Get("Authorization"), "nor a bearer token")
	res = send(t, "GET", base+"/ws-b/api/files", h, "")
	assert.Equal(t, http.StatusForbidden, res.StatusCode, "ws-a's cookie, sent to ws-b, is not ws-b's token")
}

// TestCrossSiteRefused: another site's page cannot open a workspace's
// terminal or change its files with the owner's cookie; the page's own
// origin, and one configured in ALLOWED_ORIGINS, can.
func TestCrossSiteRefused(t *testing.T) {
	sys, base, cap := secured(t)
	token := sys.keys.WorkspaceToken("ws-a", time.Now().Add(time.Hour))
	cookie := http.Header{"Cookie": {proxy.TokenCookie + "=" + token}}
	with := func(k, v string) http.Header {
		h := cookie.Clone()
		h.Set(k, v)
		return h
	}
	before := cap.count()
	for name, h := range map[string]http.Header{
		"Sec-Fetch-Site cross-site": with("Sec-Fetch-Site", "cross-site"),
		"foreign Origin":            with("Origin", "https://evil.example"),
	} {
		res := send(t, "PUT", base+"/ws-a/api/files/x.txt", h, "pwned")
		assert.Equal(t, http.StatusForbidden, res.StatusCode, name)
	}
	assert.Equal(t, before, cap.count(), "no write reached the workspace")
	res := send(t, "PUT", base+"/ws-a/api/files/x.txt", with("Sec-Fetch-Site", "same-origin"), "mine")
	assert.Equal(t, http.StatusOK, res.StatusCode, "the workspace's own page")

	ws := "ws" + strings.TrimPrefix(base, "http") + "/ws-a/terminal"
	dial := func(origin string, more ...string) (int, error) {
		h := cookie.Clone()
		if origin != "" {
			h.Set("Origin", origin)
		}
		for i := 0; i < len(more); i += 2 {
			h.Set(more[i], more[i+1])
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, res, err := websocket.Dial(ctx, ws, &websocket.DialOptions{HTTPHeader: h})
		if c != nil {
			_ = c.CloseNow()
		}
		if res == nil {
			return 0, err
		}
		return res.StatusCode, err
	}
	records := sys.tracker.Stats().Records
	code, err := dial("https://evil.example")
	require.Error(t, err)
	assert.Equal(t, http.StatusForbidden, code, "another site's page")
	code, _ = dial("null")
	assert.Equal(t, http.StatusForbidden, code, "a sandboxed page")
	code, _ = dial("", "Sec-Fetch-Site", "same-site")
	assert.Equal(t, http.StatusForbidden, code, "another site's, without an Origin")
	assert.Equal(t, records, sys.tracker.Stats().Records, "a refused upgrade is not activity")
	for _, origin := range []string{base, "https://ide.example", ""} {
		code, err = dial(origin)
		assert.NoError(t, err, origin)
		assert.Equal(t, http.StatusSwitchingProtocols, code, "origin %q", origin)
	}
}

// TestAdminIsProtected: the admin API answers only the admin token (or the
// admin page's cookie, which only the admin token gets), and refuses
// cross-site writes made with that cookie.
func TestAdminIsProtected(t *testing.T) {
	sys, base, _ := secured(t)
	wsToken := sys.keys.WorkspaceToken("ws-a", time.Now().Add(time.Hour))
	for name, h := range map[string]http.Header{
		"no token":          nil,
		"wrong token":       bearer("not-the-admin-token-at-all"),
		"a workspace token": bearer(wsToken),
		"forged cookie":     {"Cookie": {admin.Cookie + "=9999999999.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}},
		"expired cookie":    {"Cookie": {admin.Cookie + "=" + sys.keys.AdminCookie(time.Now().Add(-time.Minute))}},
	} {
		for _, r := range []struct{ method, path string }{
			{"GET", "/admin/api/workspaces"}, {"POST", "/admin/api/workspaces"}, {"GET", "/admin/api/workspaces/ws-a"},
			{"POST", "/admin/api/workspaces/ws-a/link"}, {"DELETE", "/admin/api/workspaces/ws-a"},
		} {
			res := send(t, r.method, base+r.path, h, "")
			assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "%s: %s %s", name, r.method, r.path)
		}
		res := send(t, "GET", base+"/admin/", h, "")
		assert.Equal(t, http.StatusUnauthorized, res.StatusCode, "%s: the page is the sign-in form", name)
	}
	e := entity(t, sys.store, "ws-a")
	assert.True(t, e.DeletedAt.IsZero(), "nothing was deleted")

	res := send(t, "GET", base+"/admin/?token=wrong-token-of-sixteen", nil, "")
	assert.Equal(t, http.StatusForbidden, res.StatusCode)
	assert.Empty(t, res.Cookies())
	res = send(t, "GET", base+"/admin/?token="+testAdmin, nil, "")
	require.Equal(t, http.StatusSeeOther, res.StatusCode)
	assert.Equal(t, "/admin/", res.Header.Get("Location"))
	require.Len(t, res.Cookies(), 1)
	c := res.Cookies()[0]
	assert.Equal(t, "/admin/", c.Path)
	assert.True(t, c.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, c.SameSite)
	h := http.Header{"Cookie": {c.Name + "=" + c.Value}}
	assert.Equal(t, http.StatusOK, send(t, "GET", base+"/admin/api/workspaces", h, "").StatusCode)
	assert.Equal(t, http.StatusOK, send(t, "GET", base+"/admin/", h, "").StatusCode)

	h.Set("Sec-Fetch-Site", "cross-site")
	res = send(t, "DELETE", base+"/admin/api/workspaces/ws-a", h, "")
	assert.Equal(t, http.StatusForbidden, res.StatusCode, "a cross-site delete with the cookie")
	h.Del("Sec-Fetch-Site")
	h.Set("Origin", "https://evil.example")
	res = send(t, "POST", base+"/admin/api/workspaces", h, `{"id":"evil"}`)
	assert.Equal(t, http.StatusForbidden, res.StatusCode, "a cross-site create with the cookie")
	assert.True(t, entity(t, sys.store, "ws-a").DeletedAt.IsZero())
	_, err := sys.store.Get(context.Background(), "evil")
	assert.Error(t, err, "nothing was created")

	// The API's answers give no workspace token away except on purpose
	// (create, link).
	var list admin.List
	require.Equal(t, http.StatusOK, adminCall(t, base, "GET", "workspaces", nil, &list))
	b, _ := json.Marshal(list)
	assert.NotContains(t, string(b), "token")
}

// TestWorkspaceServerIsBehindTheProxy runs real workspace servers: one
// refuses requests without its backend key (anyone on the host could
// otherwise reach it around the proxy), none inherits this process's
// secrets, and its file API keeps to its directory.
func TestWorkspaceServerIsBehindTheProxy(t *testing.T) {
	t.Setenv("WORKSPACES_SECRET", "this-process-secret-value")
	t.Setenv("ADMIN_TOKEN", "this-process-admin-token")
	cfg := fastConfig(t)
	cfg.Standby = time.Hour
	sys := startSystem(t, cfg, Deps{})
	base := "http://" + sys.Addr()
	o := create(t, base, "demo")
	waitPhase(t, sys.store, "demo", catalog.Running, 10*time.Second)
	o.save("a.txt", "mine")

	addr, err := sys.host.Route(context.Background(), "demo")
	require.NoError(t, err)
	res := send(t, "GET", "http://"+addr+"/api/files/a.txt", nil, "")
	assert.Equal(t, http.StatusForbidden, res.StatusCode, "straight to the server, without the key")
	res = send(t, "GET", "http://"+addr+"/api/files/a.txt", http.Header{workspace.KeyHeader: {sys.keys.BackendKey("other")}}, "")
	assert.Equal(t, http.StatusMisdirectedRequest, res.StatusCode, "another workspace's key")
	res = send(t, "GET", "http://"+addr+"/api/files/a.txt", http.Header{workspace.KeyHeader: {sys.keys.BackendKey("demo")}}, "")
	assert.Equal(t, http.StatusOK, res.StatusCode, "its own key, as the proxy sends it")
	// A page under a DNS-rebinding name is same-origin with the server: it
	// could send the key header, had it the key. Its Host gives it away.
	_, port, _ := strings.Cut(addr, ":")
	rebound := http.Header{workspace.KeyHeader: {sys.keys.BackendKey("demo")}, "Host": {"rebind.example:" + port}}
	res, body := exchange(t, "PUT", "http://"+addr+"/api/files/a.txt", rebound, "pwned")
	assert.Equal(t, http.StatusForbidden, res.StatusCode, "its own key, under a name")
	assert.Contains(t, body, "host name")
	assert.Equal(t, "mine", o.read("a.txt"))

	b, err := os.ReadFile(filepath.Join(cfg.DataDir, "run", "demo.json"))
	require.NoError(t, err)
	var route host.Route
	require.NoError(t, json.Unmarshal(b, &route))
	environ, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(route.Worker.PID), "environ"))
	require.NoError(t, err)
	env := map[string]string{}
	for _, kv := range bytes.Split(environ, []byte{0}) {
		k, v, _ := strings.Cut(string(kv), "=")
		env[k] = v
	}
	assert.Empty(t, env["WORKSPACES_SECRET"], "the secret that mints every token")
	assert.Empty(t, env["ADMIN_TOKEN"])
	assert.Equal(t, sys.keys.BackendKey("demo"), env["WORKSPACE_KEY"], "only its own key")

	for _, p := range []string{"/api/files/..%2F..%2Frun%2Fdemo.json", "/api/files/.save-a.txt", "/api/files/%2Fetc%2Fpasswd", "/api/files/..", "/api/files/-rf"} {
		code, body := o.do("GET", p, "")
		assert.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, code, p)
		assert.NotContains(t, body, "worker", p)
		code, _ = o.do("PUT", p, "x")
		assert.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed}, code, p)
	}
	_, err = os.Stat(filepath.Join(cfg.DataDir, "run", "demo.json"))
	require.NoError(t, err, "nothing outside the workspace was touched")
}

// TestForeignHostRefused: a request for a name the system was not given —
// what a page under a DNS-rebinding name sends, which the browser takes for
// same-origin requests — is refused before anything runs, on every path,
// even with the owner's or the admin's token; a name in ALLOWED_HOSTS is
// answered.
func TestForeignHostRefused(t *testing.T) {
	sys, base, cap := secured(t)
	port := base[strings.LastIndex(base, ":")+1:]
	wsToken := sys.keys.WorkspaceToken("ws-a", time.Now().Add(time.Hour))
	as := func(host, token string) http.Header {
		h := http.Header{"Host": {host + ":" + port}, "Origin": {"http://" + host + ":" + port}, "Sec-Fetch-Site": {"same-origin"}}
		if token != "" {
			h.Set("Authorization", "Bearer "+token)
		}
		return h
	}
	upgrade := func(h http.Header) http.Header {
		h.Set("Connection", "Upgrade")
		h.Set("Upgrade", "websocket")
		h.Set("Sec-WebSocket-Version", "13")
		h.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		return h
	}
	type request struct {
		method, path, token, body string
		websocket                 bool
	}
	requests := []request{
		{"GET", "/ws-a/api/files", wsToken, "", false},
		{"PUT", "/ws-a/api/files/x.txt", wsToken, "pwned", false},
		{"GET", "/ws-a/terminal", wsToken, "", true},
		{"GET", "/ws-a/?token=" + url.QueryEscape(wsToken), "", "", false},
		{"POST", "/admin/api/workspaces", testAdmin, `{"id":"rebound"}`, false},
		{"GET", "/admin/api/workspaces", testAdmin, "", false},
		{"POST", "/admin/api/workspaces/ws-a/link", testAdmin, "", false},
		{"DELETE", "/admin/api/workspaces/ws-a", testAdmin, "", false},
		{"GET", "/admin/?token=" + testAdmin, "", "", false},
		{"GET", "/admin/static/admin.js", "", "", false},
		{"GET", "/metrics", "", "", false},
		{"GET", "/healthz", "", "", false},
		{"GET", "/", "", "", false},
		{"GET", "/no-such-page", "", "", false},
	}
	records, reached, proxied := sys.tracker.Stats().Records, cap.count(), sys.proxy.Stats()
	for _, r := range requests {
		h := as("evil.example", r.token)
		if r.websocket {
			h = upgrade(h)
		}
		res, body := exchange(t, r.method, base+r.path, h, r.body)
		assert.Equal(t, http.StatusForbidden, res.StatusCode, "%s %s", r.method, r.path)
		assert.Contains(t, body, "Unknown address", "%s %s", r.method, r.path)
		assert.Empty(t, res.Cookies(), "%s %s", r.method, r.path)
	}
	assert.Equal(t, reached, cap.count(), "nothing reached a workspace")
	assert.Equal(t, records, sys.tracker.Stats().Records, "nothing was activity")
	assert.Equal(t, proxied, sys.proxy.Stats(), "nothing reached the proxy")
	_, err := sys.store.Get(context.Background(), "rebound")
	assert.Error(t, err, "nothing was created")
	assert.True(t, entity(t, sys.store, "ws-a").DeletedAt.IsZero(), "nothing was deleted")

	// The name in ALLOWED_HOSTS is this server's.
	for _, r := range []struct {
		request
		want int
	}{
		{request{"GET", "/ws-a/api/files", wsToken, "", false}, http.StatusOK},
		{request{"PUT", "/ws-a/api/files/x.txt", wsToken, "mine", false}, http.StatusOK},
		{request{"POST", "/admin/api/workspaces", testAdmin, `{"id":"named"}`, false}, http.StatusCreated},
		{request{"GET", "/admin/?token=" + testAdmin, "", "", false}, http.StatusSeeOther},
		{request{"GET", "/metrics", "", "", false}, http.StatusOK},
		{request{"GET", "/healthz", "", "", false}, http.StatusOK},
	} {
		res := send(t, r.method, base+r.path, as("ide.example", r.token), r.body)
		assert.Equal(t, r.want, res.StatusCode, "%s %s", r.method, r.path)
	}
	assert.Equal(t, reached+2, cap.count())
	_, err = sys.store.Get(context.Background(), "named")
	assert.NoError(t, err, "created through the allowed name")
}

// TestOtherSitesCannotWakeAWorkspace: every request to a workspace is
// activity, and one to a sleeping workspace wakes it, so a GET that a page
// of another site or origin makes the browser send with the owner's cookie
// (an image, a frame, a no-cors fetch: a page of the same site on another
// port gets the SameSite=Lax cookie sent) changes state as a write does,
// and is refused as one: the workspace stays in STANDBY, nothing is
// recorded, nothing is asked to run. Without a cookie, nothing happens
// either. A link the owner follows from another site, and a page of
// ALLOWED_ORIGINS, open it.
func TestOtherSitesCannotWakeAWorkspace(t *testing.T) {
	cap := &capture{}
	srv := httptest.NewServer(cap)
	t.Cleanup(srv.Close)
	fake := newFakeHost(t, strings.TrimPrefix(srv.URL, "http://"), 0)
	cfg := fastConfig(t)
	cfg.Archive = time.Hour
	cfg.AllowedOrigins = []string{"https://ide.example"}
	sys := startSystem(t, cfg, Deps{Runtime: fake, Routes: fake})
	base := "http://" + sys.Addr()
	o := create(t, base, "sleepy")
	waitPhase(t, sys.store, "sleepy", catalog.Running, 10*time.Second)
	asleep := waitPhase(t, sys.store, "sleepy", catalog.Standby, 10*time.Second)
	ops, records, reached, proxied := fake.opsOf("sleepy"), sys.tracker.Stats().Records, cap.count(), sys.proxy.Stats()

	cookie := proxy.TokenCookie + "=" + o.token
	fetch := func(cookie string, kv ...string) http.Header {
		h := http.Header{}
		if cookie != "" {
			h.Set("Cookie", cookie)
		}
		for i := 0; i < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	image := func(site string) http.Header {
		return fetch(cookie, "Sec-Fetch-Site", site, "Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "image")
	}
	for _, r := range []struct {
		name, method string
		header       http.Header
		want         int
	}{
		{"an image of another site", "GET", image("cross-site"), http.StatusForbidden},
		{"an image of the same site on another port", "GET", image("same-site"), http.StatusForbidden},
		{"a frame", "GET", fetch(cookie, "Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "iframe"), http.StatusForbidden},
		{"a no-cors fetch", "GET", fetch(cookie, "Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "no-cors", "Origin", "http://127.0.0.1:9999"), http.StatusForbidden},
		{"a fetch of another origin", "GET", fetch(cookie, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors", "Origin", "https://evil.example"), http.StatusForbidden},
		{"a HEAD", "HEAD", image("same-site"), http.StatusForbidden},
		{"a form", "POST", fetch(cookie, "Sec-Fetch-Site", "same-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "iframe", "Origin", "http://127.0.0.1:9999"), http.StatusForbidden},
		{"a browser without Sec-Fetch-Site", "GET", fetch(cookie, "Origin", "http://127.0.0.1:9999"), http.StatusForbidden},
		{"a sandboxed frame's fetch", "GET", fetch(cookie, "Origin", "null"), http.StatusForbidden},
		{"no cookie, no token", "GET", nil, http.StatusUnauthorized},
		{"another site's image without the cookie", "GET", fetch("", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "no-cors", "Sec-Fetch-Dest", "image"), http.StatusUnauthorized},
	} {
		for _, path := range []string{"/sleepy/", "/sleepy/api/files"} {
			res := send(t, r.method, base+path, r.header, "")
			assert.Equal(t, r.want, res.StatusCode, "%s: %s %s", r.name, r.method, path)
		}
	}
	e := entity(t, sys.store, "sleepy")
	assert.Equal(t, catalog.Standby, e.Phase, "still asleep")
	assert.Empty(t, e.DesiredState, "nobody asked it to run")
	assert.Equal(t, asleep.LastActivityAt, e.LastActivityAt, "no activity reached the table")
	assert.Equal(t, records, sys.tracker.Stats().Records, "nothing was recorded")
	assert.Equal(t, ops, fake.opsOf("sleepy"), "nothing was started")
	assert.Equal(t, reached, cap.count())
	after := sys.proxy.Stats()
	assert.Equal(t, proxied.Requests, after.Requests)
	assert.Equal(t, proxied.Held, after.Held)
	assert.Equal(t, proxied.Refused+22, after.Refused, "each one refused")

	// The owner following a link from another site (a chat, a mail) opens
	// the IDE: held while it wakes, then served.
	res := send(t, "GET", base+"/sleepy/", fetch(cookie, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"), "")
	assert.Equal(t, http.StatusOK, res.StatusCode, "a link followed")
	waitPhase(t, sys.store, "sleepy", catalog.Running, 5*time.Second)
	assert.Equal(t, proxied.Held+1, sys.proxy.Stats().Held)
	res = send(t, "GET", base+"/sleepy/api/files", fetch(cookie, "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors", "Origin", "https://ide.example"), "")
	assert.Equal(t, http.StatusOK, res.StatusCode, "a page of ALLOWED_ORIGINS")
}

// TestAdminAndMetricsAreForTheirOwnPages: the admin page, its files and
// API, /metrics and /healthz refuse every request a browser marks as sent
// by a page of another site or origin, reads included: the admin cookie is
// SameSite=Strict, but a page of the same site on another port gets it
// sent, and a frame of the admin page could be clicked through. A link
// followed to the admin page opens it; clients that are not browsers
// (curl, Prometheus) and the page itself are answered.
func TestAdminAndMetricsAreForTheirOwnPages(t *testing.T) {
	sys, base, _ := secured(t)
	adminCookie := admin.Cookie + "=" + sys.keys.AdminCookie(time.Now().Add(time.Hour))
	from := func(site, mode, dest string) http.Header {
		return http.Header{"Cookie": {adminCookie}, "Sec-Fetch-Site": {site}, "Sec-Fetch-Mode": {mode}, "Sec-Fetch-Dest": {dest}}
	}
	for _, r := range []struct {
		method, path string
		header       http.Header
	}{
		{"GET", "/admin/api/workspaces", from("same-site", "no-cors", "script")},
		{"GET", "/admin/api/workspaces/ws-a", from("same-site", "no-cors", "image")},
		{"GET", "/admin/", from("same-site", "navigate", "iframe")},
		{"GET", "/admin/static/admin.js", from("cross-site", "no-cors", "script")},
		{"GET", "/metrics", from("cross-site", "no-cors", "image")},
		{"GET", "/healthz", from("same-site", "cors", "empty")},
		{"GET", "/", from("cross-site", "no-cors", "image")},
		{"GET", "/admin/api/workspaces", http.Header{"Cookie": {adminCookie}, "Origin": {"http://127.0.0.1:9999"}}},
		{"POST", "/admin/api/workspaces/ws-a/link", from("same-site", "no-cors", "empty")},
	} {
		res, body := exchange(t, r.method, base+r.path, r.header, "")
		assert.Equal(t, http.StatusForbidden, res.StatusCode, "%s %s %v", r.method, r.path, r.header)
		assert.NotContains(t, body, "ws-a", "%s %s", r.method, r.path)
	}

	for _, r := range []struct {
		path   string
		header http.Header
	}{
		{"/admin/", from("cross-site", "navigate", "document")},
		{"/admin/api/workspaces", from("same-origin", "cors", "empty")},
		{"/admin/static/admin.js", from("same-origin", "no-cors", "script")},
		{"/metrics", nil},
		{"/healthz", nil},
		{"/metrics", from("none", "navigate", "document")},
	} {
		res := send(t, "GET", base+r.path, r.header, "")
		assert.Equal(t, http.StatusOK, res.StatusCode, "%s %v", r.path, r.header)
	}
}
