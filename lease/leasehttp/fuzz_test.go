package leasehttp_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ttlkit/ttlkit/internal/httpfuzz"
	"github.com/ttlkit/ttlkit/lease/leasehttp"
)

// FuzzHandler sends arbitrary requests to a Handler: nothing panics,
// nothing answers 5xx, every error is the JSON problem shape, and a grant
// whose body is not JSON gets a 4xx.
func FuzzHandler(f *testing.F) {
	for _, seed := range []struct{ method, target, holder, body string }{
		{"POST", "/leases/", "alice", `{"resource":"cam","cost":2}`},
		{"POST", "/leases/", "alice", `{"resource":"cam","cost":-1,"ttl_sec":1e308}`},
		{"POST", "/leases/", "", `{"resource":`},
		{"POST", "/leases/abc/heartbeat", "bob", ""},
		{"DELETE", "/leases/%2e%2e", "alice", ""},
		{"GET", "/leases/?x=" + strings.Repeat("y", 100), "", ""},
		{"PATCH", "/leases/abc", "alice", "{}"},
	} {
		f.Add(seed.method, seed.target, seed.holder, seed.body)
	}
	f.Fuzz(func(t *testing.T, method, target, holder, body string) {
		req, ok := httpfuzz.Request(context.Background(), method, target, body)
		if !ok || !httpfuzz.SetHeader(req, "X-Holder", holder) {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		fx := newFixture(t, leasehttp.Options{})
		rec := httptest.NewRecorder()
		fx.srv.ServeHTTP(rec, req)
		if rec.Code >= 500 || rec.Code < 200 {
			t.Fatalf("%s %q holder %q body %q: %d %s", method, target, holder, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			var p struct {
				Code string `json:"error_code"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Code == "" {
				t.Fatalf("%s %q: a %d without an error_code: %s", method, target, rec.Code, rec.Body)
			}
		}
		if method == "POST" && req.URL.Path == "/leases/" && !json.Valid([]byte(body)) && rec.Code < 400 {
			t.Fatalf("a malformed grant %q got %d", body, rec.Code)
		}
	})
}
