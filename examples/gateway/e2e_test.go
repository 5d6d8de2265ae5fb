package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ttlkit/ttlkit/examples/gateway/agent"
	"github.com/ttlkit/ttlkit/examples/gateway/internal/gwtest"
	"github.com/ttlkit/ttlkit/examples/gateway/sigv4"
	"github.com/ttlkit/ttlkit/internal/testenv"
)

// TestMain runs the tests, or, started as a worker of a template that
// names the test binary (gwtest.Env set), the test function.
func TestMain(m *testing.M) {
	if os.Getenv(gwtest.Env) == "" { // not when this binary runs as a function
		dir, err := os.MkdirTemp("", "ttlkit-gateway-test-build-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		buildDir = dir
	}
	gwtest.Main(m, goleak.Cleanup(func(int) { _ = os.RemoveAll(buildDir) }))
}

// buildDir holds the demo functions' binaries and the gateway's, built
// once for all tests of this run: a directory of its own, which another
// test run on the same machine, rebuilding its functions, cannot touch.
var buildDir string

var (
	listenRE = regexp.MustCompile(`listening on (\S+)`)
	builtRE  = regexp.MustCompile(`functions built in \S+: (\d+) active, (\d+) failed`)
)

// waitAddr waits for "listening on ADDR" in out.
func waitAddr(t *testing.T, out *testenv.Buffer, errc <-chan error) string {
	t.Helper()
	return waitLine(t, out, errc, listenRE, "listening", time.Minute)[1]
}

// waitBuilt waits for the gateway's "functions built" line in out.
func waitBuilt(t *testing.T, out *testenv.Buffer, errc <-chan error) {
	t.Helper()
	waitLine(t, out, errc, builtRE, "functions built", 3*time.Minute) // the first run builds the functions
}

// waitLine waits for a match of re in out, what, within limit.
func waitLine(t *testing.T, out *testenv.Buffer, errc <-chan error, re *regexp.Regexp, what string, limit time.Duration) []string {
	t.Helper()
	deadline := time.After(limit)
	for {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m
		}
		select {
		case err := <-errc:
			t.Fatalf("exited before %q: %v", what, err)
		case <-deadline:
			t.Fatalf("no %q after %v", what, limit)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

type gw struct {
	addr   string
	cancel context.CancelFunc
	errc   chan error
	out    *testenv.Buffer
	logs   *testenv.Buffer
}

// start runs the whole program in this process with args and env, and
// waits until it has built its functions; it is stopped (drained) when the
// test ends.
func start(t *testing.T, env map[string]string, args ...string) *gw {
	t.Helper()
	g := launch(t, env, args...)
	waitBuilt(t, g.out, g.errc)
	return g
}

// launch is start without the wait for the builds: it returns once the
// program listens.
func launch(t *testing.T, env map[string]string, args ...string) *gw {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, logs := &testenv.Buffer{}, &testenv.Buffer{}
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, args, func(k string) string { return env[k] }, strings.NewReader(""), out, logs)
	}()
	g := &gw{cancel: cancel, errc: errc, out: out, logs: logs}
	g.addr = waitAddr(t, out, errc)
	t.Cleanup(func() {
		if g.cancel != nil {
			require.NoError(t, g.stop(), "logs:\n%s", logs)
		}
	})
	return g
}

func (g *gw) stop() error {
	g.cancel()
	g.cancel = nil
	return <-g.errc
}

// metrics returns the gateway's /metrics.
func (g *gw) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + g.addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// testCreds is the key pair the tests' gateways are given and sdk's
// clients sign with.
var testCreds = sigv4.Credentials{AccessKeyID: "AKIDE2ETEST", SecretAccessKey: "s3cret-0f-the-e2e-tests"}

// withCreds is env with testCreds for the gateway, unless env sets either
// variable (to "" too).
func withCreds(env map[string]string) map[string]string {
	out := map[string]string{envAccessKeyID: testCreds.AccessKeyID, envSecretAccessKey: testCreds.SecretAccessKey}
	for k, v := range env {
		out[k] = v
	}
	return out
}

// startGateway runs the program in this process, its key pair testCreds
// unless env sets one.
func startGateway(t *testing.T, label string, env map[string]string, args ...string) *gw {
	t.Helper()
	return start(t, withCreds(env), append([]string{"-addr", "127.0.0.1:0", "-label", label, "-build-dir", buildDir, "-log-level", "warn"}, args...)...)
}

// startAgent runs the agent subcommand in this process with env until the
// test ends, and returns its address and a gRPC client of it that sends
// env's token.
func startAgent(t *testing.T, label string, env map[string]string, args ...string) (string, *agent.Client) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	out := &testenv.Buffer{}
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, append([]string{"agent", "-listen", "127.0.0.1:0", "-label", label, "-log-level", "warn"}, args...), func(k string) string { return env[k] }, nil, out, io.Discard)
	}()
	addr := waitAddr(t, out, errc)
	cl, err := agent.Dial(addr, env[envAgentToken])
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cl.Close()
		stop()
		require.NoError(t, <-errc)
	})
	return addr, cl
}

