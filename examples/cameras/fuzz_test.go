package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/internal/httpfuzz"
)

// FuzzHTTP sends arbitrary requests (method, path and query, body, headers,
// cookie) to a whole instance: nothing panics, nothing answers 5xx, and a
// request the API cannot understand gets a 4xx.
func FuzzHTTP(f *testing.F) {
	srv, _ := newServer(f, testConfig(), Backend{})
	for _, seed := range []struct{ method, target, body, ctype, cookie string }{
		{"POST", "/api/modal/lease", `{"camera_id":"cam_2f_19","quality":"main"}`, "application/json", ""},
		{"POST", "/api/modal/lease", `{"camera_id":`, "application/json", ""},
		{"POST", "/api/modal/lease", `{"camera_id":"cam_2f_19","quality":"huge"}`, "text/plain", ""},
		{"POST", "/api/modal/lease/abc/heartbeat", "", "", "x.1.y"},
		{"DELETE", "/api/modal/lease/%00", "", "", ""},
		{"GET", "/stream/cam_2f_19?lease_id=" + strings.Repeat("a", 300), "", "", ""},
		{"GET", "/api/cameras/../../etc/passwd/snapshot", "", "", ""},
		{"GET", "/api/system/metrics?hours=-1", "", "", ""},
		{"GET", "/static/../../go.mod", "", "", ""},
		{"GET", "/static/\xdf", "", "", ""}, // not UTF-8: FileServerFS alone answers 500
		{"PUT", "/api/config", "{}", "", ""},
	} {
		f.Add(seed.method, seed.target, seed.body, seed.ctype, seed.cookie)
	}
	f.Fuzz(func(t *testing.T, method, target, body, ctype, cookie string) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond) // a stream ends with its request
		defer cancel()
		req, ok := httpfuzz.Request(ctx, method, target, body)
		if !ok || !httpfuzz.SetHeader(req, "Content-Type", ctype) || !httpfuzz.SetHeader(req, "Cookie", sessionCookie+"="+cookie) {
			return
		}
		u := req.URL
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %q (%q): %d %s", method, target, body, rec.Code, rec.Body)
		}
		if rec.Code < 200 {
			t.Fatalf("%s %q: status %d", method, target, rec.Code)
		}
		if method == "POST" && u.Path == "/api/modal/lease" && !json.Valid([]byte(body)) && rec.Code < 400 {
			t.Fatalf("a malformed lease request %q got %d", body, rec.Code)
		}
		if rec.Body.Len() > 1<<20 && !strings.HasPrefix(u.Path, "/stream/") {
			t.Fatalf("%s %q: a %d-byte answer", method, target, rec.Body.Len())
		}
	})
}

var _ http.Handler = (*Server)(nil)
