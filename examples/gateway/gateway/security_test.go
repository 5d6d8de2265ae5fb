package gateway_test

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