var (
	binOnce sync.Once
	binErr  error
)

// gatewayBinary builds the program once for the tests that run it as a
// process of its own.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(buildDir, "gateway")
	binOnce.Do(func() {
		out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, binErr)
	return bin
}

// startBinary runs the built program with args, and waits until it has
// built its functions; it is killed when the test ends if it still runs.
func startBinary(t *testing.T, args ...string) (*exec.Cmd, string) {
	t.Helper()
	return startBinaryEnv(t, nil, args...)
}

// startBinaryEnv is startBinary with env added to the test's environment,
// after testCreds (so env may override them).
func startBinaryEnv(t *testing.T, env []string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(gatewayBinary(t), append([]string{"-addr", "127.0.0.1:0", "-build-dir", buildDir, "-log-level", "warn"}, args...)...)
	cmd.Env = append(append(os.Environ(), envAccessKeyID+"="+testCreds.AccessKeyID, envSecretAccessKey+"="+testCreds.SecretAccessKey), env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	r := bufio.NewReader(stdout)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	m := listenRE.FindStringSubmatch(line)
	require.NotNil(t, m, line)
	built, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Regexp(t, builtRE, built)
	return cmd, m[1]
}

// sdk is the AWS SDK's Lambda client of the gateway at addr, with
// testCreds.
func sdk(addr string) *lambda.Client { return sdkWith(addr, testCreds) }

// sdkWith is the AWS SDK's Lambda client of the gateway at addr, with c,
// changed by opts; it does not retry.
func sdkWith(addr string, c sigv4.Credentials, opts ...func(*lambda.Options)) *lambda.Client {
	return lambda.New(lambda.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String("http://" + addr),
		Credentials:      credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, ""),
		RetryMaxAttempts: 1,
	}, opts...)
}

// signedPost posts body to fn's invocations at addr, signed with testCreds
// as the AWS SDK's signer signs.
func signedPost(t *testing.T, addr, fn string, body []byte) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+addr+"/2015-03-31/functions/"+fn+"/invocations", bytes.NewReader(body))
	require.NoError(t, err)
	sum := sha256.Sum256(body)
	require.NoError(t, v4.NewSigner().SignHTTP(context.Background(),
		aws.Credentials{AccessKeyID: testCreds.AccessKeyID, SecretAccessKey: testCreds.SecretAccessKey},
		req, hex.EncodeToString(sum[:]), "lambda", "us-east-1", time.Now()))
	return http.DefaultClient.Do(req)
}

func invoke(t *testing.T, c *lambda.Client, fn, payload string) *lambda.InvokeOutput {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(fn), Payload: []byte(payload)})
	require.NoError(t, err)
	return out
}

func label(t *testing.T) string {
	return "gwtest-" + strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(t.Name(), ""))
}

// listed returns the workers the agent lists for fn.
func listed(t *testing.T, a agent.Agent, fn string) []agent.Worker {
	t.Helper()
	ws, err := a.List(context.Background(), agent.ListRequest{Function: fn})
	require.NoError(t, err)
	return ws
}

