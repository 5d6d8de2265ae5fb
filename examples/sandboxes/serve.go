package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/ttlkit/ttlkit/examples/entities"
	"github.com/ttlkit/ttlkit/examples/entities/redisentities"
	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
	"github.com/ttlkit/ttlkit/examples/sandboxes/archive"
	"github.com/ttlkit/ttlkit/examples/sandboxes/backend"
	"github.com/ttlkit/ttlkit/examples/sandboxes/sandbox"
	"github.com/ttlkit/ttlkit/lease"
	"github.com/ttlkit/ttlkit/lease/redislease"
	"github.com/ttlkit/ttlkit/pool/docker"
	"github.com/ttlkit/ttlkit/pool/probe"
	"github.com/ttlkit/ttlkit/pool/redispool"
)

// system is what a backend runs on: its configuration, with the clients
// it holds open.
type system struct {
	cfg     backend.Config
	rdb     *redis.Client  // nil with the state in memory
	cli     *client.Client // nil with process sandboxes
	closers []func()
}

func (s *system) close() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
}

// setup builds the sandboxes' provisioner (building the image and network
// in Docker mode), the state (Redis or memory) and the archive for c.
func setup(ctx context.Context, c config, stderr io.Writer) (_ *system, err error) {
	log := c.log
	s := &system{cfg: backend.Config{
		Instance:      c.instance,
		InactivityTTL: c.inactivity, AbsoluteTTL: c.absolute, ExecTimeout: c.execTimeout,
		HealthInterval: c.health, Grace: c.grace, WarmTTL: c.warmTTL, GCInterval: c.gc,
		AssignTimeout: c.assign, ClaimGrace: c.claimGrace, OrphanGrace: c.orphanGrace, MinWarm: c.warmMin, MaxWarm: c.warmMax,
		Metrics: backend.NewMetrics(), Logger: log,
	}}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	cfg := &s.cfg
	if cfg.Archive, err = archive.NewDir(c.archiveDir); err != nil {
		return nil, err
	}

	// The shared state, then the sandboxes (which need the agents' token).
	if err := s.state(ctx, c); err != nil {
		return nil, err
	}

	// The sandboxes. One health probe may take up to the health interval,
	// between 1 and 5 seconds.
	probeTimeout := min(max(c.health, time.Second), 5*time.Second)
	cfg.HealthTimeout = probeTimeout
	ready := probe.Options{Timeout: min(c.assign, time.Minute), AttemptTimeout: probeTimeout}
	agentArgs := []string{"-max-output", strconv.FormatInt(c.maxOutput, 10)}
	if len(c.allowedHosts) > 0 {
		// The agents answer the names the API does (and, as the backend
		// reaches them, their addresses).
		agentArgs = append(agentArgs, "-allowed-hosts", strings.Join(c.allowedHosts, ","))
	}
	agentEnv := []string{agent.EnvToken + "=" + cfg.AgentToken}
	if c.docker != "" {
		cli, err := client.New(client.WithHost(c.docker))
		if err != nil {
			return nil, err
		}
		s.cli = cli
		s.closers = append(s.closers, func() { _ = cli.Close() })
		labels := map[string]string{docker.LabelPool: c.label}
		if built, err := sandbox.EnsureImage(ctx, cli, c.image, c.busybox, labels, nil); err != nil {
			return nil, err
		} else if built {
			log.Info("built the sandbox image", "image", c.image)
		}
		if err := sandbox.EnsureNetwork(ctx, cli, c.label, c.label); err != nil {
			return nil, err
		}
		if cfg.Provisioner, err = sandbox.NewDocker(cli, sandbox.DockerOptions{
			Image: c.image, Label: c.label, Network: c.label, AgentArgs: agentArgs, Env: agentEnv,
			Memory: c.memoryMiB << 20, CPUs: c.cpus, Pids: c.pids,
			WorkSize: strconv.FormatInt(c.workMiB, 10) + "m", TmpSize: strconv.Itoa(tmpMiB) + "m",
			StopTimeout: c.grace, Ready: ready, Logger: log,
		}); err != nil {
			return nil, err
		}
	} else {
		cmd := c.agentCmd
		if cmd == "" {
			if cmd, err = os.Executable(); err != nil {
				return nil, err
			}
		}
		if cfg.Provisioner, err = sandbox.NewProcess(sandbox.ProcessOptions{
			Agent: append([]string{cmd, "agent"}, agentArgs...), Env: agentEnv, Label: c.label, Root: c.workRoot,
			StopGrace: c.grace, Ready: ready, Output: stderr, Logger: log,
		}); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// state sets up the shared state: in Redis, or in memory. The agents'
// token is $SANDBOX_AGENT_TOKEN, else the one the instances share in Redis
// (<prefix>:agent-token, made by the first), else a new one.
func (s *system) state(ctx context.Context, c config) error {
	cfg := &s.cfg
	cfg.AgentToken = c.agentToken
	if c.redis == "" {
		cfg.Assignments = backend.NewMemoryAssignments(nil)
		cfg.Entities = entities.NewMemoryStore(entities.MemoryStoreOptions{})
		if cfg.AgentToken == "" {
			cfg.AgentToken = rand.Text()
		}
		return nil
	}
	opts, err := redis.ParseURL(c.redis)
	if err != nil {
		return fmt.Errorf("-redis: %w", err)
	}
	s.rdb = redis.NewClient(opts)
	s.closers = append(s.closers, func() { _ = s.rdb.Close() })
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = s.rdb.Ping(pctx).Err()
	cancel()
	if err != nil {
		return fmt.Errorf("redis at %s: %w", opts.Addr, err)
	}
	cfg.Shared = true
	cfg.Assignments = backend.NewRedisAssignments(s.rdb, c.prefix)
	if cfg.Entities, err = redisentities.New(s.rdb, redisentities.Options{Prefix: c.prefix}); err != nil {
		return err
	}
	if cfg.Inventory, err = redispool.New(s.rdb, redispool.Options{Prefix: c.prefix + ":warm"}); err != nil {
		return err
	}
	// The conversations' assignment claims: leases every instance shares.
	claimStore, err := redislease.New(s.rdb, redislease.Options{Prefix: c.prefix + ":claims"})
	if err != nil {
		return err
	}
	if cfg.Claims, err = lease.New(1<<20, lease.Options{Store: claimStore, Logger: c.log}); err != nil {
		return err
	}
	s.closers = append(s.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = cfg.Claims.Close(ctx)
	})
	if cfg.AgentToken == "" {
		key := c.prefix + ":agent-token"
		if err := s.rdb.SetNX(ctx, key, rand.Text(), 0).Err(); err != nil {
			return fmt.Errorf("redis: agent token: %w", err)
		}
		if cfg.AgentToken, err = s.rdb.Get(ctx, key).Result(); err != nil {
			return fmt.Errorf("redis: agent token: %w", err)
		}
	}
	return nil
}

func runBackend(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parseBackend(args, getenv, stderr)
	if err != nil {
		return err
	}
	log := c.log
	// Listening first: a bad address fails before anything starts.
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return err
	}
	sys, err := setup(ctx, c, stderr)
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer sys.close()
	cfg := sys.cfg
	// The API runs any command: it always requires its key, loopback or
	// not.
	var keySource string
	if cfg.APIKey, keySource, err = sys.apiKey(ctx, c); err != nil {
		_ = ln.Close()
		return err
	}
	cfg.AllowedHosts = c.allowedHosts
	b, err := backend.New(cfg)
	if err != nil {
		_ = ln.Close()
		return err
	}
	closeBackend := func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*c.grace+time.Minute)
		defer cancel()
		return b.Close(cctx)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := cfg.Metrics.Register(reg, b); err != nil {
		_ = ln.Close()
		return errors.Join(err, closeBackend())
	}
	srv := &http.Server{Handler: backend.NewServer(b, reg), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	mode := "memory (one instance)"
	if c.redis != "" {
		mode = "redis " + c.prefix
	}
	log.Info("sandboxes backend listening", "addr", ln.Addr().String(), "instance", c.instance,
		"sandboxes", cfg.Provisioner.Kind(), "state", mode, "archive", c.archiveDir, "api_key", keySource)
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		log.Warn("the API is reachable beyond this machine over plain HTTP, its key in clear on the network: put a TLS proxy in front", "addr", ln.Addr().String())
	}
	if keySource != keyGiven {
		printKey(stderr, cfg.APIKey, keySource, ln.Addr().(*net.TCPAddr))
	}
	fmt.Fprintf(stdout, "listening on %s\n", ln.Addr())

	select {
	case <-ctx.Done():
	case err := <-served:
		return errors.Join(err, closeBackend())
	}
	// SIGTERM: stop accepting, let the requests in flight finish, then
	// leave the sandboxes to the other instances (or, alone, archive and
	// destroy them).
	log.Info("shutting down: finishing the requests in flight", "timeout", c.drain)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.drain)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-served
	err = errors.Join(err, closeBackend())
	log.Info("stopped", "err", err)
	return err
}

