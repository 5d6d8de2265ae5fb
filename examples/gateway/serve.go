package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/moby/moby/client"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ttlkit/ttlkit/examples/gateway/agent"
	"github.com/ttlkit/ttlkit/examples/gateway/gateway"
	"github.com/ttlkit/ttlkit/examples/gateway/runtimeapi"
	"github.com/ttlkit/ttlkit/examples/gateway/sigv4"
	"github.com/ttlkit/ttlkit/examples/gateway/template"
)

func runGateway(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	began := time.Now()
	c, err := parseGateway(args, getenv, stderr)
	if err != nil {
		return err
	}
	log := c.log
	fns, err := template.Load(c.template)
	if err != nil {
		return err
	}
	if c.buildDir == "" {
		if c.buildDir, err = os.MkdirTemp("", "ttlkit-gateway-"); err != nil {
			return err
		}
		defer os.RemoveAll(c.buildDir)
	}

	// The workers' output, for the tail of an invocation's log: only an
	// agent in this process can hand it over.
	var logs *gateway.Logs
	var ag agent.Agent
	if c.agentAddr != "" {
		cl, err := agent.Dial(c.agentAddr, c.agentToken)
		if err != nil {
			return err
		}
		defer cl.Close()
		ag = cl
	} else {
		logs = gateway.NewLogs()
		local, closeAgent, err := newLocalAgent(c.label, c.docker, stderr, logs.Writer)
		if err != nil {
			return err
		}
		defer closeAgent()
		ag = local
	}

	rt := runtimeapi.New()
	rt.Hosts = c.allowedHosts
	rtSrv, rtAddr, err := rt.Listen(c.runtimeAddr)
	if err != nil {
		return fmt.Errorf("runtime API: %w", err)
	}
	if ip := net.ParseIP(hostOf(rtAddr)); ip == nil || !ip.IsLoopback() {
		log.Warn("the Runtime API listens beyond loopback: each worker's secret still guards its endpoint, but it travels in clear", "runtime_api", rtAddr)
	}
	defer rt.Wait()
	defer rtSrv.Close()

	metrics := gateway.NewMetrics()
	gw, err := gateway.New(gateway.Config{
		Agent: ag, Runtime: rt, RuntimeAddr: rtAddr, Build: builder(c.buildDir),
		IdleTimeout: c.idleTimeout, Heartbeat: c.heartbeat, OrphanGrace: c.orphanGrace,
		Metrics: metrics, Logger: log, Credentials: []sigv4.Credentials{c.creds}, Hosts: c.allowedHosts,
		EventRetryDelay: c.eventRetry, Logs: logs,
	}, fns)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	if err := metrics.Register(reg, gw); err != nil {
		return err
	}
	closeCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.WithoutCancel(ctx), c.drain+30*time.Second)
	}
	// Listening before the start-up cleanup, which deletes the workers of
	// an earlier run, is over would let a client meet them: the listener
	// only holds connections until then. The functions are built after:
	// each is served once built (Pending until then).
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		cctx, cancel := closeCtx()
		defer cancel()
		return errors.Join(err, gw.Close(cctx))
	}
	if err := gw.Start(ctx); err != nil {
		ln.Close()
		cctx, cancel := closeCtx()
		defer cancel()
		return errors.Join(fmt.Errorf("start-up cleanup: %w", err), gw.Close(cctx))
	}
	if !loopback(ln.Addr()) {
		log.Warn("the Invoke API listens beyond loopback without TLS: payloads travel in clear, and a signed request seen on the way can be replayed for 15 minutes", "addr", ln.Addr().String())
	}
	srv := &http.Server{Handler: gateway.NewServer(gw, reg), ReadHeaderTimeout: 10 * time.Second}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		_ = srv.Serve(ln)
	}()
	reloadCtx, stopReload := context.WithCancel(ctx)
	go func() {
		defer wg.Done()
		watch(reloadCtx, c, gw)
	}()
	log.Info("gateway listening", "addr", ln.Addr().String(), "runtime_api", rtAddr, "functions", len(fns), "template", c.template)
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())
	if c.madeCreds {
		printCredentials(stderr, c.creds, ln.Addr())
	}
	go func() {
		defer wg.Done()
		if gw.Built(reloadCtx) != nil {
			return
		}
		counts := map[gateway.State]int{}
		for _, f := range fns {
			st, _ := gw.State(f.Name)
			counts[st.State]++
		}
		took := time.Since(began).Round(time.Millisecond)
		log.Info("functions built", "active", counts[gateway.StateActive], "failed", counts[gateway.StateFailed], "since_start", took)
		fmt.Fprintf(stdout, "functions built in %v: %d active, %d failed\n", took, counts[gateway.StateActive], counts[gateway.StateFailed])
	}()

	<-ctx.Done()
	// Drain: new invocations get 503, in-flight ones finish, then every
	// worker is deleted.
	log.Info("draining")
	gw.Drain()
	stopReload()
	sctx, cancel := context.WithTimeout(context.Background(), c.drain)
	defer cancel()
	gw.Idle(sctx) // meanwhile new invocations get a clear 503
	err = srv.Shutdown(sctx)
	wg.Wait()
	cctx, cancel2 := closeCtx()
	defer cancel2()
	err = errors.Join(err, gw.Close(cctx))
	log.Info("stopped", "err", err)
	return err
}

