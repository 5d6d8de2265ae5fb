package runtimeapi_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/gateway/runtimeapi"
	"github.com/ttlkit/ttlkit/internal/testenv/browsertest"
)

// forge returns secret with its last character changed: as long, and
// right but for one character.
func forge(secret string) string {
	last := byte('0')
	if secret[len(secret)-1] == '0' {
		last = '1'
	}
	return secret[:len(secret)-1] + string(last)
}

// do sends a request over the network with a client that gives up after a
// few seconds (a poll let through would wait for an invocation) and
// returns its status.
func do(t *testing.T, method, url, body string) int {
	t.Helper()
	c := &http.Client{Timeout: 3 * time.Second}
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err, "%s %s", method, url)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// A worker's endpoints answer only requests that carry its secret: with
// another worker's secret, a forged one (one character off) or none, a
// request can neither take the worker's invocations, nor report its
// results or errors, nor end it, and a worker cannot report the result of
// another's invocation through its own endpoint.
func TestWorkerIsolation(t *testing.T) {
	s := runtimeapi.New()
	addr := listen(t, s)
	secretA, secretB := s.Add("a"), s.Add("b")
	require.Len(t, secretB, 64, "256 bits, hex")
	assert.NotEqual(t, secretA, secretB)
	assert.Equal(t, secretB, s.Add("b"), "adding twice keeps the secret")
	own := func(id, secret string) string {
		return "http://" + runtimeapi.Endpoint(addr, id, secret) + "/2018-06-01/runtime/"
	}
	a, b := own("a", secretA), own("b", secretB)
	attacks := map[string]string{ // how b's endpoint is reached without b's secret
		"a's secret":  own("b", secretA),
		"forged":      own("b", forge(secretB)),
		"no secret":   "http://" + addr + "/w/b/2018-06-01/runtime/",
		"id as token": own("b", "b"),
	}
	refused := func(code int) bool { return code == http.StatusForbidden || code == http.StatusNotFound }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Polling: refused at once, and b is not made ready by it.
	for name, ep := range attacks {
		code := do(t, "GET", ep+"invocation/next", "")
		assert.True(t, refused(code), "%s: next answered %d", name, code)
	}
	wctx, wcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	assert.ErrorIs(t, s.WaitReady(wctx, "b"), context.DeadlineExceeded, "b is not ready: its runtime never polled")
	wcancel()

	// b's runtime polls and gets an invocation; nobody else reports its
	// result or its error, not even a through its own, valid endpoint.
	reqID, done := invokeB(ctx, t, s, b)
	for name, ep := range attacks {
		for _, kind := range []string{"response", "error"} {
			code := do(t, "POST", ep+"invocation/"+reqID+"/"+kind, `{"forged":true}`)
			assert.True(t, refused(code), "%s: %s answered %d", name, kind, code)
		}
	}
	assert.Equal(t, http.StatusBadRequest, do(t, "POST", a+"invocation/"+reqID+"/response", `{"forged":true}`),
		"a's own endpoint does not know b's invocation")
	select {
	case r := <-done:
		t.Fatalf("b's invocation ended with another's report: %+v %v", r.res, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	require.Equal(t, http.StatusAccepted, do(t, "POST", b+"invocation/"+reqID+"/response", `{"from":"b"}`))
	r := <-done
	require.NoError(t, r.err)
	assert.Equal(t, `{"from":"b"}`, string(r.res.Payload), "b's own result, not a forged one")

	// Nobody else ends b with an init error: it serves the next invocation.
	for name, ep := range attacks {
		code := do(t, "POST", ep+"init/error", `{"errorMessage":"forged"}`)
		assert.True(t, refused(code), "%s: init/error answered %d", name, code)
	}
	reqID, done = invokeB(ctx, t, s, b)
	require.Equal(t, http.StatusAccepted, do(t, "POST", b+"invocation/"+reqID+"/response", `{"again":true}`))
	r = <-done
	require.NoError(t, r.err, "b is still alive")
	assert.Equal(t, `{"again":true}`, string(r.res.Payload))
	s.Gone("b")
	s.Gone("a")
}

type result struct {
	res runtimeapi.Result
	err error
}

// invokeB invokes worker b, polls its endpoint as its runtime would (over
// the network) and returns the invocation's request id and the channel of
// its result.
func invokeB(ctx context.Context, t *testing.T, s *runtimeapi.Server, endpoint string) (string, <-chan result) {
	t.Helper()
	done := make(chan result, 1)
	go func() {
		res, err := s.Invoke(ctx, "b", "arn:b", []byte(`{"for":"b"}`), time.Now().Add(time.Minute))
		done <- result{res, err}
	}()
	resp, err := http.Get(endpoint + "invocation/next")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, `{"for":"b"}`, string(body))
	id := resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
	require.NotEmpty(t, id)
	return id, done
}

// poller is a runtime's poll of worker id's endpoint at addr, sent with
// host and header (pairs of name and value); it gives up after a few
// seconds, as a poll let through would wait for an invocation.
func poller(t *testing.T, addr, id, secret, host string, header ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+runtimeapi.Endpoint(addr, id, secret)+"/2018-06-01/runtime/invocation/next", nil)
	require.NoError(t, err)
	req.Host = host
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

// A request for a Host the Runtime API does not answer to (a DNS
// rebinding page's), or one a browser marks as sent by another site, is
// refused, though it carries the worker's secret: it takes no invocation
// and ends no worker. A name the server is configured with is answered.
func TestHostAndCrossSite(t *testing.T) {
	s := runtimeapi.New()
	addr := listen(t, s)
	secret := s.Add("w")
	_, port, _ := strings.Cut(addr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pending := invokeAsync(ctx, s, "w", `{"for":"w"}`)

	for _, c := range []struct {
		host   string
		header []string
	}{
		{"evil.example:" + port, nil},
		{"evil.example", nil},
		{addr, []string{"Sec-Fetch-Site", "cross-site"}},
		{addr, []string{"Sec-Fetch-Site", "same-site"}},
		{addr, []string{"Origin", "http://evil.example"}},
	} {
		code, h, body := poller(t, addr, "w", secret, c.host, c.header...)
		assert.Equal(t, http.StatusForbidden, code, "%s %v", c.host, c.header)
		assert.Equal(t, "application/json", h.Get("Content-Type"))
		assert.Contains(t, body, `"errorType":"AccessDeniedException"`)
		req, err := http.NewRequest("POST", "http://"+runtimeapi.Endpoint(addr, "w", secret)+"/2018-06-01/runtime/init/error", strings.NewReader(`{"errorMessage":"forged"}`))
		require.NoError(t, err)
		req.Host = c.host
		for i := 0; i+1 < len(c.header); i += 2 {
			req.Header.Set(c.header[i], c.header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	}
	assert.False(t, s.Ended("w"), "no refused request ended the worker")
	code, h, body := poller(t, addr, "w", secret, addr)
	require.Equal(t, http.StatusOK, code, "the worker's own poll gets its invocation, which no refused poll took")
	assert.Equal(t, `{"for":"w"}`, body)
	require.Equal(t, http.StatusAccepted, do(t, "POST", "http://"+runtimeapi.Endpoint(addr, "w", secret)+"/2018-06-01/runtime/invocation/"+h.Get("Lambda-Runtime-Aws-Request-Id")+"/response", `{}`))
	require.NoError(t, (<-pending).err)
	s.Gone("w")

	named := runtimeapi.New()
	named.Hosts = []string{"evil.example"}
	addr = listen(t, named)
	_, port, _ = strings.Cut(addr, ":")
	secret = named.Add("w")
	pending = invokeAsync(ctx, named, "w", `{"for":"w"}`)
	code, _, body = poller(t, addr, "w", secret, "evil.example:"+port)
	assert.Equal(t, http.StatusOK, code, "a configured name")
	assert.Equal(t, `{"for":"w"}`, body)
	named.Gone("w")
	<-pending
}

// TestBrowser has a real browser, on a page of another site that knows a
// worker's endpoint, secret included, send every request a page can send
// without a preflight to the worker's invocation/next (an image's GET
// among them) and init/error: the worker's pending invocation is not
// taken, and the worker is not ended.
func TestBrowser(t *testing.T) {
	ctx := browsertest.New(t)
	s := runtimeapi.New()
	addr := listen(t, s)
	secret := s.Add("w")
	ictx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pending := invokeAsync(ictx, s, "w", `{"for":"w"}`)
	base := "http://" + runtimeapi.Endpoint(addr, "w", secret) + "/2018-06-01/runtime/"
	browsertest.Attack(t, ctx, append(browsertest.CrossSiteKinds(base+"invocation/next", `{"a":"b"}`),
		browsertest.CrossSiteKinds(base+"init/error", `{"errorMessage":"from a page"}`)...)...)

	assert.False(t, s.Ended("w"), "a page ended the worker")
	code, h, body := poller(t, addr, "w", secret, addr)
	require.Equal(t, http.StatusOK, code, "a page took the worker's pending invocation")
	assert.Equal(t, `{"for":"w"}`, body)
	require.Equal(t, http.StatusAccepted, do(t, "POST", base+"invocation/"+h.Get("Lambda-Runtime-Aws-Request-Id")+"/response", `{"ok":1}`))
	r := <-pending
	require.NoError(t, r.err)
	assert.Equal(t, `{"ok":1}`, string(r.res.Payload))
	s.Gone("w")
}