// Where the API's key came from.
const (
	keyGiven  = "given"     // -api-key or $SANDBOXES_API_KEY
	keyShared = "shared"    // the instances share it in Redis
	keyMade   = "generated" // made for this run
)

// apiKey returns the API's key and where it came from: -api-key or
// $SANDBOXES_API_KEY; else, with the state in Redis, the key the instances
// share there (<prefix>:api-key, made by the first), as they share the
// agents' token, so that any instance takes a client's key; else one made
// for this run.
func (s *system) apiKey(ctx context.Context, c config) (string, string, error) {
	if c.apiKey != "" {
		return c.apiKey, keyGiven, nil
	}
	if s.rdb == nil {
		return newKey(), keyMade, nil
	}
	key := c.prefix + ":api-key"
	if err := s.rdb.SetNX(ctx, key, newKey(), 0).Err(); err != nil {
		return "", "", fmt.Errorf("redis: API key: %w", err)
	}
	v, err := s.rdb.Get(ctx, key).Result()
	if err != nil {
		return "", "", fmt.Errorf("redis: API key: %w", err)
	}
	return v, keyShared, nil
}

// newKey returns 32 random bytes in base64url: a key no one guesses, that
// fits in a header and a shell variable as it is.
func newKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// printKey prints the API's key as a user pastes it into a shell, the way
// Jupyter prints its token: on stderr, not in the log's structured fields.
func printKey(w io.Writer, key, source string, addr *net.TCPAddr) {
	host := addr.IP
	if host.IsUnspecified() {
		host = net.IPv4(127, 0, 0, 1)
	}
	url := "http://" + net.JoinHostPort(host.String(), strconv.Itoa(addr.Port))
	why := "None was set, so this run made one (set $" + envAPIKey + ", or -api-key, to choose it)."
	if source == keyShared {
		why = "None was set, so the instances share one in Redis (set $" + envAPIKey + ", or -api-key, on every instance to choose it)."
	}
	fmt.Fprintf(w, `
The API requires its key, in X-Api-Key or Authorization: Bearer. %s
To call the API from a shell, paste:

    export %s=%s
    curl -H "Authorization: Bearer $%s" %s/conversations/demo/exec -d '{"command": ["echo", "hello"]}'

`, why, envAPIKey, key, envAPIKey, url)
}

