package gateway_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/gateway/gateway"
	"github.com/ttlkit/ttlkit/examples/gateway/internal/gwtest"
	"github.com/ttlkit/ttlkit/examples/gateway/sigv4"
)

// refused returns how many requests the gateway refused for reason.
func (e *env) refused(t *testing.T, reason string) float64 {
	t.Helper()
	return gwtest.Metric(t, e.metrics(), `gateway_requests_refused_total{reason="`+reason+`"}`)
}

// Every request but /healthz and /metrics must be signed with the
// gateway's key pair: without a signature, with an old API key, with
// another secret, with an access key id the gateway does not hold, signed
// 16 minutes ago or ahead, or with a body changed since, it is refused with
// AWS's exception, before anything else: not even whether the function
// exists is told, and no worker is started.
func TestSignature(t *testing.T) {
	e := start(t, function("fn", 10, 1))
	payload := []byte(`{"echo":1}`)
	unsigned := func(fn string, header ...string) *http.Request {
		req, err := http.NewRequest("POST", e.url+"/2015-03-31/functions/"+fn+"/invocations", bytes.NewReader(payload))
		require.NoError(t, err)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		return req
	}
	signedWith := func(c sigv4.Credentials, at time.Time) *http.Request {
		req := unsigned("fn")
		sign(t, req, payload, c, at)
		return req
	}
	const mismatch = "The request signature we calculated does not match the signature you provided. " +
		"Check your AWS Secret Access Key and signing method. Consult the service documentation for details."

	lambdaError(t, do(t, unsigned("fn")), http.StatusForbidden, sigv4.MissingAuthenticationToken, "Missing Authentication Token")
	lambdaError(t, do(t, unsigned("nope")), http.StatusForbidden, sigv4.MissingAuthenticationToken, "Missing Authentication Token")
	lambdaError(t, do(t, unsigned("fn", "X-Api-Key", "k3y")), http.StatusForbidden, sigv4.MissingAuthenticationToken, "Missing Authentication Token")
	lambdaError(t, do(t, unsigned("fn", "Authorization", "Bearer k3y")), http.StatusForbidden, sigv4.IncompleteSignature, "requires 'Credential' parameter")
	lambdaError(t, do(t, signedWith(sigv4.Credentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: "another"}, time.Now())),
		http.StatusForbidden, sigv4.InvalidSignature, mismatch)
	lambdaError(t, do(t, signedWith(sigv4.Credentials{AccessKeyID: "AKIDOTHER", SecretAccessKey: creds.SecretAccessKey}, time.Now())),
		http.StatusForbidden, sigv4.UnrecognizedClient, "The security token included in the request is invalid.")
	lambdaError(t, do(t, signedWith(creds, time.Now().Add(-16*time.Minute))), http.StatusForbidden, sigv4.InvalidSignature, "Signature expired: ")
	lambdaError(t, do(t, signedWith(creds, time.Now().Add(16*time.Minute))), http.StatusForbidden, sigv4.InvalidSignature, "Signature not yet current: ")
	changed := signedWith(creds, time.Now())
	changed.Body = io.NopCloser(strings.NewReader(`{"echo":2}`))
	lambdaError(t, do(t, changed), http.StatusForbidden, sigv4.InvalidSignature, mismatch)
	nope := unsigned("nope")
	sign(t, nope, payload, creds, time.Now().Add(-16*time.Minute))
	lambdaError(t, do(t, nope), http.StatusForbidden, sigv4.InvalidSignature, "Signature expired: ")

	// An unsigned request's body is not even read.
	body := &countingReader{r: io.MultiReader(strings.NewReader(`{"a":"`), strings.NewReader(strings.Repeat("x", gateway.MaxPayload)))}
	req := httptest.NewRequest("POST", "/2015-03-31/functions/fn/invocations", body)
	req.Host = "127.0.0.1"
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusForbidden, rec.Code)
	assert.Zero(t, body.n, "bytes read of an unsigned request's body")

	assert.Zero(t, e.gw.Stats()["fn"].Creates, "a refused call starts no worker")
	assert.Equal(t, 4.0, e.refused(t, gateway.RefusedUnsigned))
	assert.Equal(t, 1.0, e.refused(t, gateway.RefusedUnknownKey))
	assert.Equal(t, 6.0, e.refused(t, gateway.RefusedSignature))

	r := do(t, signedWith(creds, time.Now()))
	assert.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), `"echo":1`)
	r = do(t, signedWith(creds, time.Now().Add(-14*time.Minute)))
	assert.Equal(t, http.StatusOK, r.status, "14 minutes is within the window: %s", r.body)
	lambdaError(t, e.post(t, "nope", payload), http.StatusNotFound, "ResourceNotFoundException", "function:nope")
	assert.Equal(t, http.StatusOK, get(t, e.url+"/metrics").StatusCode, "metrics are open")
	assert.Equal(t, http.StatusOK, get(t, e.url+"/healthz").StatusCode, "health is open")
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// A request for a Host the gateway does not answer to is refused with 403
// AccessDeniedException, though signed for that Host, and so is one a
// browser marks as sent by another site, though signed: no worker starts.
// A name the gateway is configured with is answered.
func TestHostAndCrossSite(t *testing.T) {
	e := start(t, function("fn", 10, 1))
	port := e.url[strings.LastIndex(e.url, ":"):]
	forHost := func(host string, header ...string) *http.Request {
		req, err := http.NewRequest("POST", e.url+"/2015-03-31/functions/fn/invocations", strings.NewReader(`{"echo":1}`))
		require.NoError(t, err)
		req.Host = host
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		sign(t, req, []byte(`{"echo":1}`), creds, time.Now())
		return req
	}
	for _, host := range []string{"evil.example" + port, "evil.example", "localhost.evil.example" + port} {
		lambdaError(t, do(t, forHost(host)), http.StatusForbidden, "AccessDeniedException", "does not answer to that host name")
	}
	for _, h := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site", "Origin", "http://127.0.0.1:1"},
		{"Origin", "http://evil.example"},
		{"Origin", "null"},
	} {
		lambdaError(t, do(t, forHost("127.0.0.1"+port, h...)), http.StatusForbidden, "AccessDeniedException", "from other sites")
	}
	assert.Zero(t, e.gw.Stats()["fn"].Creates, "a refused call starts no worker")
	assert.Equal(t, 3.0, e.refused(t, gateway.RefusedHost))
	assert.Equal(t, 4.0, e.refused(t, gateway.RefusedCrossSite))
	resp := get(t, e.url+"/metrics", "Sec-Fetch-Site", "cross-site")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "not even metrics for another site")

	for _, host := range []string{"localhost" + port, "127.0.0.1" + port} {
		r := do(t, forHost(host, "Sec-Fetch-Site", "same-origin"))
		assert.Equal(t, http.StatusOK, r.status, "%s: %s", host, r.body)
	}

	named := startWith(t, func(c *gateway.Config) { c.Hosts = []string{"evil.example"} }, function("fn", 10, 1))
	port = named.url[strings.LastIndex(named.url, ":"):]
	req, err := http.NewRequest("POST", named.url+"/2015-03-31/functions/fn/invocations", strings.NewReader(`{"echo":1}`))
	require.NoError(t, err)
	req.Host = "evil.example" + port
	sign(t, req, []byte(`{"echo":1}`), creds, time.Now())
	r := do(t, req)
	assert.Equal(t, http.StatusOK, r.status, "a configured name: %s", r.body)
}

