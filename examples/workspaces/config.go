package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/ttlkit/ttlkit/examples/internal/webguard"
	"github.com/ttlkit/ttlkit/examples/workspaces/auth"
)

// Config is every setting of every component. Each has a flag and an
// environment variable (the design's name where it has one); a flag wins
// over the variable, the variable over the default.
type Config struct {
	Component string // all, proxy, runner or controller

	Addr        string // -addr, LISTEN_ADDR
	DataDir     string // -data, WORKSPACES_DIR: files, archives and routes of the workspaces
	RedisURL    string // -redis, REDIS_URL: the activity buffer
	PostgresURL string // -postgres, DATABASE_URL: the workspaces table
	RedisKey    string // -redis-key, ACTIVITY_KEY: the buffer's sorted set
	Table       string // -table, WORKSPACES_TABLE
	Channel     string // -channel, WAKE_CHANNEL: LISTEN/NOTIFY channel of the controllers
	Secret      string // -secret, WORKSPACES_SECRET: derives every token
	AdminToken  string // -admin-token, ADMIN_TOKEN

	// The design's timings.
	Standby       time.Duration // TTL_STANDBY_SECONDS (600)
	Archive       time.Duration // TTL_ARCHIVE_SECONDS (1800)
	FlushInterval time.Duration // ACTIVITY_FLUSH_INTERVAL (30)
	TickInterval  time.Duration // COORDINATOR_TTL_INTERVAL (60)

	ReconcileInterval time.Duration // RECONCILE_INTERVAL_SECONDS: the controllers' full reconcile
	ClaimGrace        time.Duration // CLAIM_GRACE_SECONDS: how soon another controller takes over a dead one's operation
	StartTimeout      time.Duration // START_TIMEOUT_SECONDS: how long a request waits for its workspace
	TokenTTL          time.Duration // TOKEN_TTL_SECONDS: how long a workspace link opens it
	AllowedOrigins    []string      // ALLOWED_ORIGINS: other sites whose pages may use the workspaces
	AllowedHosts      []string      // ALLOWED_HOSTS: names the HTTP server answers to besides loopback names and addresses
	LogLevel          slog.Level    // LOG_LEVEL

	// Generated reports that Secret or AdminToken were made up at start.
	Generated bool
}

// Components are the subcommands that run a part of the system.
var Components = []string{"proxy", "runner", "controller"}

// DefaultConfig returns the design's values.
func DefaultConfig() Config {
	return Config{
		Component:         "all",
		Addr:              "127.0.0.1:8080",
		RedisKey:          "codehub:activity",
		Table:             "workspaces",
		Channel:           "workspace_wc",
		Standby:           600 * time.Second,
		Archive:           1800 * time.Second,
		FlushInterval:     30 * time.Second,
		TickInterval:      60 * time.Second,
		ReconcileInterval: 30 * time.Second,
		ClaimGrace:        10 * time.Second,
		StartTimeout:      60 * time.Second,
		TokenTTL:          24 * time.Hour,
		LogLevel:          slog.LevelInfo,
	}
}

// defaultAddrs are the listen addresses of the components run alone, so
// that one of each fits on one machine without flags.
var defaultAddrs = map[string]string{"proxy": "127.0.0.1:8080", "runner": "127.0.0.1:8081", "controller": "127.0.0.1:8082"}

// setting is one flag with its environment variable.
type setting struct {
	flag, env, usage string
	value            func(*Config) flag.Value
}

