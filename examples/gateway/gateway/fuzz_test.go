package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/examples/gateway/gateway"
	"github.com/ttlkit/ttlkit/examples/gateway/internal/gwtest"
	"github.com/ttlkit/ttlkit/internal/httpfuzz"
)

// invocations returns how many invocations the gateway has answered (its
// latency histogram's count, over every function and outcome).
func (e *env) invocations(t testing.TB) uint64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() == "gateway_invocation_duration_seconds" {
			for _, m := range mf.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// FuzzInvokeAPI sends arbitrary requests (method, path and query, body,
// the API key in either header, the invocation type; oversize pads the
// body past 6 MB) to the HTTP surface of one gateway, with an API key and
// one function run by a real worker: nothing panics or answers 5xx; a
// request without the key is refused (401 or 403; only /healthz and the
// mux's redirects are open) and invokes nothing; on the invoke path of the
// function with the key, a malformed request gets its 4xx (invocation
// type, size, JSON) and a well-formed one the function's answer.
func FuzzInvokeAPI(f *testing.F) {
	e := startWith(f, func(c *gateway.Config) { c.APIKey = apiKey }, function("fn", 5, 2))
	const path = "/2015-03-31/functions/fn/invocations"
	for _, seed := range []struct {
		method, target, body, key, authz, typ string
		oversize                              bool
	}{
		{"POST", path, `{"echo":{"a":1}}`, apiKey, "", "", false},
		{"POST", path, `{"fail":"boom"}`, "", "Bearer " + apiKey, "RequestResponse", false},
		{"POST", path, ``, apiKey, "", "DryRun", false},
		{"POST", path, `{}`, apiKey, "", "Event", false},
		{"POST", path, `{"a":`, apiKey, "", "", false},
		{"POST", path, `{}`, apiKey, "", "", true},
		{"POST", path, `{}`, "", "", "", false},
		{"POST", path, `{}`, "wrong", "Bearer " + apiKey, "", false},
		{"POST", path, `[1,2]`, "", "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/lambda/aws4_request", "", false},
		{"POST", "/2015-03-31/functions/nope/invocations", `{}`, apiKey, "", "", false},
		{"POST", "/2015-03-31/functions/f%6E/invocations?Qualifier=$LATEST", `"s"`, apiKey, "", "", false},
		{"GET", path, ``, apiKey, "", "", false},
		{"POST", "/2015-03-31/functions/../../healthz", ``, "", "", "", false},
		{"GET", "/metrics", ``, apiKey, "", "", false},
		{"GET", "/healthz", ``, "", "", "", false},
		{"PUT", "/2015-03-31/functions/fn/invocations/x", `{}`, apiKey, "", "", false},
	} {
		f.Add(seed.method, seed.target, seed.body, seed.key, seed.authz, seed.typ, seed.oversize)
	}
	f.Fuzz(func(t *testing.T, method, target, body, key, authz, typ string, oversize bool) {
		// Only what the function answers at once: no sleep, no exit (a
		// crash is answered, as a 200, but costs a cold start).
		var ask gwtest.Request
		if json.Unmarshal([]byte(body), &ask) == nil && (ask.SleepMS > 0 || ask.Exit) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, ok := httpfuzz.Request(ctx, method, target, body)
		if !ok || !httpfuzz.SetHeader(req, "X-Api-Key", key) || !httpfuzz.SetHeader(req, "Authorization", authz) ||
			!httpfuzz.SetHeader(req, "X-Amz-Invocation-Type", typ) {
			return
		}
		if oversize {
			httpfuzz.Pad(req, body, gateway.MaxPayload+1)
		}
		authorized := httpfuzz.CarriesKey(key, authz, apiKey)
		before := e.invocations(t)
		rec := httptest.NewRecorder()
		e.handler.ServeHTTP(rec, req)
		code := rec.Code
		if code < 200 || code >= 500 {
			t.Fatalf("%s %q (%.100q): %d %s", method, target, body, code, rec.Body)
		}
		if rec.Body.Len() > gateway.MaxPayload+1024 {
			t.Fatalf("%s %q: a %d-byte answer", method, target, rec.Body.Len())
		}
		if code >= 400 && rec.Header().Get("X-Amzn-Errortype") != "" {
			var doc struct{ Message string }
			if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc.Message == "" {
				t.Fatalf("%s %q: a %d without the error shape: %s", method, target, code, rec.Body)
			}
		}
		open := req.URL.Path == "/healthz" && (method == "GET" || method == "HEAD")
		redirect := code >= 300 && code < 400
		if !authorized && !open && !redirect {
			if code != http.StatusUnauthorized && code != http.StatusForbidden {
				t.Fatalf("%s %q without the key (X-Api-Key %q, Authorization %q): %d %s", method, target, key, authz, code, rec.Body)
			}
			if after := e.invocations(t); after != before {
				t.Fatalf("%s %q without the key invoked the function", method, target)
			}
			return
		}
		if !authorized || method != "POST" || req.URL.Path != path {
			return
		}
		want := http.StatusOK
		switch {
		case typ != "" && typ != "RequestResponse" && typ != "DryRun":
			want = http.StatusBadRequest
		case typ == "DryRun":
			want = http.StatusNoContent
		case oversize:
			want = http.StatusRequestEntityTooLarge
		case body != "" && !json.Valid([]byte(body)):
			want = http.StatusBadRequest
		}
		if code != want {
			t.Fatalf("POST %q type %q oversize %v (%.100q): %d, want %d: %s", target, typ, oversize, body, code, want, rec.Body)
		}
	})
}