func get(t *testing.T, url string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// runtimeEndpoint returns the AWS_LAMBDA_RUNTIME_API of process pid, as
// the gateway gave it: host:port, the worker's id and its secret.
func runtimeEndpoint(t *testing.T, pid int) (hostPort, id, secret string) {
	t.Helper()
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	require.NoError(t, err)
	for _, kv := range strings.Split(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, "AWS_LAMBDA_RUNTIME_API="); ok {
			parts := strings.Split(v, "/")
			require.Len(t, parts, 4, v)
			require.Equal(t, "w", parts[1], v)
			return parts[0], parts[2], parts[3]
		}
	}
	t.Fatalf("worker %d has no AWS_LAMBDA_RUNTIME_API", pid)
	return "", "", ""
}

// One function's worker, knowing its own endpoint and another's id (which
// is no secret), can neither take the other's invocations nor end it: the
// other's endpoint wants the other's secret.
func TestRuntimeAPIIsolation(t *testing.T) {
	e := start(t, function("a", 10, 1), function("b", 10, 1))
	pa, pb := pid(t, e.post(t, "a", []byte(`{}`))), pid(t, e.post(t, "b", []byte(`{}`)))
	host, _, secretA := runtimeEndpoint(t, pa)
	_, idB, secretB := runtimeEndpoint(t, pb)
	require.Len(t, secretB, 64)
	assert.NotEqual(t, secretA, secretB)

	c := &http.Client{Timeout: 3 * time.Second} // a poll let through would wait for b's next invocation
	for _, ep := range []string{host + "/w/" + idB + "/" + secretA, host + "/w/" + idB + "/" + strings.Repeat("0", 64), host + "/w/" + idB} {
		base := "http://" + ep + "/2018-06-01/runtime/"
		resp, err := c.Get(base + "invocation/next")
		require.NoError(t, err, "a poll through %s", ep)
		resp.Body.Close()
		assert.Contains(t, []int{http.StatusForbidden, http.StatusNotFound}, resp.StatusCode, ep)
		resp, err = c.Post(base+"init/error", "application/json", strings.NewReader(`{"errorMessage":"forged"}`))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Contains(t, []int{http.StatusForbidden, http.StatusNotFound}, resp.StatusCode, ep)
	}
	r := e.post(t, "b", []byte(`{"echo":"still b"}`))
	assert.Equal(t, http.StatusOK, r.status)
	assert.Contains(t, string(r.body), `"echo":"still b"`)
	assert.Equal(t, pb, pid(t, r), "b's worker still serves: it was neither robbed nor ended")
}
