package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ttlkit/ttlkit/examples/gateway/agent"
	"github.com/ttlkit/ttlkit/examples/gateway/internal/gwtest"
	"github.com/ttlkit/ttlkit/examples/gateway/sigv4"
	"github.com/ttlkit/ttlkit/internal/testenv/browsertest"
)

// refusedBy asserts that err is the API's answer code with HTTP status, as
// the AWS SDK reports it.
func refusedBy(t *testing.T, err error, status int, code string) {
	t.Helper()
	var api smithy.APIError
	require.ErrorAs(t, err, &api)
	assert.Equal(t, code, api.ErrorCode())
	var resp *awshttp.ResponseError
	require.ErrorAs(t, err, &resp)
	assert.Equal(t, status, resp.HTTPStatusCode())
}

// signedAt is the AWS SDK's signer signing at a fixed time: what a client
// sends when it replays a request signed then, or signs with a clock that
// far off.
type signedAt time.Time

func (s signedAt) SignHTTP(ctx context.Context, c aws.Credentials, r *http.Request, payloadHash, service, region string, _ time.Time, opts ...func(*v4.SignerOptions)) error {
	return v4.NewSigner().SignHTTP(ctx, c, r, payloadHash, service, region, time.Time(s), opts...)
}

// The AWS SDK's client works with the gateway's key pair, by a function's
// name or its ARN; it is refused, with the exception AWS answers, without
// a signature, with another secret, with an access key id the gateway
// does not hold, and with a request signed 16 minutes ago (a replay) or
// ahead; a refused call starts no worker.
func TestSigV4ThroughSDK(t *testing.T) {
	lbl := label(t)
	g := startGateway(t, lbl, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := &lambda.InvokeInput{FunctionName: aws.String("echo"), Payload: []byte(`{"k":1}`)}

	_, err := sdkWith(g.addr, testCreds, func(o *lambda.Options) { o.Credentials = aws.AnonymousCredentials{} }).Invoke(ctx, in)
	refusedBy(t, err, http.StatusForbidden, "MissingAuthenticationTokenException")
	_, err = sdkWith(g.addr, sigv4.Credentials{AccessKeyID: testCreds.AccessKeyID, SecretAccessKey: "wrong"}).Invoke(ctx, in)
	refusedBy(t, err, http.StatusForbidden, "InvalidSignatureException")
	_, err = sdkWith(g.addr, sigv4.Credentials{AccessKeyID: "AKIDUNKNOWN", SecretAccessKey: testCreds.SecretAccessKey}).Invoke(ctx, in)
	refusedBy(t, err, http.StatusForbidden, "UnrecognizedClientException")
	for _, skew := range []time.Duration{-16 * time.Minute, 16 * time.Minute} {
		_, err = sdkWith(g.addr, testCreds, func(o *lambda.Options) { o.HTTPSignerV4 = signedAt(time.Now().Add(skew)) }).Invoke(ctx, in)
		refusedBy(t, err, http.StatusForbidden, "InvalidSignatureException")
		var api smithy.APIError
		require.ErrorAs(t, err, &api)
		assert.Regexp(t, `^Signature (expired: \d{8}T\d{6}Z is now earlier than|not yet current: \d{8}T\d{6}Z is still later than) \d{8}T\d{6}Z \(\d{8}T\d{6}Z [-+] 15 min\.\)$`, api.ErrorMessage())
	}
	assert.Empty(t, listed(t, localAgent(t, lbl), "echo"), "a refused call starts no worker")
	assert.Zero(t, gwtest.Metric(t, g.metrics(t), `gateway_pool_created_total{function="echo"}`))

	out := invoke(t, sdk(g.addr), "echo", `{"k":1}`)
	assert.Nil(t, out.FunctionError)
	assert.JSONEq(t, `{"k":1}`, string(out.Payload))
	for _, name := range []string{
		"arn:aws:lambda:us-east-1:000000000000:function:echo",
		"arn:aws:lambda:eu-west-3:123456789012:function:echo:$LATEST",
		"123456789012:function:echo",
		"echo:$LATEST",
	} {
		out = invoke(t, sdk(g.addr), name, `{"by":"arn"}`)
		assert.JSONEq(t, `{"by":"arn"}`, string(out.Payload), name)
	}
	out = invoke(t, sdkWith(g.addr, testCreds, func(o *lambda.Options) { o.HTTPSignerV4 = signedAt(time.Now().Add(-14 * time.Minute)) }), "echo", `{}`)
	assert.Nil(t, out.FunctionError, "14 minutes off is within the window")
	_, err = sdk(g.addr).Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("echo"), Qualifier: aws.String("1")})
	refusedBy(t, err, http.StatusNotFound, "ResourceNotFoundException")
}

