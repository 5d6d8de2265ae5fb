package runtimeapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttlkit/ttlkit/examples/gateway/runtimeapi"
	"github.com/ttlkit/ttlkit/internal/httpfuzz"
)

// poll is a runtime's invocation/next through h, by worker id with its
// secret; it returns the request id and payload it got.
func poll(h http.Handler, id, secret string) (string, string) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, runtimeRequest("GET", "/w/"+id+"/"+secret+"/2018-06-01/runtime/invocation/next", ""))
	return rec.Header().Get("Lambda-Runtime-Aws-Request-Id"), rec.Body.String()
}

type outcome struct {
	res runtimeapi.Result
	err error
}

// invokeAsync invokes worker id with payload until ctx ends.
func invokeAsync(ctx context.Context, s *runtimeapi.Server, id, payload string) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		res, err := s.Invoke(ctx, id, "arn:"+id, []byte(payload), time.Now().Add(time.Hour))
		ch <- outcome{res, err}
	}()
	return ch
}

// report is a runtime's report of request reqID's result through h.
func report(h http.Handler, id, secret, reqID, body string) {
	h.ServeHTTP(httptest.NewRecorder(), runtimeRequest("POST", "/w/"+id+"/"+secret+"/2018-06-01/runtime/invocation/"+reqID+"/response", body))
}

// FuzzRuntimeAPI sends arbitrary requests (method, path, body; oversize
// pads the body past 6 MB) to the Runtime API, where worker w holds an
// invocation (its runtime polled) and has one more waiting, and worker o
// holds one too. In the target, {id}, {secret} and {req} stand for w's
// id, secret and held invocation's request id, {other} and {other_req}
// for o's id and held invocation; o's secret is never given. Nothing
// panics or answers 5xx; a request without w's secret is refused (a 4xx,
// or the mux's redirect) and has no effect: w's held invocation gets no
// result from it and w is not ended; nothing reaches o; w's own report
// of its held invocation is accepted (202, or 413 past 6 MB) and is the
// invocation's result. A report the runtime (the harness) sends after the
// request shows which report came first.
func FuzzRuntimeAPI(f *testing.F) {
	s := runtimeapi.New()
	h := s.Handler()
	const base = "/w/{id}/{secret}/2018-06-01/runtime/"
	for _, seed := range []struct {
		method, target, body string
		oversize             bool
	}{
		{"POST", base + "invocation/{req}/response", `{"ok":true}`, false},
		{"POST", base + "invocation/{req}/error", `{"errorMessage":"x","errorType":"E"}`, false},
		{"POST", base + "invocation/{req}/response", `{}`, true},
		{"POST", base + "invocation/nope/response", `{}`, false},
		{"POST", base + "invocation/{other_req}/response", `{}`, false},
		{"GET", base + "invocation/next", ``, false},
		{"POST", base + "init/error", `{"errorMessage":"init"}`, false},
		{"POST", "/w/{id}/forged/2018-06-01/runtime/invocation/{req}/response", `{}`, false},
		{"POST", "/w/{other}/{secret}/2018-06-01/runtime/invocation/{other_req}/response", `{}`, false},
		{"POST", "/w/{other}/{secret}/2018-06-01/runtime/init/error", `{}`, false},
		{"GET", "/w/{other}/{secret}/2018-06-01/runtime/invocation/next", ``, false},
		{"GET", "/w/{id}/2018-06-01/runtime/invocation/next", ``, false},
		{"DELETE", base + "invocation/{req}/response", ``, false},
		{"POST", "/w/{id}/{secret}/../{secret}/2018-06-01/runtime/init/error", ``, false},
		{"GET", "/w/%7Bid%7D/x/2018-06-01/runtime/invocation/next?y=" + strings.Repeat("z", 200), ``, false},
	} {
		f.Add(seed.method, seed.target, seed.body, seed.oversize)
	}
	const marker = `{"from":"the harness"}`
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, method, target, body string, oversize bool) {
		i := strconv.FormatInt(n.Add(1), 10)
		id, oid := "w"+i, "o"+i
		secret, osecret := s.Add(id), s.Add(oid)
		defer s.Gone(id)
		defer s.Gone(oid)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done := map[string]<-chan outcome{}
		for _, p := range []string{`{"n":1}`, `{"n":2}`} {
			done[p] = invokeAsync(ctx, s, id, p)
		}
		oDone := invokeAsync(ctx, s, oid, `{}`)
		reqID, p := poll(h, id, secret)
		held := done[p]
		delete(done, p)
		oReq, _ := poll(h, oid, osecret)

		target = strings.NewReplacer("{id}", id, "{secret}", secret, "{req}", reqID, "{other}", oid, "{other_req}", oReq).Replace(target)
		req, ok := httpfuzz.Request(ctx, method, target, body)
		if !ok {
			return
		}
		if oversize {
			httpfuzz.Pad(req, body, runtimeapi.MaxResponse+1)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		code := rec.Code
		if code < 200 || code >= 500 {
			t.Fatalf("%s %q (%.100q): %d %s", method, target, body, code, rec.Body)
		}
		if rec.Body.Len() > 1<<10 {
			t.Fatalf("%s %q: a %d-byte answer", method, target, rec.Body.Len())
		}
		own := strings.HasPrefix(req.URL.Path, "/w/"+id+"/"+secret+"/")
		if !own && code < 300 {
			t.Fatalf("%s %q without w's secret: %d", method, target, code)
		}
		if !own && s.Ended(id) {
			t.Fatalf("%s %q without w's secret ended w", method, target)
		}
		if s.Ended(oid) {
			t.Fatalf("%s %q ended o", method, target)
		}

		report(h, id, secret, reqID, marker)
		report(h, oid, osecret, oReq, marker)
		if r := <-oDone; r.err != nil || string(r.res.Payload) != marker {
			t.Fatalf("%s %q reached o's invocation: %s %v", method, target, r.res.Payload, r.err)
		}
		r := <-held
		if !own && (r.err != nil || string(r.res.Payload) != marker) {
			t.Fatalf("%s %q without w's secret reached w's invocation: %s %v", method, target, r.res.Payload, r.err)
		}
		if method == "POST" && req.URL.EscapedPath() == "/w/"+id+"/"+secret+"/2018-06-01/runtime/invocation/"+reqID+"/response" {
			switch {
			case oversize && (code != http.StatusRequestEntityTooLarge || !r.res.FunctionError || !strings.Contains(string(r.res.Payload), "ResponseSizeTooLarge")):
				t.Fatalf("w's own oversized report: %d, result %s", code, r.res.Payload)
			case !oversize && (code != http.StatusAccepted || r.err != nil || string(r.res.Payload) != body):
				t.Fatalf("w's own report %.100q: %d, result %s %v", body, code, r.res.Payload, r.err)
			}
		}
		cancel()
		for _, d := range done {
			<-d
		}
	})
}