// settings lists every setting, in the order of -help.
var settings = []setting{
	{"addr", "LISTEN_ADDR", "HTTP `address`: the proxy and /admin/ (proxy, all), and /metrics and /healthz of every component", str(func(c *Config) *string { return &c.Addr })},
	{"allowed-hosts", "ALLOWED_HOSTS", "comma-separated host `names` the HTTP server answers to besides localhost and IP addresses (.example.com: it and its subdomains); any other Host is refused (DNS rebinding)", hosts(func(c *Config) *[]string { return &c.AllowedHosts })},
	{"data", "WORKSPACES_DIR", "workspace host `directory` (files, archives, routes), shared by the proxies and controllers of a machine; empty in memory mode: a temporary one", str(func(c *Config) *string { return &c.DataDir })},
	{"redis", "REDIS_URL", "Redis `URL` of the activity buffer (redis://host:6379/0); empty: proxies write activity to the table directly", str(func(c *Config) *string { return &c.RedisURL })},
	{"postgres", "DATABASE_URL", "PostgreSQL `URL` of the workspaces table; empty: a table in memory (one process only)", str(func(c *Config) *string { return &c.PostgresURL })},
	{"redis-key", "ACTIVITY_KEY", "the activity buffer's sorted set (a Redis `key`)", str(func(c *Config) *string { return &c.RedisKey })},
	{"table", "WORKSPACES_TABLE", "the workspaces `table` (schema.table allowed)", str(func(c *Config) *string { return &c.Table })},
	{"channel", "WAKE_CHANNEL", "LISTEN/NOTIFY `channel` that wakes the controllers", str(func(c *Config) *string { return &c.Channel })},
	{"secret", "WORKSPACES_SECRET", "`secret` every workspace token is derived from (at least 16 bytes; the same on every proxy and controller; random when empty in one process). Prefer the variable: flags show in ps", str(func(c *Config) *string { return &c.Secret })},
	{"admin-token", "ADMIN_TOKEN", "`token` of the admin page and API (at least 16 bytes; random when empty, and printed)", str(func(c *Config) *string { return &c.AdminToken })},
	{"standby", "TTL_STANDBY_SECONDS", "a RUNNING workspace idle this many `seconds` (or a duration: 10m) goes to STANDBY", dur(func(c *Config) *time.Duration { return &c.Standby })},
	{"archive", "TTL_ARCHIVE_SECONDS", "a workspace in STANDBY this many `seconds` is ARCHIVED", dur(func(c *Config) *time.Duration { return &c.Archive })},
	{"flush-interval", "ACTIVITY_FLUSH_INTERVAL", "every how many `seconds` each proxy flushes its activity to the buffer", dur(func(c *Config) *time.Duration { return &c.FlushInterval })},
	{"tick-interval", "COORDINATOR_TTL_INTERVAL", "every how many `seconds` the TTL runner syncs activity to the table and applies the TTLs", dur(func(c *Config) *time.Duration { return &c.TickInterval })},
	{"reconcile-interval", "RECONCILE_INTERVAL_SECONDS", "every how many `seconds` each controller reconciles every workspace", dur(func(c *Config) *time.Duration { return &c.ReconcileInterval })},
	{"claim-grace", "CLAIM_GRACE_SECONDS", "how many `seconds` after a controller stops renewing its claim on an operation (it died) another takes the operation over", dur(func(c *Config) *time.Duration { return &c.ClaimGrace })},
	{"start-timeout", "START_TIMEOUT_SECONDS", "how many `seconds` a request waits for its workspace to start", dur(func(c *Config) *time.Duration { return &c.StartTimeout })},
	{"token-ttl", "TOKEN_TTL_SECONDS", "how many `seconds` a workspace link opens the workspace", dur(func(c *Config) *time.Duration { return &c.TokenTTL })},
	{"allowed-origins", "ALLOWED_ORIGINS", "comma-separated other `origins` whose pages may use the workspaces (host patterns, or scheme://host)", strs(func(c *Config) *[]string { return &c.AllowedOrigins })},
	{"log-level", "LOG_LEVEL", "`level` of the logs: debug, info, warn or error", lvl(func(c *Config) *slog.Level { return &c.LogLevel })},
}

// flagValue is a flag.Value made of two functions.
type flagValue struct {
	get func() string
	set func(string) error
}

func (v flagValue) String() string {
	if v.get == nil {
		return ""
	}
	return v.get()
}
func (v flagValue) Set(s string) error { return v.set(s) }

func str(field func(*Config) *string) func(*Config) flag.Value {
	return func(c *Config) flag.Value {
		p := field(c)
		return flagValue{func() string { return *p }, func(s string) error { *p = s; return nil }}
	}
}

// dur takes a number of seconds, as the design's variables are written, or
// a Go duration ("1.5s", "10m").
func dur(field func(*Config) *time.Duration) func(*Config) flag.Value {
	return func(c *Config) flag.Value {
		p := field(c)
		return flagValue{func() string { return p.String() }, func(s string) error {
			if f, err := strconv.ParseFloat(s, 64); err == nil {
				*p = time.Duration(f * float64(time.Second))
				return nil
			}
			d, err := time.ParseDuration(s)
			if err != nil {
				return fmt.Errorf("%q is neither a number of seconds nor a duration", s)
			}
			*p = d
			return nil
		}}
	}
}

func strs(field func(*Config) *[]string) func(*Config) flag.Value {
	return func(c *Config) flag.Value {
		p := field(c)
		return flagValue{func() string { return strings.Join(*p, ",") }, func(s string) error {
			*p = nil
			for _, f := range strings.Split(s, ",") {
				if f = strings.TrimSpace(f); f != "" {
					*p = append(*p, f)
				}
			}
			return nil
		}}
	}
}

