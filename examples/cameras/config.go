package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ttlkit/ttlkit/examples/internal/webguard"
	"github.com/ttlkit/ttlkit/hysteresis"
	"github.com/ttlkit/ttlkit/hysteresis/sysload"
)

// Config is every setting of the server. Each has a flag and an
// environment variable (the design's name where it has one); a flag wins
// over the variable, the variable over the default.
type Config struct {
	Addr        string        // -addr, LISTEN_ADDR
	Hosts       []string      // -allowed-hosts, ALLOWED_HOSTS: names the server answers to besides loopback and addresses
	Store       string        // -store, STORE: memory, mysql, postgres or redis
	DSN         string        // -dsn, STORE_DSN: the MySQL DSN, PostgreSQL URL or Redis URL
	RedisPrefix string        // -redis-prefix, REDIS_PREFIX
	Cameras     []string      // -cameras, CAMERAS
	SessionKey  string        // -session-key, SESSION_KEY: signs session cookies; random when empty
	SessionTTL  time.Duration // -session-ttl, SESSION_TTL_SEC: a session unused this long expires
	Suggest     bool          // -suggest, SUGGEST_ENABLED: serve the suggest streams
	LogLevel    slog.Level

	// The budget (design §2).
	TotalStreamUnits      int // TOTAL_STREAM_UNITS
	MaxUIUsers            int // MAX_UI_USERS
	ReservedBaselineUnits int // RESERVED_BASELINE_UNITS
	SubStreamCost         int // SUB_STREAM_COST
	MainStreamCost        int // MAIN_STREAM_COST

	// Leases (design §3.3, §10.1).
	ModalTTL          time.Duration // MODAL_TTL_SEC
	HeartbeatInterval time.Duration // HEARTBEAT_INTERVAL_SEC
	HeartbeatGrace    time.Duration // HEARTBEAT_GRACE_SEC
	CleanupInterval   time.Duration // LEASE_CLEANUP_SEC

	// The overload gate (design §5): thresholds, hold and sampling.
	CPU, Memory  Thresholds // CPU_*_PERCENT, MEMORY_*_PERCENT
	SwapMB       Thresholds // SWAP_*_MB
	OverloadHold time.Duration
	LoadInterval time.Duration

	// admission_metrics (design §7.2, §10.1).
	MetricsInterval      time.Duration // METRICS_INTERVAL_SEC
	MetricsRetention     time.Duration // METRICS_RETENTION_HOURS
	MetricsPurgeInterval time.Duration // METRICS_PURGE_INTERVAL_SEC
}

// Thresholds are one signal's levels for the overload gate.
type Thresholds struct{ Warn, Trip, Recover float64 }

// DefaultCameras is the camera list when CAMERAS is not set.
var DefaultCameras = []string{
	"cam_1f_01", "cam_1f_02", "cam_1f_03", "cam_1f_04",
	"cam_2f_11", "cam_2f_12", "cam_2f_19", "cam_2f_20",
	"cam_3f_05", "cam_3f_07", "cam_b1_01", "cam_gate",
}

// DefaultConfig returns the design's values.
func DefaultConfig() Config {
	return Config{
		Addr:                  "127.0.0.1:8080",
		Store:                 "memory",
		RedisPrefix:           "cameras",
		Cameras:               DefaultCameras,
		SessionTTL:            24 * time.Hour,
		Suggest:               true,
		LogLevel:              slog.LevelInfo,
		TotalStreamUnits:      50,
		MaxUIUsers:            10,
		ReservedBaselineUnits: 5,
		SubStreamCost:         1,
		MainStreamCost:        2,
		ModalTTL:              300 * time.Second,
		HeartbeatInterval:     30 * time.Second,
		HeartbeatGrace:        45 * time.Second,
		CleanupInterval:       10 * time.Second,
		CPU:                   Thresholds{70, 85, 60},
		Memory:                Thresholds{75, 90, 70},
		SwapMB:                Thresholds{50, 100, 50},
		OverloadHold:          60 * time.Second,
		LoadInterval:          time.Second,
		MetricsInterval:       10 * time.Second,
		MetricsRetention:      24 * time.Hour,
		MetricsPurgeInterval:  time.Hour,
	}
}

