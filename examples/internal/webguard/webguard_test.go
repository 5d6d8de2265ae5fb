package webguard_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/internal/webguard"
	"github.com/ttlkit/ttlkit/internal/testenv/browsertest"
)

func TestHosts(t *testing.T) {
	h := webguard.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		webguard.Options{Hosts: []string{"ide.example.com", ".corp.example"}})
	for host, want := range map[string]int{
		"127.0.0.1:8080":          200,
		"127.0.0.1":               200,
		"[::1]:8080":              200,
		"10.1.2.3:80":             200, // an address cannot be rebound
		"localhost:8080":          200,
		"LOCALHOST.:8080":         200,
		"app.localhost:8080":      200,
		"ide.example.com":         200,
		"IDE.example.com:443":     200,
		"corp.example":            200,
		"a.b.corp.example:8080":   200,
		"":                        200, // HTTP/1.0 without Host: no browser
		"evil.example:8080":       403,
		"example.com":             403,
		"localhost.evil.example":  403,
		"evilcorp.example":        403,
		"127.0.0.1.evil.example":  403,
		"ide.example.com.evil.io": 403,
	} {
		r := httptest.NewRequest("POST", "/x", nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, want, w.Code, "Host %q", host)
	}
}

func TestAnyHost(t *testing.T) {
	h := webguard.Handler(http.NotFoundHandler(), webguard.Options{Hosts: []string{"*"}})
	r := httptest.NewRequest("GET", "/", nil)
	r.Host = "evil.example:8080"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	assert.Equal(t, 404, w.Code)
}

func TestCrossSite(t *testing.T) {
	type hdr = map[string]string
	cases := []struct {
		name    string
		method  string
		headers hdr
		pages   bool
		want    int
	}{
		{"curl", "POST", nil, false, 200},
		{"same-origin fetch", "POST", hdr{"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:8080"}, false, 200},
		{"typed address", "GET", hdr{"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, false, 200},
		{"no-cors POST", "POST", hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Origin": "http://evil.example"}, true, 403},
		{"form POST", "POST", hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, true, 403},
		{"img GET", "GET", hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}, true, 403},
		{"iframe", "GET", hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"}, true, 403},
		{"another port", "POST", hdr{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:9999"}, false, 403},
		{"link followed, no pages", "GET", hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, false, 403},
		{"link followed, pages", "GET", hdr{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}, true, 200},
		{"unknown Sec-Fetch-Site", "GET", hdr{"Sec-Fetch-Site": "bogus"}, false, 403},
		{"old browser, foreign Origin", "POST", hdr{"Origin": "http://evil.example"}, false, 403},
		{"old browser, null Origin", "POST", hdr{"Origin": "null"}, false, 403},
		{"old browser, own Origin", "POST", hdr{"Origin": "http://127.0.0.1:8080"}, false, 200},
		{"old browser, own Origin on another port", "POST", hdr{"Origin": "http://127.0.0.1:9999"}, false, 403},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ran := false
			h := webguard.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran = true }),
				webguard.Options{Pages: c.pages})
			r := httptest.NewRequest(c.method, "/x", nil)
			r.Host = "127.0.0.1:8080"
			for k, v := range c.headers {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			assert.Equal(t, c.want, w.Code)
			assert.Equal(t, c.want == 200, ran, "the handler ran")
		})
	}
}

func TestAnySite(t *testing.T) {
	h := webguard.Handler(http.NotFoundHandler(), webguard.Options{AnySite: true})
	r := httptest.NewRequest("POST", "http://127.0.0.1:8080/", nil)
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	assert.Equal(t, 404, w.Code, "another site's request reaches the handler")
	r.Host = "evil.example:8080"
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	assert.Equal(t, 403, w.Code, "the Host is still checked")
}

func TestDeny(t *testing.T) {
	var got error
	h := webguard.Handler(http.NotFoundHandler(), webguard.Options{Deny: func(w http.ResponseWriter, r *http.Request, err error) {
		got = err
		w.WriteHeader(http.StatusTeapot)
	}})
	r := httptest.NewRequest("GET", "/", nil)
	r.Host = "evil.example"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	assert.Equal(t, http.StatusTeapot, w.Code)
	assert.ErrorIs(t, got, webguard.ErrHost)

	r = httptest.NewRequest("GET", "/", nil)
	r.Host = "127.0.0.1:8080"
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	h.ServeHTTP(httptest.NewRecorder(), r)
	assert.ErrorIs(t, got, webguard.ErrCrossSite)
}

func TestParseHosts(t *testing.T) {
	hosts, err := webguard.ParseHosts(" IDE.example.com, .corp.example ,,*")
	require.NoError(t, err)
	assert.Equal(t, []string{"ide.example.com", ".corp.example", "*"}, hosts)
	for _, bad := range []string{"http://x.example", "x.example:8080", "a..b", "sp ace", "."} {
		_, err := webguard.ParseHosts(bad)
		assert.Error(t, err, bad)
	}
	hosts, err = webguard.ParseHosts("")
	require.NoError(t, err)
	assert.Empty(t, hosts)
}

// TestBrowser has a real browser, on a page of another site, send each kind
// of request a page can send without a preflight: all of them reach a server
// without the guard, and none reaches the handler behind it.
func TestBrowser(t *testing.T) {
	ctx := browsertest.New(t)
	var mu sync.Mutex
	seen := map[string][]string{}
	serve := func(name string, guard bool) string {
		var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			seen[name] = append(seen[name], r.Method+" "+string(body))
			mu.Unlock()
		})
		if guard {
			h = webguard.Handler(h, webguard.Options{Pages: true})
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	body := `{"command":["sh","-c","id"]}`
	open, guarded := serve("open", false), serve("guarded", true)
	browsertest.Attack(t, ctx, append(browsertest.CrossSiteKinds(open+"/exec", body),
		browsertest.CrossSiteKinds(guarded+"/exec", body)...)...)

	mu.Lock()
	defer mu.Unlock()
	assert.ElementsMatch(t, []string{"POST " + body, "POST " + body + "=\r\n", "GET "}, seen["open"],
		"without the guard, every request arrives with the attacker's body")
	assert.Empty(t, seen["guarded"], "behind the guard, no request reaches the handler")
}