// runDown takes the whole system down: every instance must be stopped
// first. The assigned sandboxes are destroyed with their files archived,
// then every other sandbox with the label (the warm ones); with Docker the
// network is removed, with Redis every key under the prefix is deleted.
func runDown(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parseBackend(args, getenv, stderr)
	if err != nil {
		return err
	}
	c.warmMin = 0
	sys, err := setup(ctx, c, stderr)
	if err != nil {
		return err
	}
	defer sys.close()
	b, err := backend.New(sys.cfg)
	if err != nil {
		return err
	}
	n, err := b.Down(ctx)
	err = errors.Join(err, b.Close(context.WithoutCancel(ctx)))
	if sys.cli != nil {
		// The network goes too; the image stays for the next run.
		err = errors.Join(err, sandbox.RemoveDocker(ctx, sys.cli, c.label))
	}
	keys := 0
	if sys.rdb != nil {
		for _, match := range []string{c.prefix + ":container:*", c.prefix + ":inflight:*", c.prefix + ":lock:*",
			c.prefix + ":agent-token", c.prefix + ":api-key", "{" + c.prefix + "}:*", "{" + c.prefix + ":warm}:*"} {
			iter := sys.rdb.Scan(ctx, 0, match, 1000).Iterator()
			for iter.Next(ctx) {
				if derr := sys.rdb.Del(ctx, iter.Val()).Err(); derr != nil {
					err = errors.Join(err, derr)
				} else {
					keys++
				}
			}
			err = errors.Join(err, iter.Err())
		}
	}
	fmt.Fprintf(stdout, "destroyed %d sandboxes, deleted %d Redis keys; archives are in %s\n", n, keys, c.archiveDir)
	return err
}

// runAgent serves the exec agent until ctx ends (SIGTERM).
func runAgent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return agent.Main(ctx, args, stdout, stderr)
}

// runImage builds the workspace-base image.
func runImage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	host := fs.String("docker", "unix:///var/run/docker.sock", "Docker engine")
	tag := fs.String("image", sandbox.DefaultImage, "image name")
	busybox := fs.String("busybox", sandbox.DefaultBusybox, "static busybox (Debian's busybox-static)")
	label := fs.String("label", "ttlkit-sandboxes", "label of the image")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cli, err := client.New(client.WithHost(*host))
	if err != nil {
		return err
	}
	defer cli.Close()
	if err := sandbox.BuildImage(ctx, cli, *tag, *busybox, map[string]string{docker.LabelPool: *label}, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "built %s\n", *tag)
	return nil
}
