package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ttlkit/ttlkit/examples/gateway/agent"
)

// sdkWithKey is the AWS SDK's Lambda client sending key in X-Api-Key, as
// README shows: a middleware added through APIOptions.
func sdkWithKey(addr, key string) *lambda.Client {
	return lambda.New(lambda.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String("http://" + addr),
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		RetryMaxAttempts: 1,
		APIOptions:       []func(*middleware.Stack) error{smithyhttp.AddHeaderValue("X-Api-Key", key)},
	})
}

// refusedBy asserts that err is the API's answer code with HTTP status.
func refusedBy(t *testing.T, err error, status int, code string) {
	t.Helper()
	var api smithy.APIError
	require.ErrorAs(t, err, &api)
	assert.Equal(t, code, api.ErrorCode())
	var resp *awshttp.ResponseError
	require.ErrorAs(t, err, &resp)
	assert.Equal(t, status, resp.HTTPStatusCode())
}

// With GATEWAY_API_KEY, the AWS SDK's client is refused without the key
// (401) and with another (403), starting no worker, and served with it.
func TestAPIKeyThroughSDK(t *testing.T) {
	const key = "e2e-api-k3y"
	lbl := label(t)
	g := startGateway(t, lbl, map[string]string{envAPIKey: key})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := &lambda.InvokeInput{FunctionName: aws.String("echo"), Payload: []byte(`{"k":1}`)}

	_, err := sdk(g.addr).Invoke(ctx, in)
	refusedBy(t, err, http.StatusUnauthorized, "MissingAuthenticationTokenException")
	_, err = sdkWithKey(g.addr, "wrong").Invoke(ctx, in)
	refusedBy(t, err, http.StatusForbidden, "UnrecognizedClientException")
	assert.Empty(t, listed(t, localAgent(t, lbl), "echo"), "a refused call starts no worker")

	out := invoke(t, sdkWithKey(g.addr, key), "echo", `{"k":1}`)
	assert.Nil(t, out.FunctionError)
	assert.JSONEq(t, `{"k":1}`, string(out.Payload))
	resp, err := http.Get("http://" + g.addr + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "/metrics wants the key too")
}

// A gateway that listens beyond loopback without a key says so; with a
// key, or on loopback, it does not.
func TestOpenAddressWarning(t *testing.T) {
	const warning = "listens beyond loopback without an API key"
	open := startGateway(t, label(t)+"open", nil, "-addr", "0.0.0.0:0")
	assert.Contains(t, open.logs.String(), warning)
	keyed := startGateway(t, label(t)+"keyed", map[string]string{envAPIKey: "k"}, "-addr", "0.0.0.0:0")
	assert.NotContains(t, keyed.logs.String(), warning)
	local := startGateway(t, label(t)+"local", nil)
	assert.NotContains(t, local.logs.String(), warning)
}

// The gateway's secrets, given in its environment, do not reach the
// functions: worker processes inherit the rest of its environment, not
// GATEWAY_API_KEY or GATEWAY_AGENT_TOKEN. A worker's endpoint carries its
// secret.
func TestSecretsNotInherited(t *testing.T) {
	const key = "inherited-k3y"
	cmd, addr := startBinaryEnv(t, []string{envAPIKey + "=" + key, envAgentToken + "=agent-t0ken"}, "-label", label(t))
	out := invoke(t, sdkWithKey(addr, key), "hello", `{"name":"env"}`)
	var hello struct{ PID int }
	require.NoError(t, json.Unmarshal(out.Payload, &hello), "%s", out.Payload)
	require.NotZero(t, hello.PID)
	env, err := os.ReadFile("/proc/" + strconv.Itoa(hello.PID) + "/environ")
	require.NoError(t, err)
	vars := map[string]string{}
	for _, kv := range strings.Split(string(env), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	assert.NotContains(t, vars, envAPIKey)
	assert.NotContains(t, vars, envAgentToken)
	assert.False(t, strings.Contains(string(env), key), "the key is in the worker's environment")
	assert.Regexp(t, `^127\.0\.0\.1:[0-9]+/w/[0-9a-f]+/[0-9a-f]{64}$`, vars["AWS_LAMBDA_RUNTIME_API"])
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())
}

// The agent refuses to listen beyond loopback without a token, and on TCP
// with a Docker engine (containers share the host's network); a token
// makes it serve only the calls that carry it, and a gateway with another
// token does not start.
func TestAgentToken(t *testing.T) {
	noEnv := func(string) string { return "" }
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Refused at once; a build without the rule serves until refused ends.
	refused, stop := context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	err := run(refused, []string{"agent", "-listen", "0.0.0.0:0", "-label", label(t)}, noEnv, nil, io.Discard, io.Discard)
	assert.ErrorContains(t, err, "set a token")
	err = run(refused, []string{"agent", "-listen", "127.0.0.1:0", "-label", label(t), "-docker", "unix:///nonexistent.sock"}, noEnv, nil, io.Discard, io.Discard)
	assert.ErrorContains(t, err, "with -docker")

	lbl := label(t)
	env := map[string]string{envAgentToken: "agent-t0ken-" + lbl}
	addr, cl := startAgent(t, lbl, env, "-listen", "0.0.0.0:0")
	_, err = cl.List(ctx, agent.ListRequest{Function: "echo"})
	require.NoError(t, err)
	for _, token := range []string{"", "wrong"} {
		other, err := agent.Dial(addr, token)
		require.NoError(t, err)
		_, err = other.List(ctx, agent.ListRequest{Function: "echo"})
		assert.Equal(t, codes.Unauthenticated, status.Code(err), "token %q: %v", token, err)
		_ = other.Close()
	}
	err = run(ctx, []string{"-addr", "127.0.0.1:0", "-label", lbl, "-build-dir", buildDir, "-agent", addr, "-agent-token", "wrong"},
		noEnv, nil, io.Discard, io.Discard)
	assert.ErrorContains(t, err, "Unauthenticated", "a gateway with another token")
	g := startGateway(t, lbl, env, "-agent", addr)
	out := invoke(t, sdk(g.addr), "echo", `{"via":"token"}`)
	assert.JSONEq(t, `{"via":"token"}`, string(out.Payload))
}

// An agent on a unix socket needs no token: the socket is its user's only
// (0600), and the gateway reaches it at unix:/path.
func TestAgentUnixSocket(t *testing.T) {
	lbl := label(t)
	sock := filepath.Join(t.TempDir(), "agent.sock")
	addr, cl := startAgent(t, lbl, nil, "-listen", "unix:"+sock)
	assert.Equal(t, "unix:"+sock, addr)
	st, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	g := startGateway(t, lbl, nil, "-agent", addr)
	out := invoke(t, sdk(g.addr), "echo", `{"via":"socket"}`)
	assert.JSONEq(t, `{"via":"socket"}`, string(out.Payload))
	assert.Len(t, listed(t, cl, "echo"), 1)
	require.NoError(t, g.stop())
	assert.Empty(t, listed(t, cl, "echo"), "the gateway's drain deleted its worker through the socket")
}
