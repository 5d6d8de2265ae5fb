package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/examples/gateway/gateway"
	"github.com/ttlkit/ttlkit/examples/gateway/internal/gwtest"
	"github.com/ttlkit/ttlkit/examples/gateway/sigv4"
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

// existing says whether qualifier names a version of the fuzzed function,
// which has no alias: none, or $LATEST.
func existing(qualifier string) bool {
	return qualifier == "" || qualifier == gateway.Latest
}

// FuzzInvokeAPI sends arbitrary requests (method, path and query, body, an
// Authorization header, the invocation type; sign has the AWS SDK's
// signer sign the request with the gateway's key pair, after the rest is
// set; oversize pads the body past 6 MB) to the HTTP surface of one
// gateway with one function run by a real worker: nothing panics or
// answers 5xx; an unsigned request is refused (403; only GET /healthz and
// /metrics are open) and invokes nothing, before its body is read; a
// signed one is never refused for its signature, which checks this
// package's canonical request against the SDK's on whatever the fuzzer
// makes; on the invoke path of the function, a signed malformed request
// gets its 4xx (size, an unknown qualifier, invocation type, JSON) and a
// well-formed one the function's answer.
func FuzzInvokeAPI(f *testing.F) {
	e := start(f, function("fn", 5, 2))
	const path = "/2015-03-31/functions/fn/invocations"
	for _, seed := range []struct {
		method, target, body, authz, typ string
		sign, oversize                   bool
	}{
		{"POST", path, `{"echo":{"a":1}}`, "", "", true, false},
		{"POST", path, `{"fail":"boom"}`, "", "RequestResponse", true, false},
		{"POST", path, ``, "", "DryRun", true, false},
		{"POST", path, `{}`, "", "Event", true, false},
		{"POST", path, `{"a":`, "", "", true, false},
		{"POST", path, `{}`, "", "", true, true},
		{"POST", path, `{}`, "", "", false, true},
		{"POST", path, `{}`, "", "", false, false},
		{"POST", path, `{}`, "Bearer k3y", "", false, false},
		{"POST", path, `[1,2]`, "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/lambda/aws4_request, SignedHeaders=host, Signature=00", "", false, false},
		{"POST", "/2015-03-31/functions/nope/invocations", `{}`, "", "", true, false},
		{"POST", "/2015-03-31/functions/f%6E/invocations?Qualifier=$LATEST", `"s"`, "", "", true, false},
		{"POST", "/2015-03-31/functions/f%6E/invocations?Qualifier=0", `0`, "", "", true, false},
		{"POST", "/2015-03-31/functions/arn%3Aaws%3Alambda%3Aeu-west-1%3A1%3Afunction%3Afn%3A%24LATEST/invocations", `{}`, "", "  a  b ", true, false},
		{"POST", "/2015-03-31/functions/fn/invocations?b=%zz&a=1+2&a=0&c", `{}`, "", "", true, false},
		{"GET", path, ``, "", "", true, false},
		{"POST", "/2015-03-31/functions/../../healthz", ``, "", "", false, false},
		{"GET", "/metrics", ``, "", "", false, false},
		{"GET", "/healthz", ``, "", "", false, false},
		{"PUT", "/2015-03-31/functions/fn/invocations/x", `{}`, "", "", true, false},
	} {
		f.Add(seed.method, seed.target, seed.body, seed.authz, seed.typ, seed.sign, seed.oversize)
	}
	f.Fuzz(func(t *testing.T, method, target, body, authz, typ string, signIt, oversize bool) {
		// Only what the function answers at once: no sleep, no exit (a
		// crash is answered, as a 200, but costs a cold start).
		var ask gwtest.Request
		if json.Unmarshal([]byte(body), &ask) == nil && (ask.SleepMS > 0 || ask.Exit) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, ok := httpfuzz.Request(ctx, method, target, body)
		if !ok || !httpfuzz.SetHeader(req, "Authorization", authz) || !httpfuzz.SetHeader(req, "X-Amz-Invocation-Type", typ) {
			return
		}
		if signIt {
			// Signed over the fuzzer's body: a padded one is refused for
			// its size before its signature is verified.
			sign(t, req, []byte(body), creds, time.Now())
			if req.ContentLength > 0 {
				// As net/http's server leaves a request that came with it.
				req.Header.Set("Content-Length", strconv.FormatInt(req.ContentLength, 10))
			}
		}
		if oversize {
			httpfuzz.Pad(req, body, gateway.MaxPayload+1)
		}
		before := e.invocations(t)
		rec := httptest.NewRecorder()
		e.handler.ServeHTTP(rec, req)
		code, exception := rec.Code, rec.Header().Get("X-Amzn-Errortype")
		if code < 200 || code >= 500 {
			t.Fatalf("%s %q (%.100q): %d %s", method, target, body, code, rec.Body)
		}
		if rec.Body.Len() > gateway.MaxPayload+1024 {
			t.Fatalf("%s %q: a %d-byte answer", method, target, rec.Body.Len())
		}
		if code >= 400 && exception != "" {
			var doc struct{ Message string }
			if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc.Message == "" {
				t.Fatalf("%s %q: a %d without the error shape: %s", method, target, code, rec.Body)
			}
		}
		open := (req.URL.Path == "/healthz" || req.URL.Path == "/metrics") && (method == "GET" || method == "HEAD")
		if !signIt && !open {
			if code != http.StatusForbidden {
				t.Fatalf("%s %q unsigned (Authorization %q): %d %s", method, target, authz, code, rec.Body)
			}
			if after := e.invocations(t); after != before {
				t.Fatalf("%s %q unsigned invoked the function", method, target)
			}
			return
		}
		if !signIt {
			return
		}
		switch exception {
		case sigv4.MissingAuthenticationToken, sigv4.IncompleteSignature, sigv4.UnrecognizedClient, sigv4.InvalidSignature:
			t.Fatalf("%s %q signed by the SDK refused: %s %s", method, target, exception, rec.Body)
		}
		if method != "POST" || req.URL.Path != path {
			return
		}
		want := http.StatusOK
		switch {
		case oversize:
			want = http.StatusRequestEntityTooLarge
		case !existing(req.URL.Query().Get("Qualifier")):
			want = http.StatusNotFound
		case typ != "" && typ != "RequestResponse" && typ != "DryRun" && typ != "Event":
			want = http.StatusBadRequest
		case typ == "DryRun":
			want = http.StatusNoContent
		case body != "" && !json.Valid([]byte(body)):
			want = http.StatusBadRequest
		case typ == "Event":
			want = http.StatusAccepted
		}
		if code != want {
			t.Fatalf("POST %q type %q oversize %v (%.100q): %d, want %d: %s", target, typ, oversize, body, code, want, rec.Body)
		}
	})
}
