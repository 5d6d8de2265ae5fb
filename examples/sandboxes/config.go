package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ttlkit/ttlkit/examples/internal/webguard"
	"github.com/ttlkit/ttlkit/examples/sandboxes/agent"
	"github.com/ttlkit/ttlkit/examples/sandboxes/backend"
	"github.com/ttlkit/ttlkit/examples/sandboxes/sandbox"
)

// The design's parameters, as environment variables (seconds, or Go
// durations such as "60m") with the design's defaults; a flag given on the
// command line wins over its variable.
const (
	envInactivityTTL = "SANDBOX_INACTIVITY_TTL"  // 3600: from the last request's completion
	envAbsoluteTTL   = "SANDBOX_ABSOLUTE_TTL"    // 28800: from the sandbox's creation
	envExecTimeout   = "SANDBOX_EXEC_TIMEOUT"    // 600: one request
	envHealth        = "SANDBOX_HEALTH_INTERVAL" // 30
	envGrace         = "SANDBOX_GRACE_PERIOD"    // 30: in-flight requests before a destroy
	envWarmMin       = "WARM_POOL_MIN_SIZE"      // 2, across instances
	envWarmMax       = "WARM_POOL_MAX_SIZE"      // 10, across instances
	envWarmTTL       = "WARM_POOL_TTL"           // 1800: an unused warm sandbox is replaced
	envGC            = "SANDBOX_GC_INTERVAL"     // 60
	envRedis         = "REDIS_URL"
	envAPIKey        = "SANDBOXES_API_KEY" // the HTTP API's key; made at start (and printed) when unset
	// Host names the API answers to besides loopback names and IP
	// addresses, comma-separated (".name" for it and its subdomains).
	envAllowedHosts = "SANDBOXES_ALLOWED_HOSTS"
)

// The Docker sandbox's /tmp (a tmpfs, MiB), and the least of its memory
// left to its processes beside the work directory and /tmp.
const (
	tmpMiB        = 64
	minProcessMiB = 128
)

type config struct {
	addr, redis, prefix, docker, label, instance string
	archiveDir, workRoot, image, busybox         string
	agentCmd, apiKey, agentToken                 string
	allowedHosts                                 []string
	inactivity, absolute, execTimeout            time.Duration
	health, grace, warmTTL, gc, drain, assign    time.Duration
	orphanGrace, claimGrace                      time.Duration
	warmMin, warmMax                             int
	memoryMiB, pids, workMiB, maxOutput          int64
	cpus                                         float64
	log                                          *slog.Logger
}

