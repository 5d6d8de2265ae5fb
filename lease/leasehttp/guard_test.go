package leasehttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/lease/leasehttp"
)

// TestOtherSitesRefused sends every operation as a page of another site, or a
// DNS-rebinding name, would make a browser send it: each is refused with its
// code, and the budget is untouched.
func TestOtherSitesRefused(t *testing.T) {
	f := newFixture(t, leasehttp.Options{Hosts: []string{"leases.example", ".corp.example"}})
	id := f.grant(t, "alice", 1)
	before, err := f.m.Get(context.Background(), id)
	require.NoError(t, err)
	ops := []struct{ method, path, body string }{
		{"POST", "/leases/", `{"resource":"cam","cost":1}`},
		{"POST", "/leases/" + id + "/heartbeat", ""},
		{"DELETE", "/leases/" + id, ""},
		{"GET", "/leases/", ""},
	}
	send := func(method, path, body, host string, headers map[string]string) reply {
		req := httptest.NewRequest(method, "http://127.0.0.1"+path, strings.NewReader(body))
		req.Host = host
		req.Header.Set("X-Holder", "alice")
		req.Header.Set("Content-Type", "text/plain") // a simple request: no preflight
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		f.srv.ServeHTTP(rec, req)
		r := reply{status: rec.Code, header: rec.Header()}
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &r.body), rec.Body.String())
		}
		return r
	}
	refused := []struct {
		name    string
		host    string
		headers map[string]string
		code    string
	}{
		{"cross-site fetch", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}, "cross_site"},
		{"another port of this machine", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:9"}, "cross_site"},
		{"form or image (no Origin)", "127.0.0.1:8080", map[string]string{"Sec-Fetch-Site": "cross-site"}, "cross_site"},
		{"browser without Sec-Fetch-Site", "127.0.0.1:8080", map[string]string{"Origin": "http://evil.example"}, "cross_site"},
		{"null origin", "127.0.0.1:8080", map[string]string{"Origin": "null"}, "cross_site"},
		{"rebinding name, same-origin", "evil.example:8080", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://evil.example:8080"}, "unknown_host"},
		{"rebinding name, no browser headers", "evil.example:8080", nil, "unknown_host"},
		{"a name that only ends like a configured one", "evilcorp.example", nil, "unknown_host"},
	}
	for _, c := range refused {
		for _, op := range ops {
			t.Run(c.name+"/"+op.method+" "+op.path, func(t *testing.T) {
				requireProblem(t, send(op.method, op.path, op.body, c.host, c.headers), http.StatusForbidden, c.code)
			})
		}
	}
	// Nothing changed: alice still holds her one lease, as it was.
	_, n, err := f.m.Usage(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1, n, "no grant, no release went through")
	after, err := f.m.Get(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, before, after, "no heartbeat went through")

	held := httptest.NewRequest("GET", "http://evil.example/stream", nil)
	held.Header.Set("X-Holder", "alice")
	_, err = f.h.Held(held, id)
	var p *leasehttp.Problem
	require.ErrorAs(t, err, &p, "Held refuses a rebinding name too")
	assert.Equal(t, "unknown_host", p.Code)

	allowed := []struct{ host, site string }{
		{"localhost:8080", "same-origin"},
		{"app.localhost", ""},
		{"[::1]:8080", "none"},
		{"192.0.2.7:8080", ""},
		{"leases.example", "same-origin"},
		{"a.corp.example:443", ""},
	}
	for _, a := range allowed {
		r := send("GET", "/leases/", "", a.host, map[string]string{"Sec-Fetch-Site": a.site})
		assert.Equal(t, http.StatusOK, r.status, "%s: %v", a.host, r.body)
	}
}

func TestBadHosts(t *testing.T) {
	for _, hosts := range [][]string{{"http://x.example"}, {"x.example:80"}, {""}, {"a b"}} {
		_, err := leasehttp.New(newFixture(t, leasehttp.Options{}).m, func(*http.Request) (string, error) { return "a", nil },
			leasehttp.Options{Hosts: hosts})
		assert.ErrorIs(t, err, leasehttp.ErrInvalid, "%q", hosts)
	}
}