func localAgent(t *testing.T, label string) *agent.Local {
	a, err := agent.NewLocal(agent.Options{Label: label})
	require.NoError(t, err)
	return a
}

// writeTemplate writes a template whose "{{functions}}" is the demo
// functions' directory to path, or to a new file when path is "", and
// returns the path.
func writeTemplate(t *testing.T, path, src string) string {
	t.Helper()
	dir, err := filepath.Abs("functions")
	require.NoError(t, err)
	if path == "" {
		path = filepath.Join(t.TempDir(), "template.yaml")
	}
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(src, "{{functions}}", dir)), 0o644))
	return path
}

// The Lambda API through the AWS SDK: a result, a handler error, an
// unknown function, an oversized payload, and a runtime crash (the worker
// is evicted).
func TestInvokeAPI(t *testing.T) {
	lbl := label(t)
	g := startGateway(t, lbl, nil)
	c := sdk(g.addr)

	out := invoke(t, c, "hello", `{"name":"ttlkit"}`)
	assert.Nil(t, out.FunctionError)
	assert.Contains(t, string(out.Payload), `"message":"Hello, ttlkit!"`, "GREETING comes from !Ref Greeting")

	out = invoke(t, c, "echo", `{"fail":"boom"}`)
	require.NotNil(t, out.FunctionError)
	assert.Equal(t, "Unhandled", *out.FunctionError)
	assert.Contains(t, string(out.Payload), `"errorMessage":"boom"`)
	out = invoke(t, c, "echo", `{"x":1}`)
	assert.Nil(t, out.FunctionError, "a handler error keeps the worker")
	assert.JSONEq(t, `{"x":1}`, string(out.Payload))

	_, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("nope")})
	var nf *types.ResourceNotFoundException
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, "Function not found: arn:aws:lambda:us-east-1:000000000000:function:nope", nf.ErrorMessage(), "in the region the client signed for")
	assert.Equal(t, "User", aws.ToString(nf.Type))
	var re *awshttp.ResponseError
	require.ErrorAs(t, err, &re)
	assert.Regexp(t, `^[0-9a-f-]{36}$`, re.ServiceRequestID(), "the SDK reads x-amzn-RequestId")

	big := bytes.Repeat([]byte("a"), 6<<20+10)
	_, err = c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("echo"), Payload: big})
	var tooBig *types.RequestTooLargeException
	require.ErrorAs(t, err, &tooBig)
	resp, err := signedPost(t, g.addr, "echo", big)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)

	a := localAgent(t, lbl)
	invoke(t, c, "slow", `{"ms":1}`)
	crashed := listed(t, a, "slow")
	require.Len(t, crashed, 1)
	out = invoke(t, c, "slow", `{"crash":true}`)
	require.NotNil(t, out.FunctionError)
	assert.Contains(t, string(out.Payload), "Runtime.ExitError")
	require.Eventually(t, func() bool {
		return gwtest.Metric(t, g.metrics(t), `gateway_workers_destroyed_total{function="slow",reason="crashed"}`) == 1
	}, 10*time.Second, 20*time.Millisecond)
	assert.NotContains(t, listed(t, a, "slow"), crashed[0], "the crashed worker is evicted")
	out = invoke(t, c, "slow", `{"ms":1}`)
	assert.Nil(t, out.FunctionError, "a new worker serves the next call")
}

