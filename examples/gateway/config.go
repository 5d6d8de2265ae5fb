package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ttlkit/ttlkit/examples/gateway/sigv4"
	"github.com/ttlkit/ttlkit/examples/internal/webguard"
)

// Environment variables, with the design's names and defaults.
const (
	envIdleTimeout = "GATEWAY_IDLE_TIMEOUT_SECONDS" // default 300
	envHeartbeat   = "HEARTBEAT_INTERVAL"           // default 30
	envOrphanGrace = "ORPHAN_GRACE_PERIOD_SECONDS"  // default 60

	// The secrets, read from the environment so that they are not on a
	// command line (which every local user can read); a flag overrides
	// each. main takes them out of the process's environment, so that
	// worker processes do not inherit them.
	envAccessKeyID     = "GATEWAY_ACCESS_KEY_ID"     // the Invoke API's key pair; made at start by default
	envSecretAccessKey = "GATEWAY_SECRET_ACCESS_KEY" // its secret
	envAgentToken      = "GATEWAY_AGENT_TOKEN"       // the agent's gRPC token; none by default

	// The host names the Invoke and Runtime APIs answer to besides
	// loopback names and IP addresses, comma-separated.
	envAllowedHosts = "GATEWAY_ALLOWED_HOSTS"

	// envAPIKey was the Invoke API's key before it took SigV4: a gateway
	// given one refuses to start rather than leave its owner believing
	// that it is checked.
	envAPIKey = "GATEWAY_API_KEY"
)

// secretEnv are the environment variables main keeps from its children:
// the gateway's secrets, and the AWS credentials of whoever started it (a
// shell where the gateway's printed export line was pasted holds the
// gateway's own pair under those names), which the gateway never uses.
var secretEnv = []string{
	envAccessKeyID, envSecretAccessKey, envAgentToken,
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
}

type config struct {
	addr, template, agentAddr, runtimeAddr, label, docker, buildDir string
	agentToken                                                      string
	// creds is the Invoke API's key pair; madeCreds says it was made at
	// start, to be printed.
	creds                               sigv4.Credentials
	madeCreds                           bool
	allowedHosts                        []string
	reload                              time.Duration
	drain                               time.Duration
	eventRetry                          time.Duration
	idleTimeout, heartbeat, orphanGrace time.Duration
	log                                 *slog.Logger
}

// defaultTemplate is the demo template beside this file.
func defaultTemplate() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "template.yaml")
}