// printCredentials tells, on w, the key pair made at start for this run, as
// a line to paste into a shell: the AWS CLI and SDKs read these variables
// (AWS_DEFAULT_REGION for version 1 of the CLI; AWS_ENDPOINT_URL_LAMBDA for
// the recent ones, which then need no --endpoint-url).
func printCredentials(w io.Writer, c sigv4.Credentials, addr net.Addr) {
	endpoint := addr.String()
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		endpoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(tcp.Port))
	}
	fmt.Fprintf(w, "\nThe Invoke API takes AWS SigV4 signatures made with a key pair made for this run\n"+
		"(set %s and %s to choose one). To call it, paste into a shell:\n\n"+
		"    export AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 AWS_ENDPOINT_URL_LAMBDA=http://%s\n\n",
		envAccessKeyID, envSecretAccessKey, c.AccessKeyID, c.SecretAccessKey, endpoint)
}

func newLocalAgent(label, dockerHost string, out io.Writer, workerOutput func(string) io.Writer) (*agent.Local, func(), error) {
	opts := agent.Options{Label: label, Output: out, WorkerOutput: workerOutput}
	closeFn := func() {}
	if dockerHost != "" {
		cli, err := client.New(client.WithHost(dockerHost))
		if err != nil {
			return nil, nil, err
		}
		opts.Docker = cli
		closeFn = func() { _ = cli.Close() }
	}
	a, err := agent.NewLocal(opts)
	return a, closeFn, err
}

// builder returns the gateway's Config.Build: it compiles a Go function
// (CodeUri a directory of Go code) into dir and returns the command that
// runs it; a CodeUri that is a file is run as it is.
func builder(dir string) func(context.Context, template.Function) ([]string, error) {
	return func(ctx context.Context, f template.Function) ([]string, error) {
		return build(ctx, dir, f)
	}
}

// build compiles f into dir (see builder).
func build(ctx context.Context, dir string, f template.Function) ([]string, error) {
	if f.CodeDir == "" {
		return nil, nil
	}
	st, err := os.Stat(f.CodeDir)
	if err != nil {
		return nil, fmt.Errorf("function %s: CodeUri: %w", f.Name, err)
	}
	if !st.IsDir() {
		return []string{f.CodeDir}, nil
	}
	sum := sha256.Sum256([]byte(f.CodeDir))
	bin := filepath.Join(dir, f.Name+"-"+hex.EncodeToString(sum[:4]))
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = f.CodeDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("function %s: go build %s: %v\n%s", f.Name, f.CodeDir, err, out)
	}
	return []string{bin}, nil
}

// buildAll builds the functions of fns as the gateway does at start (the
// first alone, then GOMAXPROCS at once: see gateway.Config.MaxBuilds), and
// returns the commands that run them; any error fails it whole. The first
// build alone matters on a cold cache: measured, the demo's three
// functions built at once took twice as long as one after the other.
func buildAll(ctx context.Context, dir string, fns []template.Function) (map[string][]string, error) {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
		cmds = map[string][]string{}
		sem  = make(chan struct{}, runtime.GOMAXPROCS(0))
	)
	one := func(f template.Function) {
		cmd, err := build(ctx, dir, f)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
			return
		}
		cmds[f.Name] = cmd
	}
	first := true
	for _, f := range fns {
		switch {
		case f.ImageURI != "":
		case first:
			first = false
			one(f)
		default:
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				one(f)
			})
		}
	}
	wg.Wait()
	return cmds, errors.Join(errs...)
}

// watch reloads the template when it changes; a bad template is logged
// and the running configuration kept.
func watch(ctx context.Context, c config, gw *gateway.Gateway) {
	last := modTime(c.template)
	t := time.NewTicker(c.reload)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m := modTime(c.template)
		if m.Equal(last) {
			continue
		}
		last = m
		fns, err := template.Load(c.template)
		var cmds map[string][]string
		if err == nil {
			cmds, err = buildAll(ctx, c.buildDir, fns)
		}
		if err != nil {
			c.log.Error("template reload failed: keeping the running configuration", "err", err)
			continue
		}
		if err := gw.Apply(fns, cmds); err != nil {
			c.log.Error("template reload: some limits not applied", "err", err)
			continue
		}
		c.log.Info("template reloaded", "functions", len(fns))
	}
}

func modTime(path string) time.Time {
	st, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return st.ModTime()
}

func hostOf(addr string) string {
	h, _, _ := net.SplitHostPort(addr)
	return h
}