// The Go SDK's ListFunctions paginator, GetFunction and
// GetFunctionConfiguration, with their typed errors.
func TestReadOperationsThroughSDK(t *testing.T) {
	g := startGateway(t, label(t), nil)
	c := sdk(g.addr)
	ctx := context.Background()

	var pages [][]string
	p := lambda.NewListFunctionsPaginator(c, &lambda.ListFunctionsInput{MaxItems: aws.Int32(2)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		require.NoError(t, err)
		var names []string
		for _, f := range out.Functions {
			names = append(names, aws.ToString(f.FunctionName))
		}
		pages = append(pages, names)
	}
	assert.Equal(t, [][]string{{"echo", "hello"}, {"slow"}}, pages)

	fn, err := c.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String("hello")})
	require.NoError(t, err)
	conf := fn.Configuration
	assert.Equal(t, "arn:aws:lambda:us-east-1:000000000000:function:hello", aws.ToString(conf.FunctionArn))
	assert.Equal(t, types.RuntimeProvidedal2023, conf.Runtime)
	assert.Equal(t, "bootstrap", aws.ToString(conf.Handler))
	assert.Equal(t, int32(128), aws.ToInt32(conf.MemorySize))
	assert.Equal(t, int32(10), aws.ToInt32(conf.Timeout))
	assert.Equal(t, types.StateActive, conf.State)
	assert.Equal(t, types.LastUpdateStatusSuccessful, conf.LastUpdateStatus)
	assert.Equal(t, types.PackageTypeZip, conf.PackageType)
	assert.Equal(t, []types.Architecture{types.ArchitectureX8664}, conf.Architectures)
	assert.Equal(t, map[string]string{"GREETING": "Hello", "STAGE": "ttlkit-gateway-demo"}, conf.Environment.Variables)
	assert.Equal(t, int32(3), aws.ToInt32(fn.Concurrency.ReservedConcurrentExecutions))

	fc, err := c.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String("hello"), Qualifier: aws.String("live")})
	require.NoError(t, err)
	assert.Equal(t, "1", aws.ToString(fc.Version))

	var nf *types.ResourceNotFoundException
	_, err = c.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String("nope")})
	require.ErrorAs(t, err, &nf)
	_, err = c.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String("echo"), Qualifier: aws.String("1")})
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, "Function not found: arn:aws:lambda:us-east-1:000000000000:function:echo:1", nf.ErrorMessage())
	var invalid *types.InvalidParameterValueException
	_, err = c.ListFunctions(ctx, &lambda.ListFunctionsInput{MaxItems: aws.Int32(0)})
	require.ErrorAs(t, err, &invalid)
}

// Event invocations through the Go SDK: 202 at once, run, and a failed one
// retried twice after -event-retry-delay; DryRun runs nothing; LogType
// Tail returns the invocation's log. An unknown qualifier is
// ResourceNotFoundException for Event and DryRun.
func TestEventAndDryRunThroughSDK(t *testing.T) {
	g := startGateway(t, label(t), nil, "-event-retry-delay", "100ms")
	c := sdk(g.addr)
	ctx := context.Background()
	events := func(fn, result string) float64 {
		return gwtest.Metric(t, g.metrics(t), `gateway_events_total{function="`+fn+`",result="`+result+`"}`)
	}

	out, err := c.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("echo"), InvocationType: types.InvocationTypeEvent, Payload: []byte(`{"x":1}`)})
	require.NoError(t, err)
	assert.Equal(t, int32(http.StatusAccepted), out.StatusCode)
	assert.Empty(t, out.Payload)
	out, err = c.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("echo"), InvocationType: types.InvocationTypeEvent, Payload: []byte(`{"fail":"async"}`)})
	require.NoError(t, err)
	assert.Equal(t, int32(http.StatusAccepted), out.StatusCode)
	require.Eventually(t, func() bool { return events("echo", "succeeded") == 1 && events("echo", "failed") == 1 }, 20*time.Second, 20*time.Millisecond)
	assert.Equal(t, 2.0, gwtest.Metric(t, g.metrics(t), `gateway_event_retries_total{function="echo"}`))
	assert.Equal(t, 3.0, gwtest.Metric(t, g.metrics(t), `gateway_invocation_duration_seconds_count{function="echo",outcome="function_error"}`))

	cold := gwtest.Metric(t, g.metrics(t), `gateway_pool_created_total{function="slow"}`)
	out, err = c.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("slow"), InvocationType: types.InvocationTypeDryRun})
	require.NoError(t, err)
	assert.Equal(t, int32(http.StatusNoContent), out.StatusCode)
	assert.Equal(t, cold, gwtest.Metric(t, g.metrics(t), `gateway_pool_created_total{function="slow"}`), "a dry run starts nothing")

	out, err = c.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("echo"), LogType: types.LogTypeTail, Payload: []byte(`{"log":"logged by echo"}`)})
	require.NoError(t, err)
	log, err := base64.StdEncoding.DecodeString(aws.ToString(out.LogResult))
	require.NoError(t, err)
	var re *awshttp.ResponseError
	_, err = c.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("nope")})
	require.ErrorAs(t, err, &re)
	assert.Regexp(t, `^START RequestId: [0-9a-f-]{36} Version: \$LATEST\nlogged by echo\nEND RequestId: [0-9a-f-]{36}\nREPORT RequestId: [0-9a-f-]{36}\tDuration: [0-9.]+ ms\tBilled Duration: \d+ ms\tMemory Size: 128 MB\t\n$`, string(log))

	var nf *types.ResourceNotFoundException
	for _, typ := range []types.InvocationType{types.InvocationTypeEvent, types.InvocationTypeDryRun} {
		_, err = c.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("echo"), Qualifier: aws.String("1"), InvocationType: typ})
		require.ErrorAs(t, err, &nf, typ)
	}
}