// ReservedSuggestUnits is MAX_UI_USERS × 1: the worst case of one suggest
// sub stream per user (design §2.2).
func (c Config) ReservedSuggestUnits() int { return c.MaxUIUsers * 1 }

// MaxSeats is how many UI users can have a suggest stream at once: as many
// sub streams as the suggest reserve holds, which is MAX_UI_USERS when a sub
// stream costs 1 unit (with SUB_STREAM_COST 2 the design's reserve of
// MAX_UI_USERS × 1 units seats half as many).
func (c Config) MaxSeats() int { return c.ReservedSuggestUnits() / c.SubStreamCost }

// ModalBudget is TOTAL_STREAM_UNITS − RESERVED_BASELINE_UNITS −
// RESERVED_SUGGEST_UNITS: the units camera modals share (35 by default).
func (c Config) ModalBudget() int {
	return c.TotalStreamUnits - c.ReservedBaselineUnits - c.ReservedSuggestUnits()
}

// mib is 2^20 bytes: the swap settings are in MiB, the swap signal in bytes.
const mib = 1 << 20

// Signals returns the overload gate's signals.
func (c Config) Signals() []hysteresis.Signal {
	return []hysteresis.Signal{
		{Name: sysload.CPU, Warn: c.CPU.Warn, Trip: c.CPU.Trip, Recover: c.CPU.Recover},
		{Name: sysload.Memory, Warn: c.Memory.Warn, Trip: c.Memory.Trip, Recover: c.Memory.Recover},
		{Name: sysload.Swap, Warn: c.SwapMB.Warn * mib, Trip: c.SwapMB.Trip * mib, Recover: c.SwapMB.Recover * mib},
	}
}

// setting ties a flag to its environment variable.
type setting struct {
	flag, env string
}

// settings lists every flag with its variable, in the order of -help.
var settings = []setting{
	{"addr", "LISTEN_ADDR"},
	{"allowed-hosts", "ALLOWED_HOSTS"},
	{"store", "STORE"},
	{"dsn", "STORE_DSN"},
	{"redis-prefix", "REDIS_PREFIX"},
	{"cameras", "CAMERAS"},
	{"session-key", "SESSION_KEY"},
	{"session-ttl", "SESSION_TTL_SEC"},
	{"suggest", "SUGGEST_ENABLED"},
	{"log-level", "LOG_LEVEL"},
	{"total-stream-units", "TOTAL_STREAM_UNITS"},
	{"max-ui-users", "MAX_UI_USERS"},
	{"reserved-baseline-units", "RESERVED_BASELINE_UNITS"},
	{"sub-stream-cost", "SUB_STREAM_COST"},
	{"main-stream-cost", "MAIN_STREAM_COST"},
	{"modal-ttl", "MODAL_TTL_SEC"},
	{"heartbeat-interval", "HEARTBEAT_INTERVAL_SEC"},
	{"heartbeat-grace", "HEARTBEAT_GRACE_SEC"},
	{"cleanup-interval", "LEASE_CLEANUP_SEC"},
	{"cpu-warn", "CPU_WARN_PERCENT"},
	{"cpu-trip", "CPU_TRIP_PERCENT"},
	{"cpu-recover", "CPU_RECOVER_PERCENT"},
	{"memory-warn", "MEMORY_WARN_PERCENT"},
	{"memory-trip", "MEMORY_TRIP_PERCENT"},
	{"memory-recover", "MEMORY_RECOVER_PERCENT"},
	{"swap-warn", "SWAP_WARN_MB"},
	{"swap-trip", "SWAP_TRIP_MB"},
	{"swap-recover", "SWAP_RECOVER_MB"},
	{"overload-hold", "OVERLOAD_RECOVER_SEC"},
	{"load-interval", "LOAD_SAMPLE_SEC"},
	{"metrics-interval", "METRICS_INTERVAL_SEC"},
	{"metrics-retention", "METRICS_RETENTION_HOURS"},
	{"metrics-purge-interval", "METRICS_PURGE_INTERVAL_SEC"},
}