func parseBackend(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("sandboxes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	tmp := filepath.Join(os.TempDir(), "ttlkit-sandboxes")
	host, _ := os.Hostname()
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "address of the HTTP API, /metrics and /healthz")
	fs.StringVar(&c.redis, "redis", getenv(envRedis), "Redis URL of the state shared by every instance (env "+envRedis+"); empty keeps it in memory (one instance)")
	fs.StringVar(&c.prefix, "prefix", "workspace", "prefix of every Redis key")
	fs.StringVar(&c.docker, "docker", "", "Docker engine for container sandboxes (unix:///var/run/docker.sock); empty runs process sandboxes")
	fs.StringVar(&c.label, "label", "ttlkit-sandboxes", "label of this system's sandboxes (and Docker network)")
	fs.StringVar(&c.instance, "instance", fmt.Sprintf("%s-%d", host, os.Getpid()), "name of this instance in the shared state")
	fs.StringVar(&c.archiveDir, "archive", filepath.Join(tmp, "archive"), "directory of the archived files of conversations whose sandbox was destroyed")
	fs.StringVar(&c.workRoot, "work-root", filepath.Join(tmp, "work"), "where process sandboxes get their work directories")
	fs.StringVar(&c.apiKey, "api-key", "", "key every request but /healthz must carry (X-Api-Key or Authorization: Bearer); default $"+envAPIKey+"; unset, one is made at start and printed (shared through Redis by the instances)")
	hosts := fs.String("allowed-hosts", getenv(envAllowedHosts), "comma-separated Host names the API answers to besides loopback names and IP addresses: name, .name for it and its subdomains, * for any (behind a proxy that checks Host) (env "+envAllowedHosts+")")
	fs.StringVar(&c.agentCmd, "agent", "", "program that runs the agent in process sandboxes (its 'agent' subcommand); empty means this program")
	fs.StringVar(&c.image, "image", sandbox.DefaultImage, "image of Docker sandboxes, built if the engine lacks it")
	fs.StringVar(&c.busybox, "busybox", sandbox.DefaultBusybox, "static busybox put into the image (Debian's busybox-static)")
	fs.Int64Var(&c.memoryMiB, "memory", 512, "memory limit of a Docker sandbox, MiB")
	fs.Float64Var(&c.cpus, "cpus", 1, "CPU limit of a Docker sandbox")
	fs.Int64Var(&c.pids, "pids", 256, "process limit of a Docker sandbox")
	fs.Int64Var(&c.workMiB, "work-size", 256, "size of a Docker sandbox's work directory (tmpfs, counted in its memory), MiB")
	fs.Int64Var(&c.maxOutput, "max-output", agent.DefaultMaxOutput, "bytes of stdout, and of stderr, an exec returns; the rest is cut (and said so)")
	var level slog.Level
	fs.TextVar(&level, "log-level", slog.LevelInfo, "debug, info, warn or error")

	var errs []error
	dur := func(p *time.Duration, name, env string, def time.Duration, usage string) {
		v, err := envDuration(getenv, env, def)
		errs = append(errs, err)
		fs.DurationVar(p, name, v, usage+" (env "+env+")")
	}
	num := func(p *int, name, env string, def int, usage string) {
		v := def
		if s := getenv(env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				errs = append(errs, fmt.Errorf("%s: %q is not a count >= 0", env, s))
			}
			v = n
		}
		fs.IntVar(p, name, v, usage+" (env "+env+")")
	}
	dur(&c.inactivity, "inactivity-ttl", envInactivityTTL, backend.DefaultInactivityTTL, "destroy a sandbox this long after its last request completed")
	dur(&c.absolute, "absolute-ttl", envAbsoluteTTL, backend.DefaultAbsoluteTTL, "destroy a sandbox this long after it was created")
	dur(&c.execTimeout, "exec-timeout", envExecTimeout, backend.DefaultExecTimeout, "longest exec (and default timeout_sec)")
	dur(&c.health, "health-interval", envHealth, backend.DefaultHealthInterval, "how often sandboxes are health-checked")
	dur(&c.grace, "grace", envGrace, backend.DefaultGrace, "how long a destroy waits for requests in flight; also the orphan grace")
	dur(&c.warmTTL, "warm-ttl", envWarmTTL, backend.DefaultWarmTTL, "replace a warm sandbox unused for this long")
	dur(&c.gc, "gc-interval", envGC, backend.DefaultGCInterval, "how often every instance runs the GC")
	num(&c.warmMin, "warm-min", envWarmMin, backend.DefaultMinWarm, "warm sandboxes kept ready, across instances")
	num(&c.warmMax, "warm-max", envWarmMax, backend.DefaultMaxWarm, "most warm sandboxes, across instances")
	fs.DurationVar(&c.assign, "assign-timeout", backend.DefaultAssignTimeout, "longest assignment (a sandbox plus the restore of its files); an abandoned one is destroyed after it")
	fs.DurationVar(&c.claimGrace, "claim-grace", 10*time.Second, "how long the claim of an instance that died in the middle of assigning a conversation outlives it; then another instance takes the conversation over")
	fs.DurationVar(&c.orphanGrace, "orphan-grace", 0, "a sandbox nobody knows is destroyed this long after its creation (longer than a create takes); 0 means the grace")
	fs.DurationVar(&c.drain, "drain-timeout", 0, "how long SIGTERM waits for requests in flight; 0 means the exec timeout plus the grace")
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (subcommands: agent, image)", fs.Arg(0))
	}
	switch {
	case c.inactivity <= 0, c.absolute <= 0, c.execTimeout <= 0, c.health <= 0, c.grace <= 0, c.warmTTL <= 0, c.gc <= 0, c.assign <= 0:
		return c, errors.New("every TTL, timeout and interval must be positive")
	case c.warmMin > c.warmMax:
		return c, fmt.Errorf("-warm-min (%d) > -warm-max (%d)", c.warmMin, c.warmMax)
	case c.warmMax < 1:
		return c, fmt.Errorf("-warm-max (%d) must be at least 1", c.warmMax)
	case c.execTimeout >= c.inactivity:
		return c, fmt.Errorf("-exec-timeout (%v) must be shorter than -inactivity-ttl (%v): a running exec must never look idle", c.execTimeout, c.inactivity)
	case c.maxOutput <= 0, c.memoryMiB < 0, c.pids < 0, c.cpus < 0, c.workMiB <= 0:
		return c, errors.New("-max-output and -work-size must be positive; -memory, -cpus and -pids must not be negative")
	case c.memoryMiB > 0 && c.workMiB+tmpMiB+minProcessMiB > c.memoryMiB:
		// A tmpfs's files are the container's memory: a work directory the
		// limit cannot hold would end a full disk with the kernel killing
		// the biggest process — the agent — instead of "no space left".
		return c, fmt.Errorf("-work-size (%d MiB) and /tmp (%d MiB) must leave at least %d MiB of -memory (%d MiB) to the processes: the files of a Docker sandbox count in its memory",
			c.workMiB, tmpMiB, minProcessMiB, c.memoryMiB)
	}
	hostsFrom := envAllowedHosts
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "allowed-hosts" {
			hostsFrom = "-allowed-hosts"
		}
	})
	var err error
	if c.allowedHosts, err = webguard.ParseHosts(*hosts); err != nil {
		return c, fmt.Errorf("%s: %w", hostsFrom, err)
	}
	c.apiKey = cmp.Or(c.apiKey, getenv(envAPIKey))
	c.agentToken = getenv(agent.EnvToken)
	if c.claimGrace <= 0 {
		return c, errors.New("-claim-grace must be positive")
	}
	if c.orphanGrace < 0 {
		return c, errors.New("-orphan-grace must not be negative")
	}
	if c.drain == 0 {
		c.drain = c.execTimeout + c.grace
	}
	c.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	return c, nil
}

// envDuration reads name as seconds ("3600", fractions allowed) or a Go
// duration ("60m").
func envDuration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	s := getenv(name)
	if s == "" {
		return def, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 {
		return time.Duration(f * float64(time.Second)), nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return d, nil
	}
	return 0, fmt.Errorf("%s: %q is neither seconds nor a duration such as 60m", name, s)
}