// capacityUnderLoad sends 50 concurrent invocations of slow (capacity 3
// in tpl) through a gateway whose agent is a separate one over gRPC
// (started with agentArgs, and a token), sampling the agent's list all
// along: never more than 3 workers, every call served.
func capacityUnderLoad(t *testing.T, tpl string, agentArgs ...string) {
	lbl := label(t)
	env := map[string]string{envAgentToken: "token-" + lbl}
	aaddr, cl := startAgent(t, lbl, env, agentArgs...)
	g := startGateway(t, lbl, env, "-agent", aaddr, "-template", tpl)
	c := sdk(g.addr)

	var most atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			ws, err := cl.List(context.Background(), agent.ListRequest{Function: "slow"})
			if err == nil && int64(len(ws)) > most.Load() {
				most.Store(int64(len(ws)))
			}
		}
	}()
	var wg sync.WaitGroup
	var ok atomic.Int64
	for range 50 {
		wg.Go(func() {
			out, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("slow"), Payload: []byte(`{"ms":50}`)})
			if assert.NoError(t, err) && assert.Nil(t, out.FunctionError) {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	assert.Equal(t, int64(50), ok.Load())
	assert.LessOrEqual(t, most.Load(), int64(3))
	assert.Positive(t, most.Load())
	assert.Positive(t, gwtest.Metric(t, g.metrics(t), `gateway_pool_waits_total{function="slow"}`), "calls waited at capacity")
	require.NoError(t, g.stop())
	assert.Empty(t, listed(t, cl, "slow"))
}

func TestCapacityUnderLoad(t *testing.T) {
	capacityUnderLoad(t, defaultTemplate())
}

// Scale to zero after GATEWAY_IDLE_TIMEOUT_SECONDS, and a live reload of
// the template: a new capacity applies, a malformed template is refused
// and the running configuration kept.
func TestScaleToZeroAndReload(t *testing.T) {
	lbl := label(t)
	src, err := os.ReadFile(defaultTemplate())
	require.NoError(t, err)
	fixed := strings.ReplaceAll(string(src), "CodeUri: functions/", "CodeUri: {{functions}}/")
	fixed = strings.Replace(fixed, "ProvisionedConcurrentExecutions: 1", "ProvisionedConcurrentExecutions: 0", 1)
	tpl := writeTemplate(t, "", fixed)
	env := map[string]string{envIdleTimeout: "0.5", envHeartbeat: "0.2", envOrphanGrace: "60"}
	g := startGateway(t, lbl, env, "-template", tpl, "-reload", "50ms")
	c := sdk(g.addr)
	a := localAgent(t, lbl)

	invoke(t, c, "echo", `{}`)
	require.Len(t, listed(t, a, "echo"), 1)
	require.Eventually(t, func() bool { return len(listed(t, a, "echo")) == 0 }, 10*time.Second, 50*time.Millisecond, "scaled to zero")
	// The destroy is counted by the pool's event, delivered asynchronously
	// after the worker is gone from the list.
	assert.Eventually(t, func() bool {
		return gwtest.Metric(t, g.metrics(t), `gateway_workers_destroyed_total{function="echo",reason="idle"}`) == 1
	}, 5*time.Second, 20*time.Millisecond, "the idle destroy is counted")

	// Capacity 2 -> 1: concurrent calls now run one after the other.
	require.Equal(t, 2.0, gwtest.Metric(t, g.metrics(t), `gateway_pool_max_size{function="echo"}`))
	writeTemplate(t, tpl, strings.Replace(fixed, "ReservedConcurrentExecutions: 2", "ReservedConcurrentExecutions: 1", 1))
	require.Eventually(t, func() bool { return gwtest.Metric(t, g.metrics(t), `gateway_pool_max_size{function="echo"}`) == 1 }, time.Minute, 50*time.Millisecond)
	var most atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { invoke(t, c, "echo", `{}`) })
	}
	for range 20 {
		if n := int64(len(listed(t, a, "echo"))); n > most.Load() {
			most.Store(n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int64(1), "the reloaded capacity holds")

	// A malformed template is refused; the gateway keeps serving.
	writeTemplate(t, tpl, strings.Replace(fixed, "Timeout: 5", "Timeout: five", 1))
	require.Eventually(t, func() bool { return strings.Contains(g.logs.String(), "template reload failed") }, 10*time.Second, 50*time.Millisecond)
	assert.Contains(t, g.logs.String(), "resource SlowFunction: field Timeout")
	invoke(t, c, "slow", `{"ms":1}`)
}

// A malformed template stops the start with an error naming the resource
// and the field.
func TestMalformedTemplateAtStart(t *testing.T) {
	tpl := writeTemplate(t, "", `Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: x
      ReservedConcurrentExecutions: !GetAtt Other.Count
`)
	err := run(context.Background(), []string{"-template", tpl}, func(string) string { return "" }, nil, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "resource Fn: field ReservedConcurrentExecutions")
}

// killAndRestart kills the gateway (run with args) with SIGKILL while 6
// invocations of slow (capacity 3) run, then starts it again: its start-up
// cleanup leaves no worker of the first run, as a (which must see the
// workers) lists them.
func killAndRestart(t *testing.T, a agent.Agent, args ...string) []agent.Worker {
	lbl := label(t)
	args = append([]string{"-label", lbl}, args...)
	cmd, addr := startBinary(t, args...)
	c := sdk(addr)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			_, _ = c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("slow"), Payload: []byte(`{"ms":3000}`)})
		})
	}
	// Every worker busy, not merely started: a runtime still waiting for
	// its first invocation dies with the gateway (its poll fails).
	inUse := func() float64 {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return gwtest.Metric(t, string(b), `gateway_pool_in_use{function="slow"}`)
	}
	require.Eventually(t, func() bool { return inUse() == 3 }, time.Minute, 20*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // the invocations reach their workers
	before := listed(t, a, "slow")
	require.Len(t, before, 3)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	wg.Wait()
	assert.Len(t, listed(t, a, "slow"), 3, "the workers outlive the killed gateway")

	cmd, _ = startBinary(t, args...)
	var after []string // by ID: a listing dates a process anew each time
	for _, w := range listed(t, a, "slow") {
		after = append(after, w.ID)
	}
	for _, w := range before {
		assert.NotContains(t, after, w.ID, "a worker of the killed gateway survived the restart")
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())
	assert.Empty(t, listed(t, a, "slow"))
	return before
}

// SIGKILL of the gateway mid-load, then a restart: its start-up cleanup
// leaves no worker process of the first run.
func TestKillAndRestartCleansUp(t *testing.T) {
	a := localAgent(t, label(t))
	before := killAndRestart(t, a, "-template", defaultTemplate())
	for _, w := range before {
		assert.True(t, strings.HasPrefix(w.ID, "p-"), w.ID)
	}
}