// duration is a flag.Value for a time.Duration that also takes a bare number
// of units (seconds, or hours), as the environment variables are written.
type duration struct {
	d    *time.Duration
	unit time.Duration
}

func (v duration) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v duration) Set(s string) error {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		*v.d = time.Duration(f * float64(v.unit))
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is neither a number of %s nor a duration", s, unitName(v.unit))
	}
	*v.d = d
	return nil
}

func unitName(u time.Duration) string {
	if u == time.Hour {
		return "hours"
	}
	return "seconds"
}

// list is a flag.Value for a comma-separated list.
type list struct{ l *[]string }

func (v list) String() string {
	if v.l == nil {
		return ""
	}
	return strings.Join(*v.l, ",")
}

func (v list) Set(s string) error {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	*v.l = out
	return nil
}

// level is a flag.Value for a slog.Level.
type level struct{ l *slog.Level }

func (v level) String() string {
	if v.l == nil {
		return ""
	}
	return strings.ToLower(v.l.String())
}
func (v level) Set(s string) error { return v.l.UnmarshalText([]byte(s)) }

// parseConfig reads the flags in args, then the environment through getenv
// for every setting no flag set, and checks the result.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (Config, error) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("cameras", flag.ContinueOnError)
	fs.SetOutput(stderr)
	env := map[string]string{}
	for _, s := range settings {
		env[s.flag] = s.env
	}
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: cameras [flags]\n\n"+
			"A camera admission server: a page of live cameras whose full-size streams are\n"+
			"leased from a shared budget. Every flag can also be set by the environment\n"+
			"variable shown after it; a flag wins.\n\n")
		fs.VisitAll(func(f *flag.Flag) {
			name, usage := flag.UnquoteUsage(f)
			fmt.Fprintf(stderr, "  -%s %s\t(%s)\n    \t%s (default %q)\n", f.Name, name, env[f.Name], usage, f.DefValue)
		})
	}
	fs.StringVar(&c.Addr, "addr", c.Addr, "HTTP `address` to listen on")
	fs.Func("allowed-hosts", "comma-separated host `names` the server answers to besides localhost and IP addresses (.example.com: it and its subdomains); a request for any other name is refused (DNS rebinding)", func(v string) error {
		hosts, err := webguard.ParseHosts(v)
		c.Hosts = hosts
		return err
	})
	fs.StringVar(&c.Store, "store", c.Store, "where leases and admission_metrics live: memory, mysql, postgres or redis")
	fs.StringVar(&c.DSN, "dsn", c.DSN, "the store's MySQL DSN, PostgreSQL URL or Redis URL")
	fs.StringVar(&c.RedisPrefix, "redis-prefix", c.RedisPrefix, "Redis key `prefix`; instances with the same prefix share the budget")
	fs.Var(list{&c.Cameras}, "cameras", "comma-separated camera `ids`")
	fs.StringVar(&c.SessionKey, "session-key", c.SessionKey, "`secret` that signs session cookies (at least 16 bytes; random when empty; give every instance the same)")
	fs.Var(duration{&c.SessionTTL, time.Second}, "session-ttl", "a session unused this long expires, with its leases (seconds or a duration)")
	fs.BoolVar(&c.Suggest, "suggest", c.Suggest, "serve the suggest streams (counted as one sub stream per active user)")
	fs.Var(level{&c.LogLevel}, "log-level", "debug, info, warn or error")
	fs.IntVar(&c.TotalStreamUnits, "total-stream-units", c.TotalStreamUnits, "stream units the camera hardware can serve")
	fs.IntVar(&c.MaxUIUsers, "max-ui-users", c.MaxUIUsers, "most concurrent page users; reserves one suggest unit each")
	fs.IntVar(&c.ReservedBaselineUnits, "reserved-baseline-units", c.ReservedBaselineUnits, "units reserved for patrol, recording and thumbnails")
	fs.IntVar(&c.SubStreamCost, "sub-stream-cost", c.SubStreamCost, "units of a sub (small) stream")
	fs.IntVar(&c.MainStreamCost, "main-stream-cost", c.MainStreamCost, "units of a main (large) stream")
	fs.Var(duration{&c.ModalTTL, time.Second}, "modal-ttl", "longest a modal stays open (seconds or a duration)")
	fs.Var(duration{&c.HeartbeatInterval, time.Second}, "heartbeat-interval", "how often the page heartbeats its modal's lease")
	fs.Var(duration{&c.HeartbeatGrace, time.Second}, "heartbeat-grace", "a lease without a heartbeat for this long expires")
	fs.Var(duration{&c.CleanupInterval, time.Second}, "cleanup-interval", "how often expired leases are cleaned up")
	fs.Float64Var(&c.CPU.Warn, "cpu-warn", c.CPU.Warn, "CPU % at which the gate warns")
	fs.Float64Var(&c.CPU.Trip, "cpu-trip", c.CPU.Trip, "CPU % at which new modals are refused (SYSTEM_OVERLOAD)")
	fs.Float64Var(&c.CPU.Recover, "cpu-recover", c.CPU.Recover, "CPU % to stay below, for the hold, before modals are admitted again")
	fs.Float64Var(&c.Memory.Warn, "memory-warn", c.Memory.Warn, "memory % at which the gate warns")
	fs.Float64Var(&c.Memory.Trip, "memory-trip", c.Memory.Trip, "memory % at which new modals are refused")
	fs.Float64Var(&c.Memory.Recover, "memory-recover", c.Memory.Recover, "memory % to stay below, for the hold, before recovering")
	fs.Float64Var(&c.SwapMB.Warn, "swap-warn", c.SwapMB.Warn, "swap MiB in use at which the gate warns")
	fs.Float64Var(&c.SwapMB.Trip, "swap-trip", c.SwapMB.Trip, "swap MiB in use at which new modals are refused")
	fs.Float64Var(&c.SwapMB.Recover, "swap-recover", c.SwapMB.Recover, "swap MiB to stay below, for the hold, before recovering")
	fs.Var(duration{&c.OverloadHold, time.Second}, "overload-hold", "how long every signal must stay below recover before the gate reopens")
	fs.Var(duration{&c.LoadInterval, time.Second}, "load-interval", "how often CPU, memory and swap are sampled")
	fs.Var(duration{&c.MetricsInterval, time.Second}, "metrics-interval", "how often a row of admission_metrics is recorded")
	fs.Var(duration{&c.MetricsRetention, time.Hour}, "metrics-retention", "how long admission_metrics rows are kept (hours or a duration)")
	fs.Var(duration{&c.MetricsPurgeInterval, time.Second}, "metrics-purge-interval", "how often old admission_metrics rows are purged")

	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, s := range settings {
		v := getenv(s.env)
		if set[s.flag] || v == "" {
			continue
		}
		if err := fs.Set(s.flag, v); err != nil {
			return c, fmt.Errorf("%s: %w", s.env, err)
		}
	}
	return c, c.check()
}

