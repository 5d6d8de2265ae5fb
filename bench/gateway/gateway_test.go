package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttlkit/ttlkit/examples/gateway/agent"
	"github.com/ttlkit/ttlkit/examples/gateway/gateway"
	"github.com/ttlkit/ttlkit/examples/gateway/runtimeapi"
	"github.com/ttlkit/ttlkit/examples/gateway/sigv4"
	"github.com/ttlkit/ttlkit/examples/gateway/template"
)

var ctx = context.Background()

// payload is what every invocation sends; echo returns it.
var payload = []byte(`{"op":"get","key":"user:42"}`)

const arn = "arn:aws:lambda:local:000000000000:function:echo"

var (
	buildOnce sync.Once
	buildDir  string
	echoBin   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// echo builds the echo demo function, statically, once: the worker of
// every benchmark.
func echo(b *testing.B) string {
	b.Helper()
	buildOnce.Do(func() {
		root, err := filepath.Abs("../..")
		if err != nil {
			buildErr = err
			return
		}
		if buildDir, buildErr = os.MkdirTemp("", "ttlkit-bench-gateway-"); buildErr != nil {
			return
		}
		echoBin = filepath.Join(buildDir, "echo")
		cmd := exec.Command("go", "build", "-trimpath", "-o", echoBin, "./examples/gateway/functions/echo")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build echo: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return echoBin
}

var labels atomic.Int64

func newLabel() string { return fmt.Sprintf("bench-gateway-%d-%d", os.Getpid(), labels.Add(1)) }

// runtimeAPI serves the Runtime API on loopback until b ends.
func runtimeAPI(b *testing.B) (*runtimeapi.Server, string) {
	b.Helper()
	rt := runtimeapi.New()
	srv, addr, err := rt.Listen("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = srv.Close()
		rt.Wait()
	})
	return rt, addr
}

func newAgent(b *testing.B, opts agent.Options) *agent.Local {
	b.Helper()
	opts.Label, opts.StopGrace = newLabel(), time.Second
	a, err := agent.NewLocal(opts)
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// workerEnv is the environment the gateway gives a worker of a Runtime
// API endpoint.
func workerEnv(endpoint string) []string {
	return []string{
		"AWS_LAMBDA_RUNTIME_API=" + endpoint,
		"AWS_LAMBDA_FUNCTION_NAME=echo", "AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128", "AWS_REGION=local", "_HANDLER=bootstrap",
	}
}

// target is one way to invoke echo; acquired is the time its calls
// waited for a worker, in total.
type target struct {
	invoke   func(ctx context.Context) error
	acquired func() time.Duration
}

// direct starts n echo workers and invokes them through the Runtime API
// in this process, taking a worker from a buffered channel (FIFO): the
// floor, what any gateway of these workers must do at least.
func direct(b *testing.B, n int) target {
	b.Helper()
	rt, addr := runtimeAPI(b)
	ag := newAgent(b, agent.Options{})
	keys := make(chan string, n)
	var ws []agent.Worker
	b.Cleanup(func() {
		for _, w := range ws {
			_ = ag.Delete(ctx, agent.DeleteRequest{Function: "echo", ID: w.ID})
		}
	})
	for i := range n {
		key := fmt.Sprintf("w%d", i)
		w, err := ag.Create(ctx, agent.CreateRequest{Function: "echo", Command: []string{echo(b)}, Env: workerEnv(runtimeapi.Endpoint(addr, key, rt.Add(key)))})
		if err != nil {
			b.Fatal(err)
		}
		ws = append(ws, w)
		if err := rt.WaitReady(ctx, key); err != nil {
			b.Fatal(err)
		}
		keys <- key
	}
	var waited atomic.Int64
	return target{
		invoke: func(ctx context.Context) error {
			t0 := time.Now()
			key := <-keys
			waited.Add(int64(time.Since(t0)))
			res, err := rt.Invoke(ctx, key, arn, payload, time.Now().Add(30*time.Second))
			keys <- key
			if err == nil && res.FunctionError {
				err = fmt.Errorf("function error: %s", res.Payload)
			}
			return err
		},
		acquired: func() time.Duration { return time.Duration(waited.Load()) },
	}
}

func httpClient(b *testing.B) *http.Client {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// post posts payload to url with header.
func post(c *http.Client, ctx context.Context, url string, header http.Header) error {
	req, err := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(payload))
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Amz-Function-Error") != "" {
		return fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	return nil
}

// proxy is direct behind the least HTTP front there is: a net/http
// handler that reads the payload, invokes and writes the result, called
// by a net/http client over loopback. Against it, the gateway's cost is
// its own logic (routing, the pool, metrics), not HTTP.
func proxy(b *testing.B, n int) target {
	b.Helper()
	d := direct(b, n)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := d.invoke(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		_, _ = w.Write(payload)
	}))
	b.Cleanup(srv.Close)
	c := httpClient(b)
	return target{
		invoke:   func(ctx context.Context) error { return post(c, ctx, srv.URL, nil) },
		acquired: d.acquired,
	}
}

// viaGateway is the gateway of examples/gateway with one function, echo,
// of capacity n, all n workers warm, called through its Invoke API by a
// net/http client over loopback.
func viaGateway(b *testing.B, n int) target {
	b.Helper()
	rt, addr := runtimeAPI(b)
	m := gateway.NewMetrics()
	fn := template.Function{Name: "echo", Resource: "Echo", Handler: "bootstrap", Timeout: 30, MemorySize: 128,
		Reserved: n, Provisioned: n, Env: map[string]string{}}
	creds := sigv4.Credentials{AccessKeyID: "AKIDBENCH", SecretAccessKey: "bench"}
	gw, err := gateway.New(gateway.Config{
		Agent: newAgent(b, agent.Options{}), Runtime: rt, RuntimeAddr: addr,
		Commands:    map[string][]string{"echo": {echo(b)}},
		IdleTimeout: time.Hour, Heartbeat: time.Hour, OrphanGrace: time.Hour, Metrics: m,
		Credentials: []sigv4.Credentials{creds},
	}, []template.Function{fn})
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := m.Register(reg, gw); err != nil {
		b.Fatal(err)
	}
	if err := gw.Start(ctx); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(gateway.NewServer(gw, reg))
	b.Cleanup(func() {
		srv.Close()
		if err := gw.Close(ctx); err != nil {
			b.Error(err)
		}
	})
	for deadline := time.Now().Add(time.Minute); gw.Stats()["echo"].Idle < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%d warm workers after a minute: %+v", n, gw.Stats()["echo"])
		}
	}
	c := httpClient(b)
	url := srv.URL + "/2015-03-31/functions/echo/invocations"
	// One signature, made once and sent with every call (SigV4 allows that
	// for 15 minutes): the gateway verifies each call's, as it must, and the
	// clients spend no time signing, as they spend none in the other
	// targets.
	req, err := http.NewRequest("POST", url, bytes.NewReader(payload))
	if err != nil {
		b.Fatal(err)
	}
	creds.Sign(req, payload, "lambda", "us-east-1", time.Now())
	return target{
		invoke:   func(ctx context.Context) error { return post(c, ctx, url, req.Header) },
		acquired: func() time.Duration { return gw.Stats()["echo"].WaitDuration },
	}
}