func parseGateway(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "address of the Lambda Invoke API, /metrics and /healthz")
	fs.StringVar(&c.template, "template", defaultTemplate(), "SAM template with the functions (reloaded when it changes)")
	fs.StringVar(&c.agentAddr, "agent", "", "gRPC address of a separate agent (host:port or unix:/path); empty runs the agent in this process")
	fs.StringVar(&c.creds.AccessKeyID, "access-key-id", "", "access key id of the key pair the Invoke API's AWS SigV4 signatures are made with; default $"+envAccessKeyID+", else a pair made at start and printed")
	fs.StringVar(&c.creds.SecretAccessKey, "secret-access-key", "", "its secret; default $"+envSecretAccessKey+" (better: a command line is readable by every local user)")
	hosts := fs.String("allowed-hosts", "", "host names the Invoke and Runtime APIs answer to besides loopback names and IP addresses, comma-separated (.example.com: it and its subdomains; *: any); default $"+envAllowedHosts)
	fs.StringVar(&c.agentToken, "agent-token", "", "token the separate agent requires; default $"+envAgentToken)
	fs.StringVar(&c.runtimeAddr, "runtime-addr", "127.0.0.1:0", "address of the Runtime API the workers poll")
	fs.StringVar(&c.label, "label", "ttlkit-gateway", "label of this gateway's workers (in-process agent)")
	fs.StringVar(&c.docker, "docker", "", "Docker engine for image functions (in-process agent), e.g. unix:///var/run/docker.sock")
	fs.StringVar(&c.buildDir, "build-dir", "", "where Go functions are built; empty means a temporary directory")
	fs.DurationVar(&c.reload, "reload", 2*time.Second, "how often the template is checked for changes")
	fs.DurationVar(&c.drain, "drain-timeout", 30*time.Second, "how long SIGTERM waits for in-flight invocations")
	fs.DurationVar(&c.eventRetry, "event-retry-delay", time.Second, "wait before the first retry of a failed Event invocation; the second waits twice as long (Lambda: 1m)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if getenv(envAPIKey) != "" {
		return c, errors.New(envAPIKey + " is no longer read: the Invoke API takes AWS SigV4 signatures, made with " +
			envAccessKeyID + " and " + envSecretAccessKey + " (unset, a pair is made at start and printed)")
	}
	// Not flag defaults: -h would print them.
	c.creds.AccessKeyID = cmp.Or(c.creds.AccessKeyID, getenv(envAccessKeyID))
	c.creds.SecretAccessKey = cmp.Or(c.creds.SecretAccessKey, getenv(envSecretAccessKey))
	c.agentToken = cmp.Or(c.agentToken, getenv(envAgentToken))
	var err error
	switch {
	case c.creds == sigv4.Credentials{}:
		c.creds, c.madeCreds = sigv4.NewCredentials(), true
	case c.creds.AccessKeyID == "":
		return c, errors.New(envSecretAccessKey + " (or -secret-access-key) is set but " + envAccessKeyID + " (-access-key-id) is not: set both, or neither for a pair made at start")
	case c.creds.SecretAccessKey == "":
		return c, errors.New(envAccessKeyID + " (or -access-key-id) is set but " + envSecretAccessKey + " (-secret-access-key) is not: set both, or neither for a pair made at start")
	}
	if err := c.creds.Check(); err != nil {
		return c, fmt.Errorf("%s: %w", envAccessKeyID, err)
	}
	hostsFrom := "-allowed-hosts"
	if *hosts == "" {
		*hosts, hostsFrom = getenv(envAllowedHosts), envAllowedHosts
	}
	if c.allowedHosts, err = webguard.ParseHosts(*hosts); err != nil {
		return c, fmt.Errorf("%s: %w", hostsFrom, err)
	}
	if c.idleTimeout, err = seconds(getenv, envIdleTimeout, 300); err != nil {
		return c, err
	}
	if c.heartbeat, err = seconds(getenv, envHeartbeat, 30); err != nil {
		return c, err
	}
	if c.orphanGrace, err = seconds(getenv, envOrphanGrace, 60); err != nil {
		return c, err
	}
	if c.eventRetry <= 0 {
		return c, errors.New("-event-retry-delay must be positive")
	}
	if c.heartbeat <= 0 {
		return c, fmt.Errorf("%s must be positive", envHeartbeat)
	}
	c.log, err = logger(*level, stderr)
	return c, err
}

func logger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// seconds reads an environment variable of seconds (fractions allowed).
func seconds(getenv func(string) string, name string, def float64) (time.Duration, error) {
	v := def
	if s := getenv(name); s != "" {
		var err error
		if v, err = strconv.ParseFloat(s, 64); err != nil || v < 0 {
			return 0, errors.New(name + ": " + strconv.Quote(s) + " is not a number of seconds >= 0")
		}
	}
	return time.Duration(v * float64(time.Second)), nil
}

// loopback reports whether a listener's address is reachable from this
// machine only: a loopback IP, or a unix socket.
func loopback(a net.Addr) bool {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.IsLoopback()
	}
	_, unix := a.(*net.UnixAddr)
	return unix
}

// listen listens on addr: host:port, or unix:/path (unix:///path too) for
// a unix socket that only this user may connect to.
func listen(addr string) (net.Listener, error) {
	path, ok := strings.CutPrefix(addr, "unix:")
	if !ok {
		return net.Listen("tcp", addr)
	}
	path = strings.TrimPrefix(path, "//")
	ln, err := net.Listen("unix", path)
	if errors.Is(err, syscall.EADDRINUSE) {
		// A process killed with SIGKILL leaves its socket file behind:
		// without this, an agent could not be started again where it was.
		if why := inUse(path); why != "" {
			err = fmt.Errorf("%w: %s", err, why)
		} else if err = os.Remove(path); err == nil || errors.Is(err, os.ErrNotExist) {
			ln, err = net.Listen("unix", path)
		}
	}
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// inUse says why the file at path is not a unix socket that no process
// listens on any more (one that connecting to is refused), or "" if it is
// one: a socket something still answers on is in use, and a file of
// another kind is not to remove.
func inUse(path string) string {
	st, err := os.Lstat(path)
	if err != nil {
		return err.Error()
	}
	if st.Mode()&os.ModeSocket == 0 {
		return "the file is not a socket"
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	switch {
	case err == nil:
		c.Close()
		return "a process listens on it"
	case errors.Is(err, syscall.ECONNREFUSED):
		return ""
	default:
		return err.Error()
	}
}

// addrString is a listener's address as -agent and -listen take it.
func addrString(a net.Addr) string {
	if u, ok := a.(*net.UnixAddr); ok {
		return "unix:" + u.Name
	}
	return a.String()
}
