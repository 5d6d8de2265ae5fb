package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/examples/workspaces/catalog"
	"github.com/ttlkit/ttlkit/examples/workspaces/proxy"
	"github.com/ttlkit/ttlkit/internal/httpfuzz"
)

// FuzzHTTP sends arbitrary requests (method, path and query, body, and the
// credentials: "admin" and "ws-a" stand for the real admin token and
// ws-a's token, anything else is sent as it is) to the whole HTTP surface
// of a proxy: the workspaces, the admin page and API, /metrics, /healthz.
// Nothing panics, nothing answers 5xx, a malformed admin request gets a
// 4xx, and no answer is unbounded.
func FuzzHTTP(f *testing.F) {
	cap := &capture{}
	srv := httptest.NewServer(cap)
	f.Cleanup(srv.Close)
	fake := newFakeHost(f, strings.TrimPrefix(srv.URL, "http://"), 0)
	cfg := fastConfig(f)
	cfg.Standby, cfg.StartTimeout = time.Hour, 200*time.Millisecond
	sys := startSystem(f, cfg, Deps{Runtime: fake, Routes: fake})
	if _, err := sys.catalog.Create(context.Background(), "ws-a"); err != nil {
		f.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for fake.Alive(context.Background(), "ws-a") == false && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	h := sys.server.Handler
	wsToken := sys.keys.WorkspaceToken("ws-a", time.Now().Add(24*time.Hour))
	for _, s := range []struct{ method, target, body, auth, cookie, origin string }{
		{"GET", "/ws-a/api/files", "", "ws-a", "", ""},
		{"GET", "/ws-a/?token=" + wsToken, "", "", "", ""},
		{"PUT", "/ws-a/api/files/x.txt", "hello", "", "ws-a", "http://127.0.0.1"},
		{"GET", "/ws-a", "", "ws-a", "", ""},
		{"GET", "/ws-b/api/files", "", "ws-a", "", ""},
		{"GET", "/WS-A/%2e%2e/admin/api/workspaces", "", "ws-a", "", ""},
		{"POST", "/admin/api/workspaces", `{"id":"demo"}`, "admin", "", ""},
		{"POST", "/admin/api/workspaces", `{"id":`, "admin", "", ""},
		{"POST", "/admin/api/workspaces", `{"id":"-bad"}`, "admin", "", ""},
		{"POST", "/admin/api/workspaces", `{"id":"x","extra":1}`, "admin", "", ""},
		{"GET", "/admin/api/workspaces?limit=-1&after=%00", "", "admin", "", ""},
		{"DELETE", "/admin/api/workspaces/ws-a", "", "admin", "", "https://evil.example"},
		{"POST", "/admin/api/workspaces/zz/link", "", "admin", "", ""},
		{"GET", "/admin/?token=" + testAdmin, "", "", "", ""},
		{"GET", "/admin/static/../../go.mod", "", "", "", ""},
		{"GET", "/metrics", "", "", "", ""},
		{"GET", "/healthz", "", "", "", ""},
		{"GET", "/", "", "", "", ""},
	} {
		f.Add(s.method, s.target, s.body, s.auth, s.cookie, s.origin)
	}
	cred := func(v string) string {
		switch v {
		case "admin":
			return testAdmin
		case "ws-a":
			return wsToken
		}
		return v
	}
	f.Fuzz(func(t *testing.T, method, target, body, authz, cookie, origin string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, ok := httpfuzz.Request(ctx, method, target, body)
		if !ok {
			return
		}
		if authz != "" && !httpfuzz.SetHeader(req, "Authorization", "Bearer "+cred(authz)) {
			return
		}
		if cookie != "" && !httpfuzz.SetHeader(req, "Cookie", proxy.TokenCookie+"="+cred(cookie)) {
			return
		}
		if origin != "" && !httpfuzz.SetHeader(req, "Origin", origin) {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 || rec.Code < 200 {
			t.Fatalf("%s %q (%q): %d %s", method, target, body, rec.Code, rec.Body)
		}
		if method == "POST" && req.URL.Path == "/admin/api/workspaces" && rec.Code < 300 {
			var v struct {
				ID string `json:"id"`
			}
			d := json.NewDecoder(strings.NewReader(body))
			d.DisallowUnknownFields()
			if strings.TrimSpace(body) != "" && (d.Decode(&v) != nil || (v.ID != "" && !catalog.ValidID(v.ID))) {
				t.Fatalf("a malformed create %q got %d", body, rec.Code)
			}
		}
		if rec.Body.Len() > 1<<20 {
			t.Fatalf("%s %q: a %d-byte answer", method, target, rec.Body.Len())
		}
	})
}

var _ http.Handler = (*proxy.Proxy)(nil)