var impls = []struct {
	name  string
	setup func(b *testing.B, n int) target
}{
	{"direct", direct},
	{"proxy", proxy},
	{"gateway", viaGateway},
}

// report adds the latency percentiles of lat (µs) and the invocations per
// second over elapsed.
func report(b *testing.B, lat []time.Duration, elapsed time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e3 }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "inv/s")
}

// concurrently runs n calls of tgt on clients goroutines, each call timed.
func concurrently(tgt target, clients, n int) ([]time.Duration, error) {
	lat := make([][]time.Duration, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		ops := n / clients
		if i < n%clients {
			ops++
		}
		wg.Go(func() {
			l := make([]time.Duration, 0, ops)
			for range ops {
				t0 := time.Now()
				if err := tgt.invoke(ctx); err != nil {
					errs[i] = err
					return
				}
				l = append(l, time.Since(t0))
			}
			lat[i] = l
		})
	}
	wg.Wait()
	return slices.Concat(lat...), errors.Join(errs...)
}

// BenchmarkGatewayInvoke: warm invocations of echo from clients goroutines
// on as many warm workers; b.N invocations in all.
func BenchmarkGatewayInvoke(b *testing.B) {
	for _, clients := range []int{1, 4} {
		for _, im := range impls {
			b.Run(fmt.Sprintf("clients=%d/impl=%s", clients, im.name), func(b *testing.B) {
				b.ReportAllocs()
				tgt := im.setup(b, clients)
				if _, err := concurrently(tgt, clients, 4*clients); err != nil { // warm the connections
					b.Fatal(err)
				}
				b.ResetTimer()
				start := time.Now()
				lat, err := concurrently(tgt, clients, b.N)
				elapsed := time.Since(start)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				report(b, lat, elapsed)
			})
		}
	}
}

// BenchmarkGatewayBurst: bursts of 50 concurrent invocations on a function
// of capacity 3, all 3 workers warm; one op is one burst. acquire-µs is the
// mean time an invocation waited for a worker.
func BenchmarkGatewayBurst(b *testing.B) {
	const capacity, burst = 3, 50
	for _, im := range impls {
		b.Run(fmt.Sprintf("capacity=%d/burst=%d/impl=%s", capacity, burst, im.name), func(b *testing.B) {
			b.ReportAllocs()
			tgt := im.setup(b, capacity)
			if _, err := concurrently(tgt, capacity, 4*capacity); err != nil {
				b.Fatal(err)
			}
			waited := tgt.acquired()
			var lat []time.Duration
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				l, err := concurrently(tgt, burst, burst)
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, l...)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			report(b, lat, elapsed)
			b.ReportMetric(float64(tgt.acquired()-waited)/1e3/float64(b.N*burst), "acquire-µs")
		})
	}
}