var cameraID = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// check refuses a configuration the server cannot run with, naming the
// setting and its value.
func (c Config) check() error {
	var problems []error
	bad := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	switch c.Store {
	case "memory":
	case "mysql", "postgres", "redis":
		if c.DSN == "" {
			bad("-store %s needs -dsn (STORE_DSN)", c.Store)
		}
	default:
		bad("STORE (%q) must be memory, mysql, postgres or redis", c.Store)
	}
	if len(c.Cameras) == 0 {
		bad("CAMERAS is empty")
	}
	seen := map[string]bool{}
	for _, id := range c.Cameras {
		if !cameraID.MatchString(id) {
			bad("CAMERAS: %q is not a camera id (a-z, 0-9, _; at most 64)", id)
		}
		if seen[id] {
			bad("CAMERAS: %q is listed twice", id)
		}
		seen[id] = true
	}
	if c.SessionTTL < c.ModalTTL {
		bad("SESSION_TTL_SEC (%v) must be at least MODAL_TTL_SEC (%v)", c.SessionTTL, c.ModalTTL)
	}
	if c.SessionKey != "" && len(c.SessionKey) < 16 {
		bad("SESSION_KEY is %d bytes; it needs at least 16", len(c.SessionKey))
	}
	for _, v := range []struct {
		name string
		n    int
	}{
		{"TOTAL_STREAM_UNITS", c.TotalStreamUnits}, {"SUB_STREAM_COST", c.SubStreamCost}, {"MAIN_STREAM_COST", c.MainStreamCost},
	} {
		if v.n < 1 {
			bad("%s (%d) must be at least 1", v.name, v.n)
		}
	}
	if c.MaxUIUsers < 0 || c.ReservedBaselineUnits < 0 {
		bad("MAX_UI_USERS (%d) and RESERVED_BASELINE_UNITS (%d) must not be negative", c.MaxUIUsers, c.ReservedBaselineUnits)
	}
	if c.MainStreamCost <= c.SubStreamCost {
		bad("MAIN_STREAM_COST (%d) must be above SUB_STREAM_COST (%d)", c.MainStreamCost, c.SubStreamCost)
	}
	if b := c.ModalBudget(); b < c.MainStreamCost {
		bad("the modal budget, TOTAL_STREAM_UNITS − RESERVED_BASELINE_UNITS − MAX_UI_USERS (%d − %d − %d = %d), is below MAIN_STREAM_COST (%d)",
			c.TotalStreamUnits, c.ReservedBaselineUnits, c.ReservedSuggestUnits(), b, c.MainStreamCost)
	}
	for _, v := range []struct {
		name string
		d    time.Duration
	}{
		{"MODAL_TTL_SEC", c.ModalTTL}, {"HEARTBEAT_INTERVAL_SEC", c.HeartbeatInterval}, {"HEARTBEAT_GRACE_SEC", c.HeartbeatGrace},
		{"LEASE_CLEANUP_SEC", c.CleanupInterval}, {"LOAD_SAMPLE_SEC", c.LoadInterval}, {"METRICS_INTERVAL_SEC", c.MetricsInterval},
		{"METRICS_RETENTION_HOURS", c.MetricsRetention}, {"METRICS_PURGE_INTERVAL_SEC", c.MetricsPurgeInterval},
	} {
		if v.d <= 0 {
			bad("%s (%v) must be positive", v.name, v.d)
		}
	}
	if c.OverloadHold < 0 {
		bad("OVERLOAD_RECOVER_SEC (%v) is negative", c.OverloadHold)
	}
	if c.HeartbeatInterval >= c.HeartbeatGrace {
		bad("HEARTBEAT_INTERVAL_SEC (%v) must be below HEARTBEAT_GRACE_SEC (%v), or leases lapse between heartbeats", c.HeartbeatInterval, c.HeartbeatGrace)
	}
	// Checked in the units of the settings (swap in MiB), so that an error
	// quotes the values as they were written.
	typed := c.Signals()
	typed[2].Warn, typed[2].Trip, typed[2].Recover = c.SwapMB.Warn, c.SwapMB.Trip, c.SwapMB.Recover
	if _, err := hysteresis.New(typed, hysteresis.Options{Hold: c.OverloadHold}); err != nil {
		bad("overload thresholds: %v", err)
	}
	return errors.Join(problems...)
}
