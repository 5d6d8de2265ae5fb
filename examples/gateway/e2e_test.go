package main

import (
	"bufio"
	"bytes"
	"context"
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
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ttlkit/ttlkit/examples/gateway/agent"
	"github.com/ttlkit/ttlkit/internal/leakcheck"
	"github.com/ttlkit/ttlkit/internal/testenv"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// buildDir holds the demo functions' binaries, built once for all tests.
var buildDir = filepath.Join(os.TempDir(), "ttlkit-gateway-test-build")

var listenRE = regexp.MustCompile(`listening on (\S+)`)

// waitAddr waits for "listening on ADDR" in out.
func waitAddr(t *testing.T, out *testenv.Buffer, errc <-chan error) string {
	t.Helper()
	deadline := time.After(3 * time.Minute) // the first run builds the functions
	for {
		if m := listenRE.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-errc:
			t.Fatalf("exited before listening: %v", err)
		case <-deadline:
			t.Fatal("not listening after 3 minutes")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

type gw struct {
	addr   string
	cancel context.CancelFunc
	errc   chan error
	logs   *testenv.Buffer
}

// start runs the whole program in this process with args and env; it is
// stopped (drained) when the test ends.
func start(t *testing.T, env map[string]string, args ...string) *gw {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, logs := &testenv.Buffer{}, &testenv.Buffer{}
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, args, func(k string) string { return env[k] }, strings.NewReader(""), out, logs)
	}()
	g := &gw{cancel: cancel, errc: errc, logs: logs}
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

func startGateway(t *testing.T, label string, env map[string]string, args ...string) *gw {
	t.Helper()
	return start(t, env, append([]string{"-addr", "127.0.0.1:0", "-label", label, "-build-dir", buildDir, "-log-level", "warn"}, args...)...)
}

func sdk(addr string) *lambda.Client {
	return lambda.New(lambda.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String("http://" + addr),
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		RetryMaxAttempts: 1,
	})
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

// The Lambda API through the AWS SDK: a result, a handler error, an
// unknown function, an oversized payload, a runtime crash (the worker is
// evicted), and drain on shutdown.
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

	big := bytes.Repeat([]byte("a"), 6<<20+10)
	_, err = c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("echo"), Payload: big})
	var tooBig *types.RequestTooLargeException
	require.ErrorAs(t, err, &tooBig)

	a := localAgent(t, lbl)
	out = invoke(t, c, "slow", `{"crash":true}`)
	require.NotNil(t, out.FunctionError)
	assert.Contains(t, string(out.Payload), "Runtime.ExitError")
	require.Eventually(t, func() bool { return len(listed(t, a, "slow")) == 0 }, 10*time.Second, 20*time.Millisecond, "the crashed worker is evicted")
	out = invoke(t, c, "slow", `{"ms":1}`)
	assert.Nil(t, out.FunctionError, "a new worker serves the next call")

	// Drain: an in-flight call finishes, a new one gets 503, every worker
	// is deleted and run returns nil.
	done := make(chan *lambda.InvokeOutput)
	go func() {
		o, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("slow"), Payload: []byte(`{"ms":1500}`)})
		assert.NoError(t, err)
		done <- o
	}()
	time.Sleep(300 * time.Millisecond)
	stopped := make(chan error, 1)
	go func() { stopped <- g.stop() }()
	require.Eventually(t, func() bool {
		resp, err := http.Post("http://"+g.addr+"/2015-03-31/functions/hello/invocations", "application/json", strings.NewReader("{}"))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	}, 5*time.Second, 20*time.Millisecond)
	o := <-done
	assert.Nil(t, o.FunctionError)
	assert.Contains(t, string(o.Payload), `"slept_ms":1500`)
	require.NoError(t, <-stopped)
	for _, fn := range []string{"hello", "echo", "slow"} {
		assert.Empty(t, listed(t, a, fn), fn)
	}
}

// 50 concurrent invocations on a function of capacity 3, through a
// separate agent over gRPC: never more than 3 workers, every call served.
func TestCapacityUnderLoad(t *testing.T) {
	lbl := label(t)
	agentCtx, stopAgent := context.WithCancel(context.Background())
	aout := &testenv.Buffer{}
	aerr := make(chan error, 1)
	go func() {
		aerr <- run(agentCtx, []string{"agent", "-listen", "127.0.0.1:0", "-label", lbl, "-log-level", "warn"}, os.Getenv, nil, aout, io.Discard)
	}()
	aaddr := waitAddr(t, aout, aerr)
	defer func() {
		stopAgent()
		require.NoError(t, <-aerr)
	}()
	cl, err := agent.Dial(aaddr)
	require.NoError(t, err)
	defer cl.Close()

	g := startGateway(t, lbl, nil, "-agent", aaddr)
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
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("slow"), Payload: []byte(`{"ms":50}`)})
			if assert.NoError(t, err) && assert.Nil(t, out.FunctionError) {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-sampled
	assert.Equal(t, int64(50), ok.Load())
	assert.LessOrEqual(t, most.Load(), int64(3))
	assert.Positive(t, most.Load())
	require.NoError(t, g.stop())
	assert.Empty(t, listed(t, cl, "slow"))
}