// foreignHostClient is the AWS SDK's client of the gateway at addr, as
// reached through a name that resolves to it (a DNS rebinding name): it
// signs for, and sends, Host name:port.
func foreignHostClient(t *testing.T, addr, name string) *lambda.Client {
	t.Helper()
	_, port, _ := net.SplitHostPort(addr)
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return sdkWith(name+":"+port, testCreds, func(o *lambda.Options) { o.HTTPClient = &http.Client{Transport: tr} })
}

// runtimeEndpoint returns the AWS_LAMBDA_RUNTIME_API of worker process
// pid: host:port/w/<id>/<secret>.
func runtimeEndpoint(t *testing.T, pid int) string {
	t.Helper()
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	require.NoError(t, err)
	for _, kv := range strings.Split(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, "AWS_LAMBDA_RUNTIME_API="); ok {
			return v
		}
	}
	t.Fatalf("worker %d has no AWS_LAMBDA_RUNTIME_API", pid)
	return ""
}

// helloWorker invokes hello and returns its worker's pid.
func helloWorker(t *testing.T, addr string) int {
	t.Helper()
	var hello struct{ PID int }
	out := invoke(t, sdk(addr), "hello", `{"name":"pid"}`)
	require.NoError(t, json.Unmarshal(out.Payload, &hello), "%s", out.Payload)
	require.NotZero(t, hello.PID)
	return hello.PID
}

// A request whose Host is a name the gateway is not configured with (a DNS
// rebinding page's) is refused, by the Invoke API though it is correctly
// signed for that Host, and by the Runtime API though it carries the
// worker's secret; with the name in GATEWAY_ALLOWED_HOSTS, both answer it.
func TestForeignHost(t *testing.T) {
	for _, allowed := range []bool{false, true} {
		t.Run(map[bool]string{false: "refused", true: "allowed"}[allowed], func(t *testing.T) {
			lbl := label(t)
			var env map[string]string
			if allowed {
				env = map[string]string{envAllowedHosts: "rebind.example"}
			}
			g := startGateway(t, lbl, env)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, err := foreignHostClient(t, g.addr, "rebind.example").Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("echo"), Payload: []byte(`{"via":"name"}`)})
			if allowed {
				require.NoError(t, err)
				assert.JSONEq(t, `{"via":"name"}`, string(out.Payload))
			} else {
				refusedBy(t, err, http.StatusForbidden, "AccessDeniedException")
				assert.Empty(t, listed(t, localAgent(t, lbl), "echo"), "a refused call starts no worker")
				assert.Equal(t, 1.0, gwtest.Metric(t, g.metrics(t), `gateway_requests_refused_total{reason="host"}`))
			}

			// A report for a request id the worker never got: harmless when
			// answered (400), and refused before that for a foreign Host.
			endpoint := runtimeEndpoint(t, helloWorker(t, g.addr))
			hostPort, _, _ := strings.Cut(endpoint, "/")
			_, port, _ := net.SplitHostPort(hostPort)
			req, err := http.NewRequest("POST", "http://"+endpoint+"/2018-06-01/runtime/invocation/00000000-0000-0000-0000-000000000000/response", strings.NewReader(`{}`))
			require.NoError(t, err)
			req.Host = "rebind.example:" + port
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if allowed {
				assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
				assert.Contains(t, string(body), "InvalidRequestID")
			} else {
				assert.Equal(t, http.StatusForbidden, resp.StatusCode, "%s", body)
				assert.Contains(t, string(body), "AccessDeniedException")
			}
		})
	}
}