// hosts takes host names as webguard.ParseHosts does: a value that is not
// a list of names (a URL, a name with a port) stops the start, rather than
// being a name that matches no request.
func hosts(field func(*Config) *[]string) func(*Config) flag.Value {
	return func(c *Config) flag.Value {
		p := field(c)
		return flagValue{func() string { return strings.Join(*p, ",") }, func(s string) error {
			hs, err := webguard.ParseHosts(s)
			if err != nil {
				return err
			}
			*p = hs
			return nil
		}}
	}
}

func lvl(field func(*Config) *slog.Level) func(*Config) flag.Value {
	return func(c *Config) flag.Value {
		p := field(c)
		return flagValue{func() string { return strings.ToLower(p.String()) }, func(s string) error { return p.UnmarshalText([]byte(s)) }}
	}
}

// parseConfig reads the component (args[0], if it names one), the
// environment through getenv, then the flags, and checks the result.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	c := DefaultConfig()
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		c.Component, args = args[0], args[1:]
		if a, ok := defaultAddrs[c.Component]; ok {
			c.Addr = a
		} else {
			return c, fmt.Errorf("unknown component %q: the components are %s (or none: all in one process)", c.Component, strings.Join(Components, ", "))
		}
	}
	fs := flag.NewFlagSet("workspaces", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// The environment first, then the flags over it: a flag wins.
	for _, st := range settings {
		v := st.value(&c)
		if e := getenv(st.env); e != "" {
			if err := v.Set(e); err != nil {
				return c, fmt.Errorf("%s: %w", st.env, err)
			}
		}
		fs.Var(v, st.flag, st.usage+" ["+st.env+"]")
	}
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: workspaces [proxy|runner|controller] [flags]\n\n"+
			"Cloud-IDE workspaces that go to STANDBY after TTL_STANDBY_SECONDS without activity and are\n"+
			"ARCHIVED TTL_ARCHIVE_SECONDS later. Without a component, everything runs in this process.\n"+
			"Every flag can also be set by the environment variable in brackets; a flag wins.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := c.check(); err != nil {
		return c, err
	}
	if c.Secret == "" {
		c.Secret, c.Generated = auth.Random(32), true
	}
	if c.AdminToken == "" {
		c.AdminToken, c.Generated = auth.Random(24), true
	}
	return c, nil
}

// check refuses a configuration the system cannot run with, naming the
// setting and its value.
func (c Config) check() error {
	var problems []error
	bad := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	alone := c.Component != "all"
	if alone && c.PostgresURL == "" {
		bad("%s alone needs the shared workspaces table: set DATABASE_URL (-postgres)", c.Component)
	}
	if alone && c.Component != "runner" && c.Secret == "" {
		bad("%s alone needs WORKSPACES_SECRET, the same on every proxy and controller", c.Component)
	}
	if alone && c.Component == "proxy" && c.AdminToken == "" {
		bad("proxy alone needs ADMIN_TOKEN, the same on every proxy")
	}
	if c.RedisURL != "" && c.PostgresURL == "" {
		bad("REDIS_URL without DATABASE_URL: the buffer needs the shared table to drain into")
	}
	if c.Secret != "" && len(c.Secret) < auth.MinSecret {
		bad("WORKSPACES_SECRET is %d bytes; it needs at least %d", len(c.Secret), auth.MinSecret)
	}
	if c.AdminToken != "" && len(c.AdminToken) < auth.MinSecret {
		bad("ADMIN_TOKEN is %d bytes; it needs at least %d", len(c.AdminToken), auth.MinSecret)
	}
	for _, v := range []struct {
		name string
		d    time.Duration
	}{
		{"TTL_STANDBY_SECONDS", c.Standby}, {"TTL_ARCHIVE_SECONDS", c.Archive},
		{"ACTIVITY_FLUSH_INTERVAL", c.FlushInterval}, {"COORDINATOR_TTL_INTERVAL", c.TickInterval},
		{"RECONCILE_INTERVAL_SECONDS", c.ReconcileInterval}, {"CLAIM_GRACE_SECONDS", c.ClaimGrace}, {"START_TIMEOUT_SECONDS", c.StartTimeout},
		{"TOKEN_TTL_SECONDS", c.TokenTTL},
	} {
		if v.d <= 0 {
			bad("%s (%v) must be positive", v.name, v.d)
		}
	}
	// Activity needs a flush and a tick to reach the table: a shorter
	// standby TTL would stop workspaces in use.
	if c.Standby <= c.FlushInterval+c.TickInterval {
		bad("TTL_STANDBY_SECONDS (%v) must be above ACTIVITY_FLUSH_INTERVAL + COORDINATOR_TTL_INTERVAL (%v + %v): activity takes that long to reach the table",
			c.Standby, c.FlushInterval, c.TickInterval)
	}
	if c.Addr == "" {
		bad("LISTEN_ADDR is empty")
	}
	return errors.Join(problems...)
}