// Scale to zero after GATEWAY_IDLE_TIMEOUT_SECONDS, and a live reload of
// the template: a new capacity applies, a malformed template is refused
// and the running configuration kept.
func TestScaleToZeroAndReload(t *testing.T) {
	lbl := label(t)
	src, err := os.ReadFile(defaultTemplate())
	require.NoError(t, err)
	dir := t.TempDir()
	tpl := filepath.Join(dir, "template.yaml")
	abs, _ := filepath.Abs(filepath.Dir(defaultTemplate()))
	fixed := strings.ReplaceAll(string(src), "CodeUri: functions/", "CodeUri: "+abs+"/functions/")
	fixed = strings.Replace(fixed, "ProvisionedConcurrentExecutions: 1", "ProvisionedConcurrentExecutions: 0", 1)
	require.NoError(t, os.WriteFile(tpl, []byte(fixed), 0o644))
	env := map[string]string{envIdleTimeout: "0.5", envHeartbeat: "0.2", envOrphanGrace: "60"}
	g := startGateway(t, lbl, env, "-template", tpl, "-reload", "50ms")
	c := sdk(g.addr)
	a := localAgent(t, lbl)

	invoke(t, c, "echo", `{}`)
	require.Len(t, listed(t, a, "echo"), 1)
	require.Eventually(t, func() bool { return len(listed(t, a, "echo")) == 0 }, 10*time.Second, 50*time.Millisecond, "scaled to zero")

	maxSize := func() string {
		resp, err := http.Get("http://" + g.addr + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// Capacity 2 -> 1: concurrent calls now run one after the other.
	require.Contains(t, maxSize(), `gateway_capacity{function="echo"} 2`)
	require.NoError(t, os.WriteFile(tpl, []byte(strings.Replace(fixed, "ReservedConcurrentExecutions: 2", "ReservedConcurrentExecutions: 1", 1)), 0o644))
	require.Eventually(t, func() bool { return strings.Contains(maxSize(), `gateway_capacity{function="echo"} 1`) }, time.Minute, 50*time.Millisecond)
	var most atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			invoke(t, c, "echo", `{}`)
		}()
	}
	for i := 0; i < 20; i++ {
		if n := int64(len(listed(t, a, "echo"))); n > most.Load() {
			most.Store(n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	assert.LessOrEqual(t, most.Load(), int64(1), "the reloaded capacity holds")

	// A malformed template is refused; the gateway keeps serving.
	require.NoError(t, os.WriteFile(tpl, []byte(strings.Replace(fixed, "Timeout: 5", "Timeout: five", 1)), 0o644))
	require.Eventually(t, func() bool { return strings.Contains(g.logs.String(), "template reload failed") }, 10*time.Second, 50*time.Millisecond)
	assert.Contains(t, g.logs.String(), "resource SlowFunction: field Timeout")
	invoke(t, c, "slow", `{"ms":1}`)
}

// A malformed template stops the start with an error naming the resource
// and the field.
func TestMalformedTemplateAtStart(t *testing.T) {
	tpl := filepath.Join(t.TempDir(), "template.yaml")
	require.NoError(t, os.WriteFile(tpl, []byte(`Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: x
      ReservedConcurrentExecutions: !GetAtt Other.Count
`), 0o644))
	err := run(context.Background(), []string{"-template", tpl}, func(string) string { return "" }, nil, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "resource Fn: field ReservedConcurrentExecutions")
}

// SIGKILL of the gateway mid-load, then a restart: its start-up cleanup
// leaves no worker of the first run.
func TestKillAndRestartCleansUp(t *testing.T) {
	lbl := label(t)
	bin := filepath.Join(t.TempDir(), "gateway")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-label", lbl, "-build-dir", buildDir, "-template", defaultTemplate(), "-log-level", "warn")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	m := listenRE.FindStringSubmatch(line)
	require.NotNil(t, m, line)
	c := sdk(m[1])
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = c.Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("slow"), Payload: []byte(`{"ms":3000}`)})
		}()
	}
	a := localAgent(t, lbl)
	require.Eventually(t, func() bool { return len(listed(t, a, "slow")) == 3 }, 30*time.Second, 20*time.Millisecond)
	before := listed(t, a, "slow")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	wg.Wait()

	g := startGateway(t, lbl, nil)
	for _, w := range before {
		assert.NotContains(t, listed(t, a, "slow"), w, "a worker of the killed gateway survived")
	}
	require.NoError(t, g.stop())
	for _, fn := range []string{"hello", "echo", "slow"} {
		assert.Empty(t, listed(t, a, fn), fn)
	}
}