// A real browser, on a page of another site, sends the requests a page
// can send without a preflight (a no-cors fetch POST and a form POST of
// text/plain, an image's GET) to the running gateway's Invoke API, and to
// a worker's Runtime API (its poll, and its init/error, which would end
// it), its secret included: each is refused as cross-site, before its
// signature is even looked at; no function is invoked, no worker started
// or ended.
func TestBrowserCannotInvoke(t *testing.T) {
	ctx := browsertest.New(t)
	lbl := label(t)
	g := startGateway(t, lbl, nil)
	hello := helloWorker(t, g.addr)
	rt := "http://" + runtimeEndpoint(t, hello) + "/2018-06-01/runtime/"
	payload := `{"name":"from a page"}`
	var reqs []browsertest.Request
	for _, url := range []string{
		"http://" + g.addr + "/2015-03-31/functions/echo/invocations",
		"http://" + g.addr + "/2015-03-31/functions/hello/invocations",
	} {
		reqs = append(reqs, browsertest.CrossSiteKinds(url, payload)...)
	}
	reqs = append(reqs, browsertest.CrossSiteKinds(rt+"invocation/next", payload)...)
	reqs = append(reqs, browsertest.CrossSiteKinds(rt+"init/error", `{"errorMessage":"from a page"}`)...)
	browsertest.Attack(t, ctx, reqs...)

	m := g.metrics(t)
	assert.Equal(t, 6.0, gwtest.Metric(t, m, `gateway_requests_refused_total{reason="cross_site"}`), "refused as cross-site:\n%s", m)
	assert.Zero(t, gwtest.Metric(t, m, `gateway_requests_refused_total{reason="unsigned"}`), "none reached the signature check")
	assert.Zero(t, gwtest.Metric(t, m, `gateway_pool_created_total{function="echo"}`))
	assert.Zero(t, gwtest.Metric(t, m, `gateway_invocation_duration_seconds_count{function="echo",outcome="ok"}`))
	assert.Equal(t, 1.0, gwtest.Metric(t, m, `gateway_invocation_duration_seconds_count{function="hello",outcome="ok"}`), "the test's own call only")
	assert.NotContains(t, m, `gateway_workers_destroyed_total{function="hello"`, "no hello worker was destroyed by the gateway")
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, `gateway_pool_destroyed_total{function="hello"`) {
			assert.True(t, strings.HasSuffix(line, " 0"), "no hello worker was destroyed by its pool: %s", line)
		}
	}
	assert.Contains(t, m, `gateway_pool_destroyed_total{function="hello",reason="died"} 0`)
	assert.Empty(t, listed(t, localAgent(t, lbl), "echo"))
	// hello's worker still runs: no page ended it. (It need not serve the
	// next call: hello's provisioned worker may be idle beside it.)
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(hello) + "/stat")
	require.NoError(t, err, "hello's worker %d is gone", hello)
	_, state, _ := strings.Cut(string(stat), ") ")
	assert.NotEqual(t, byte('Z'), state[0], "hello's worker %d exited", hello)
	assert.NotZero(t, helloWorker(t, g.addr))
}

// A gateway that listens beyond loopback says that it has no TLS; on
// loopback it does not.
func TestOpenAddressWarning(t *testing.T) {
	const warning = "listens beyond loopback without TLS"
	open := startGateway(t, label(t)+"open", nil, "-addr", "0.0.0.0:0")
	assert.Contains(t, open.logs.String(), warning)
	local := startGateway(t, label(t)+"local", nil)
	assert.NotContains(t, local.logs.String(), warning)
}

// The gateway's secrets, given in its environment, do not reach the
// functions: worker processes inherit the rest of its environment, not its
// key pair, the agent's token, nor AWS credentials (a shell where the
// printed export line was pasted holds the gateway's own pair under those
// names). A worker's endpoint carries its secret.
func TestSecretsNotInherited(t *testing.T) {
	secrets := map[string]string{
		envAccessKeyID: "AKIDINHERITED", envSecretAccessKey: "inherited-s3cret", envAgentToken: "agent-t0ken",
		"AWS_ACCESS_KEY_ID": "AKIDINHERITED", "AWS_SECRET_ACCESS_KEY": "inherited-s3cret", "AWS_SESSION_TOKEN": "sess10n",
	}
	var env []string
	for k, v := range secrets {
		env = append(env, k+"="+v)
	}
	cmd, addr := startBinaryEnv(t, append(env, "GATEWAY_TEST_KEPT=kept"), "-label", label(t))
	c := sdkWith(addr, sigv4.Credentials{AccessKeyID: "AKIDINHERITED", SecretAccessKey: "inherited-s3cret"})
	out := invoke(t, c, "hello", `{"name":"env"}`)
	var hello struct{ PID int }
	require.NoError(t, json.Unmarshal(out.Payload, &hello), "%s", out.Payload)
	require.NotZero(t, hello.PID)
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(hello.PID) + "/environ")
	require.NoError(t, err)
	vars := map[string]string{}
	for _, kv := range strings.Split(string(environ), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	for k, v := range secrets {
		assert.NotContains(t, vars, k)
		assert.NotContains(t, string(environ), v)
	}
	assert.Equal(t, "kept", vars["GATEWAY_TEST_KEPT"], "the rest of the environment is inherited")
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

// An agent killed with SIGKILL leaves its unix socket's file behind: the
// agent started again takes it over. A socket that an agent still listens
// on is not taken over.
func TestAgentUnixSocketLeftByKill(t *testing.T) {
	lbl := label(t)
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	ln.(*net.UnixListener).SetUnlinkOnClose(false) // as a killed process leaves it
	require.NoError(t, ln.Close())
	_, err = os.Lstat(sock)
	require.NoError(t, err, "the socket's file is left")

	addr, cl := startAgent(t, lbl, nil, "-listen", "unix:"+sock)
	_, err = cl.List(context.Background(), agent.ListRequest{Function: "echo"})
	require.NoError(t, err)
	err = run(context.Background(), []string{"agent", "-listen", addr, "-label", lbl}, func(string) string { return "" }, nil, io.Discard, io.Discard)
	require.ErrorContains(t, err, "address already in use: a process listens on it")
	_, err = cl.List(context.Background(), agent.ListRequest{Function: "echo"})
	require.NoError(t, err, "the first agent still serves on its socket")
}
