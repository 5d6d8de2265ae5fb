package gateway_test

import (
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/gateway/gateway"
)

const apiKey = "k3y-0f-the-tests"

// With an API key, every request but /healthz must carry it, in X-Api-Key
// or as a bearer token: one without gets 401, one with another key (a
// prefix of it included) 403, in the Lambda API's error shape, and no
// worker is started for either; not even whether a function exists is
// told.
func TestAPIKey(t *testing.T) {
	e := startWith(t, func(c *gateway.Config) { c.APIKey = apiKey }, function("fn", 10, 1))

	r := e.post(t, "fn", []byte(`{}`))
	lambdaError(t, r, http.StatusUnauthorized, "MissingAuthenticationTokenException", "X-Api-Key")
	assert.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
	lambdaError(t, e.post(t, "nope", []byte(`{}`)), http.StatusUnauthorized, "MissingAuthenticationTokenException", "API key")
	lambdaError(t, e.post(t, "fn", []byte(`{}`), "Authorization", "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/lambda/aws4_request"),
		http.StatusUnauthorized, "MissingAuthenticationTokenException", "API key")
	for _, h := range [][]string{
		{"X-Api-Key", "wrong"},
		{"X-Api-Key", apiKey[:len(apiKey)-1]},
		{"X-Api-Key", apiKey + "x"},
		{"Authorization", "Bearer wrong"},
		{"X-Api-Key", "wrong", "Authorization", "Bearer " + apiKey}, // X-Api-Key is the one looked at
	} {
		lambdaError(t, e.post(t, "fn", []byte(`{}`), h...), http.StatusForbidden, "UnrecognizedClientException", "not valid")
	}
	assert.Zero(t, e.gw.Stats()["fn"].Creates, "a refused call starts no worker")
	assert.Equal(t, http.StatusUnauthorized, get(t, e.url+"/metrics").StatusCode)
	assert.Equal(t, http.StatusForbidden, get(t, e.url+"/metrics", "Authorization", "Bearer wrong").StatusCode)

	r = e.post(t, "fn", []byte(`{"echo":1}`), "X-Api-Key", apiKey)
	assert.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), `"echo":1`)
	r = e.post(t, "fn", []byte(`{"echo":2}`), "Authorization", "bearer "+apiKey)
	assert.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), `"echo":2`)
	lambdaError(t, e.post(t, "nope", []byte(`{}`), "X-Api-Key", apiKey), http.StatusNotFound, "ResourceNotFoundException", "function:nope")
	assert.Equal(t, http.StatusOK, get(t, e.url+"/metrics", "X-Api-Key", apiKey).StatusCode)
	assert.Equal(t, http.StatusOK, get(t, e.url+"/healthz").StatusCode, "health is open")
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
